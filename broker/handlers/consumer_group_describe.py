"""ConsumerGroupDescribe · v0-1 · state, epochs, assignor and members of KIP-848 consumer groups.

Behaviour: needs DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED). A consumer group led here is described as
Kafka's ConsumerGroup.asDescribedGroup: group and assignment epochs, the assignor most members prefer (else the
default), and per member its subscription, current assignment (what it holds, not what it is revoking) and target
assignment, topic ids with their names. A group id unknown here or held by a classic group is GROUP_ID_NOT_FOUND
(clients then ask DescribeGroups); NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as for the other group APIs.
Version notes: v1 (KIP-1099) adds member_type: 1 for every member (no classic members in consumer groups here).
Skipped: nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_operations
from epoch_broker.broker.services import BrokerServices, group_coordinator
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import consumer_group_describe as messages

R = messages.RESPONSE
CONSUMER_MEMBER = 1  # KIP-1099's member_type of a consumer-protocol member


@handles(messages.API, "0-1")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    coordinator = group_coordinator(context.services)
    topics = context.services.metadata.topics_by_id
    response = R.cls()
    for group_id in request.group_ids:
        if not context.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            response.groups.append(R.DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                                    group_id=group_id))
            continue
        error, group = coordinator.describe_consumer_group(group_id)
        if group is None:
            response.groups.append(R.DescribedGroup(
                error_code=error, group_id=group_id, group_state="Dead",
                error_message=f"Group {group_id} is not a consumer group." if error is ErrorCode.GROUP_ID_NOT_FOUND
                else None))
            continue

        def assignment(partitions: Mapping[bytes, frozenset[int]]) -> Any:
            return R.Assignment(topic_partitions=[
                R.TopicPartitions(topic_id=topic_id, topic_name=topics[topic_id].name if topic_id in topics else "",
                                  partitions=sorted(p))
                for topic_id, p in sorted(partitions.items()) if p])

        described = R.DescribedGroup(
            group_id=group_id, group_state=group.state_name, group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=group.preferred_assignor(coordinator.consumer_group_config.assignors[0]),
            members=[
                R.Member(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.subscription.rack_id,
                         member_epoch=m.member_epoch, client_id=m.subscription.client_id,
                         client_host=m.subscription.client_host,
                         subscribed_topic_names=list(m.subscription.subscribed_topic_names),
                         subscribed_topic_regex=m.subscription.subscribed_topic_regex,
                         assignment=assignment(m.assignment.assigned),
                         target_assignment=assignment(group.target_of(m.member_id)),
                         member_type=CONSUMER_MEMBER)
                for m in group.members.values()
            ])
        if request.include_authorized_operations:
            described.authorized_operations = authorized_operations(context, ResourceType.GROUP, group_id)
        response.groups.append(described)
    return response
