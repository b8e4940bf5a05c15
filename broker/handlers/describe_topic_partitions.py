"""DescribeTopicPartitions · v0 · topics and their partitions, paged with a cursor (KIP-966).

Behaviour: as Kafka's DescribeTopicPartitionsRequestHandler: the topics named (none: every topic), in name order,
from the cursor's topic on; each topic's partitions in index order, the cursor's topic from the cursor's partition;
at most ResponsePartitionLimit partitions an answer (at least 1, at most Kafka's 2000). When the limit stops the
answer, NextCursor names the first partition left out, or the next topic's partition 0 when a topic ended exactly
at the limit. Authorization as Metadata: a named topic the principal may not describe answers
TOPIC_AUTHORIZATION_FAILED without partitions (before its existence is looked at), and all-topics leaves such topics
out; an unknown named topic answers UNKNOWN_TOPIC_OR_PARTITION. Per partition: leader, leader epoch, replicas, ISR
and offline (fenced) replicas, as Metadata answers; topic_authorized_operations always filled, as Kafka does.
Version notes: v0 only.
Skipped: eligible leader replicas and last known ELR (KIP-966's ELR is not kept here): null, as Kafka answers with
ELR off.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from epoch_broker.broker.handlers.metadata import INTERNAL_TOPICS
from epoch_broker.broker.metadata.image import TopicState
from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names, authorized_operations
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import describe_topic_partitions as messages

R = messages.RESPONSE
MAX_PARTITIONS = 2000  # Kafka's max.request.partition.size.limit default


@handles(messages.API, "0")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    cache = context.services.metadata
    cursor = request.cursor
    everything = not request.topics
    names = sorted(cache.topics_by_name) if everything else sorted({t.name for t in request.topics})
    if cursor is not None:
        names = [name for name in names if name >= cursor.topic_name]
    describable = authorized_names(context, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    if everything:
        names = [name for name in names if name in describable]
    budget = max(1, min(request.response_partition_limit, MAX_PARTITIONS))
    response = R.cls()
    for position, name in enumerate(names):
        if name not in describable:
            response.topics.append(R.DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name))
            continue
        state = cache.topics_by_name.get(name)
        if state is None:
            response.topics.append(R.DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name))
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        topic = _topic(context, state)
        for partition in _partitions(context, state, first):
            if budget == 0:
                response.next_cursor = R.Cursor(topic_name=name, partition_index=partition.partition_index)
                break
            topic.partitions.append(partition)
            budget -= 1
        response.topics.append(topic)
        if response.next_cursor is not None:
            break
        if budget == 0 and position + 1 < len(names):
            response.next_cursor = R.Cursor(topic_name=names[position + 1], partition_index=0)
            break
    return response


def _topic(context: RequestContext[BrokerServices], state: TopicState) -> Any:
    return R.DescribeTopicPartitionsResponseTopic(
        error_code=ErrorCode.NONE, name=state.name, topic_id=state.topic_id, is_internal=state.name in INTERNAL_TOPICS,
        topic_authorized_operations=authorized_operations(context, ResourceType.TOPIC, state.name))


def _partitions(context: RequestContext[BrokerServices], state: TopicState, first: int) -> Iterator[Any]:
    fenced = context.services.metadata.fenced_brokers
    for p in sorted(state.partitions.values(), key=lambda p: p.partition):
        if p.partition >= first:
            yield R.DescribeTopicPartitionsResponsePartition(
                error_code=ErrorCode.NONE if p.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                partition_index=p.partition, leader_id=p.leader, leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas), isr_nodes=list(p.isr),
                offline_replicas=[r for r in p.replicas if r in fenced])
