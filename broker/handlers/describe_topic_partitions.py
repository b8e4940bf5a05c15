"""DescribeTopicPartitions · v0 · topics and their partitions, paged with a cursor (KIP-966).

Behaviour: as Kafka's DescribeTopicPartitionsRequestHandler and KRaftMetadataCache: the topics named (none: every
topic) from the cursor's topic on, in name order; each topic's partitions in index order, the cursor's topic from
the cursor's partition; at most ResponsePartitionLimit partitions an answer (at least 1, at most Kafka's 2000).
When the limit stops the answer inside a topic, NextCursor names its first partition left out; when a topic ends
exactly at the limit and another (authorized) topic follows, NextCursor names that topic's partition 0, whether it
exists or not. A cursor whose topic is not among those named, or whose partition is negative, is INVALID_REQUEST
for every topic named (Kafka's error response). Authorization as Metadata: a named topic the principal may not
describe answers TOPIC_AUTHORIZATION_FAILED (zero id, no partitions) before its existence is looked at, listed
after the described topics, whatever the page; all-topics leaves such topics out. An unknown named topic answers
UNKNOWN_TOPIC_OR_PARTITION, an illegal name INVALID_TOPIC_EXCEPTION. Per partition (error NONE, as Kafka's):
leader (-1 when none), leader epoch, replicas, ISR and offline (fenced) replicas as Metadata answers them.
topic_authorized_operations is filled for every topic answered but the unauthorized ones, as Kafka does.
Version notes: v0 only.
Skipped: eligible leader replicas (KIP-966's ELR is not kept here): empty lists, as Kafka answers with ELR off.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from epoch_broker.broker.controller.replication_control import topic_name_error
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
    after = cursor.topic_name if cursor is not None else ""
    names = sorted({name for name in (cache.topics_by_name if everything else (t.name for t in request.topics))
                    if name >= after})
    if cursor is not None and (cursor.partition_index < 0 or (not everything and cursor.topic_name not in names)):
        # Kafka throws InvalidRequestException; its error response names every topic asked for
        return R.cls(topics=[R.DescribeTopicPartitionsResponseTopic(error_code=ErrorCode.INVALID_REQUEST, name=t.name)
                             for t in request.topics])
    describable = authorized_names(context, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    response = R.cls()
    budget = max(1, min(request.response_partition_limit, MAX_PARTITIONS))
    for name in (name for name in names if name in describable):
        if budget == 0:
            # the previous topic ended exactly at the limit: the next page starts at this one
            response.next_cursor = R.Cursor(topic_name=name, partition_index=0)
            break
        state = cache.topics_by_name.get(name)
        if state is None:
            if not everything:
                response.topics.append(R.DescribeTopicPartitionsResponseTopic(
                    error_code=ErrorCode.INVALID_TOPIC_EXCEPTION if topic_name_error(name) is not None
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, is_internal=name in INTERNAL_TOPICS,
                    topic_authorized_operations=authorized_operations(context, ResourceType.TOPIC, name)))
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
    if not everything:
        # Kafka lists them after the described topics, on every page
        response.topics.extend(R.DescribeTopicPartitionsResponseTopic(
            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name) for name in names if name not in describable)
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
                partition_index=p.partition, leader_id=p.leader, leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas), isr_nodes=list(p.isr), eligible_leader_replicas=[],
                last_known_elr=[], offline_replicas=[r for r in p.replicas if r in fenced])
