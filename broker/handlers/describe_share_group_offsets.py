"""DescribeShareGroupOffsets · v0-1 · the share-partition start offsets of share groups (KIP-932).

Behaviour: as Kafka 4.2's KafkaApis and GroupCoordinatorService.describeShareGroupOffsets. Per group: DESCRIBE on
the group, else GROUP_AUTHORIZATION_FAILED for it; NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS /
COORDINATOR_NOT_AVAILABLE as for the other group APIs. Topics named: those without DESCRIBE answer
TOPIC_AUTHORIZATION_FAILED per partition; the others the stored state (broker/groups/share_state.py): start offset,
leader epoch and lag. Topics null: every share-partition of the group whose start offset is set, the topics
without DESCRIBE left out. As Kafka, the group itself is not looked up: an unknown group, or one of another type,
has no state, and a share-partition without state answers start offset -1 (a missing topic with the zero id), not
an error; an empty topic list answers no topics.
Version notes: v1 (KIP-1226) adds the lag: the high watermark less the start offset less the records past it
already acknowledged or archived, -1 when the start offset is not set or the partition is not led by this broker
(Kafka asks the leader with ListOffsets; not done here).
Skipped: nothing else.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import BrokerServices, group_coordinator
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import describe_share_group_offsets as messages

R = messages.RESPONSE


@handles(messages.API, "0-1")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    coordinator = group_coordinator(context.services)
    response = R.cls()
    for asked in request.groups:
        group = R.DescribeShareGroupOffsetsResponseGroup(group_id=asked.group_id)
        response.groups.append(group)
        if not context.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, asked.group_id):
            group.error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED
            continue
        if asked.topics is None:
            error, described = coordinator.describe_share_group_offsets(asked.group_id, None)
            readable = authorized_names(context, AclOperation.DESCRIBE, ResourceType.TOPIC, (d[0] for d in described))
            denied = []
        else:
            readable = authorized_names(context, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                        (t.topic_name for t in asked.topics))
            error, described = coordinator.describe_share_group_offsets(
                asked.group_id, [(t.topic_name, t.partitions) for t in asked.topics if t.topic_name in readable])
            denied = [t for t in asked.topics if t.topic_name not in readable]
        if error is not ErrorCode.NONE:
            group.error_code = error
            continue
        group.topics = [
            R.DescribeShareGroupOffsetsResponseTopic(topic_name=name, topic_id=topic_id, partitions=[
                R.DescribeShareGroupOffsetsResponsePartition(
                    partition_index=p.partition, start_offset=p.start_offset, leader_epoch=p.leader_epoch, lag=p.lag)
                for p in partitions])
            for name, topic_id, partitions in described if name in readable]
        group.topics += [
            R.DescribeShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name, topic_id=_topic_id(context, t.topic_name), partitions=[
                    R.DescribeShareGroupOffsetsResponsePartition(
                        partition_index=p, start_offset=-1, leader_epoch=0,
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    for p in t.partitions])
            for t in denied]
    return response


def _topic_id(context: RequestContext[BrokerServices], name: str) -> bytes:
    topic = context.services.metadata.topics_by_name.get(name)
    return bytes(16) if topic is None else bytes(topic.topic_id)
