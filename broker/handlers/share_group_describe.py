"""ShareGroupDescribe · v1 · state, epochs and members of share groups (KIP-932).

Behaviour: needs DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED). A share group led here is described as
Kafka's ShareGroup.asDescribedGroup: group and assignment epochs, the "simple" assignor, and per member its
subscription and current assignment, topic ids with their names. A group id unknown here or held by another
group type is GROUP_ID_NOT_FOUND; NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as for the other group APIs.
Version notes: v1 only (v0 was Kafka 4.0's early access).
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_operations
from epoch_broker.broker.services import BrokerServices, group_coordinator
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import share_group_describe as messages

R = messages.RESPONSE
SHARE_ASSIGNOR = "simple"  # Kafka's only share group assignor


@handles(messages.API, "1")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    coordinator = group_coordinator(context.services)
    topics = context.services.metadata.topics_by_id
    response = R.cls()
    for group_id in request.group_ids:
        if not context.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            response.groups.append(R.DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                                    group_id=group_id, group_state="Dead"))
            continue
        error, group = coordinator.describe_share_group(group_id)
        if group is None:
            response.groups.append(R.DescribedGroup(
                error_code=error, group_id=group_id, group_state="Dead",
                error_message=f"Group {group_id} is not a share group." if error is ErrorCode.GROUP_ID_NOT_FOUND
                else None))
            continue
        described = R.DescribedGroup(
            group_id=group_id, group_state=group.state_name, group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch, assignor_name=SHARE_ASSIGNOR,
            members=[
                R.Member(member_id=m.member_id, rack_id=m.subscription.rack_id, member_epoch=m.member_epoch,
                         client_id=m.subscription.client_id, client_host=m.subscription.client_host,
                         subscribed_topic_names=list(m.subscription.subscribed_topic_names),
                         assignment=R.Assignment(topic_partitions=[
                             R.TopicPartitions(topic_id=topic_id,
                                               topic_name=topics[topic_id].name if topic_id in topics else "",
                                               partitions=sorted(p))
                             for topic_id, p in sorted(m.assignment.assigned.items()) if p]))
                for m in group.members.values()
            ])
        if request.include_authorized_operations:
            described.authorized_operations = authorized_operations(context, ResourceType.GROUP, group_id)
        response.groups.append(described)
    return response
