"""AlterShareGroupOffsets · v0 · set the share-partition start offsets of an empty share group (KIP-932).

Behaviour: as Kafka 4.2's KafkaApis and GroupMetadataManager.alterShareGroupOffsets. READ on the group, else
GROUP_AUTHORIZATION_FAILED (nothing set); a topic without READ answers TOPIC_AUTHORIZATION_FAILED per partition,
one that does not exist (or a partition past its count) UNKNOWN_TOPIC_OR_PARTITION; the others are set at the
group's coordinator (broker/groups/coordinator.py): a missing group is made an empty share group, a group of
another type is GROUP_ID_NOT_FOUND, one with members NON_EMPTY_GROUP (Kafka's GroupNotEmptyException), at the top
of the response with Kafka's message. Each share-partition gets a new snapshot at the next state epoch with the
given start offset and nothing in flight; its leader's next write is fenced (FENCED_STATE_EPOCH) and it reads the
new state.
Version notes: v0 only (Kafka 4.2).
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.groups.coordinator import TOPIC_NOT_HOSTED, ShareOffsetsError
from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import BrokerServices, group_coordinator
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import alter_share_group_offsets as messages

R = messages.RESPONSE


@handles(messages.API, "0")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    if not context.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return R.cls(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    readable = authorized_names(context, AclOperation.READ, ResourceType.TOPIC, (t.topic_name for t in request.topics))
    result = await group_coordinator(context.services).alter_share_group_offsets(
        request.group_id, [(t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions])
                           for t in request.topics if t.topic_name in readable])
    if isinstance(result, ShareOffsetsError):
        return R.cls(error_code=result.error, error_message=result.message)
    topics = context.services.metadata.topics_by_name
    denied = [
        R.AlterShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=bytes(topics[t.topic_name].topic_id) if t.topic_name in topics
            else bytes(16), partitions=[
                R.AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index,
                                                          error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                for p in t.partitions])
        for t in request.topics if t.topic_name not in readable]
    return R.cls(responses=[
        *(R.AlterShareGroupOffsetsResponseTopic(topic_name=name, topic_id=topic_id, partitions=[
            R.AlterShareGroupOffsetsResponsePartition(
                partition_index=partition, error_code=error,
                error_message=TOPIC_NOT_HOSTED if error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else None)
            for partition, error in partitions])
          for name, topic_id, partitions in result),
        *denied])
