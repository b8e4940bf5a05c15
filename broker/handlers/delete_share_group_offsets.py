"""DeleteShareGroupOffsets · v0 · forget the share-group state of whole topics of an empty share group (KIP-932).

Behaviour: as Kafka 4.2's KafkaApis and GroupCoordinatorShard.initiateDeleteShareGroupOffsets. DELETE on the group,
else GROUP_AUTHORIZATION_FAILED (as OffsetDelete); a topic without READ answers TOPIC_AUTHORIZATION_FAILED. At the
group's coordinator (broker/groups/coordinator.py): GROUP_ID_NOT_FOUND for an unknown group or one of another type,
NON_EMPTY_GROUP for one with members, at the top with Kafka's message; per topic UNKNOWN_TOPIC_OR_PARTITION when
it does not exist or the group has no start offset set on it ("There is no offset information to delete."), else
its share-partitions start afresh: a new snapshot at the next state epoch with no start offset, so the next leader
to read it starts where share.auto.offset.reset says, and a leader holding the old state is fenced
(FENCED_STATE_EPOCH) at its next write. No group is made.
Version notes: v0 only (Kafka 4.2).
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.groups.coordinator import ShareOffsetsError
from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import BrokerServices, group_coordinator
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import delete_share_group_offsets as messages

R = messages.RESPONSE


@handles(messages.API, "0")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    if not context.authorized(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return R.cls(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    names = [t.topic_name for t in request.topics]
    readable = authorized_names(context, AclOperation.READ, ResourceType.TOPIC, names)
    result = await group_coordinator(context.services).delete_share_group_offsets(
        request.group_id, [name for name in names if name in readable])
    if isinstance(result, ShareOffsetsError):
        return R.cls(error_code=result.error, error_message=result.message)
    topics = context.services.metadata.topics_by_name
    return R.cls(responses=[
        *(R.DeleteShareGroupOffsetsResponseTopic(topic_name=name, topic_id=topic_id, error_code=error,
                                                 error_message=message)
          for name, topic_id, error, message in result),
        *(R.DeleteShareGroupOffsetsResponseTopic(
            topic_name=name, topic_id=bytes(topics[name].topic_id) if name in topics else bytes(16),
            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
          for name in dict.fromkeys(names) if name not in readable)])
