"""Metadata · v0-13 · brokers, cluster id, controller, topics with partitions, leaders and epochs.

Behaviour: every live (registered, unfenced) broker, and for FENCED_BROKER_LINGER_S a just-fenced one
(`MetadataCache.listed_brokers`: librdkafka would otherwise drop the move of its partitions); per partition the
leader, leader_epoch (v7+), replicas, ISR and offline replicas (the fenced ones); topic ids (v10+); a topic
asked for by id alone (v12) is found by id. An unknown topic is created when the request allows it (v4+, else
always) and `auto.create.topics.enable` is on, with `num.partitions`.
Authorization (Kafka's): a topic needs DESCRIBE. Asking for all topics, those the principal may not describe
are left out; named, they are answered TOPIC_AUTHORIZATION_FAILED before their existence is looked at (no id,
no partitions; asked by id, the id is answered and the name is not). Auto-creation needs CREATE on the cluster
or on the topic, else TOPIC_AUTHORIZATION_FAILED.
Illegal names (characters, length, "." / "..") get INVALID_TOPIC_EXCEPTION. An answer that would name a leader
whose replication link to this broker broke moments ago waits (at most 100 ms) for the controller to fence it
(`ReplicaManager.settle_leaders`): a client asking right after its own connection to a killed leader broke learns
the new leader instead of waiting for its next topic scan.
Version notes: v0 asks for all topics with an empty list, v1+ with null. Authorized operations are INT32_MIN
unless asked for (-1 crashes kafka-python at v8-10); asked for, a topic's are the operations the principal may
do on it, the cluster's (v8-10) those on the cluster, or 0 without DESCRIBE on it; with no authorizer every
operation. A null topic name before v12 is INVALID_REQUEST for that topic, as Kafka answers (found by the wire
fuzzer: the v10-11 response cannot carry a null name). v13's top-level error_code is NONE: as Kafka's brokers, this
one never asks for a rebootstrap itself (KIP-1102); `fault.request.metadata=error=REBOOTSTRAP_REQUIRED` does.
Skipped: racks (none configured), is_internal only for __consumer_offsets.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.controller.replication_control import NewTopic, topic_name_error
from epoch_broker.broker.metadata.image import TopicState
from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import (
    AUTHORIZED_OPERATIONS_OMITTED,
    authorized_names,
    authorized_operations,
    cluster_authorized_operations,
)
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import metadata

Response = metadata.RESPONSE.cls
ResponseBroker = metadata.RESPONSE.MetadataResponseBroker
ResponseTopic = metadata.RESPONSE.MetadataResponseTopic
ResponsePartition = metadata.RESPONSE.MetadataResponsePartition

INTERNAL_TOPICS = frozenset({"__consumer_offsets"})
# Longer than librdkafka's 1 s topic scan, after which a client that saw the broker go down asks again.
FENCED_BROKER_LINGER_S = 2.0
TOPIC_IDS_VERSION = 12


@handles(metadata.API, "0-13")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    broker = context.services
    cache = broker.metadata
    version = context.api_version
    include_ops = request.include_topic_authorized_operations
    everything = request.topics is None or (version == 0 and not request.topics)
    asked = cache.topics_by_name.values() if everything else (
        cache.topics_by_name.get(t.name) if t.name is not None else cache.topics_by_id.get(t.topic_id)
        for t in request.topics)
    await broker.replica_manager.settle_leaders(state for state in asked if state is not None)  # looked at lazily
    if everything:
        # all topics: those the principal may not describe are left out, not refused
        describable = authorized_names(context, AclOperation.DESCRIBE, ResourceType.TOPIC, cache.topics_by_name)
        topics = [_topic(context, state, include_ops) for name, state in cache.topics_by_name.items()
                  if name in describable]
    else:
        auto_create = broker.config.auto_create_topics_enable and request.allow_auto_topic_creation
        topics = [await _requested_topic(context, wanted, auto_create, include_ops, version)
                  for wanted in request.topics]
    return Response(
        brokers=[ResponseBroker(node_id=b.node_id, host=host, port=port, rack=b.rack)
                 for b in cache.listed_brokers(FENCED_BROKER_LINGER_S)
                 for host, port in [b.endpoint(context.listener)]],
        cluster_id=broker.cluster_id,
        controller_id=cache.controller_id,
        topics=topics,
        cluster_authorized_operations=cluster_authorized_operations(context,
                                                                    request.include_cluster_authorized_operations),
    )


async def _requested_topic(context: RequestContext[BrokerServices], wanted: Any, auto_create: bool,
                           include_ops: bool, version: int) -> Any:
    broker = context.services
    cache = broker.metadata
    if wanted.name is None and version < TOPIC_IDS_VERSION:
        # Kafka: topic ids in Metadata requests are usable from v12; before it a null name is INVALID_REQUEST (the
        # answer cannot carry a null name either)
        return ResponseTopic(error_code=ErrorCode.INVALID_REQUEST, name="", topic_id=wanted.topic_id)
    if wanted.name is None:
        state = cache.topics_by_id.get(wanted.topic_id)
        if state is None:
            return ResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=wanted.topic_id)
        if not context.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, state.name):
            # Kafka: a topic id is not secret, the name it stands for is
            return ResponseTopic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=None, topic_id=wanted.topic_id)
        return _topic(context, state, include_ops)
    if not context.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, wanted.name):
        # before looking it up: whether it exists is not disclosed (nor its id)
        return ResponseTopic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=wanted.name)
    state = cache.topics_by_name.get(wanted.name)
    if state is not None:
        return _topic(context, state, include_ops)
    if auto_create and not authorized_names(context, AclOperation.CREATE, ResourceType.TOPIC, (wanted.name,),
                                            or_cluster=AclOperation.CREATE):
        return ResponseTopic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=wanted.name,
                             is_internal=wanted.name in INTERNAL_TOPICS)
    if topic_name_error(wanted.name) is not None:
        return ResponseTopic(error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, name=wanted.name)
    if not auto_create:
        return ResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=wanted.name)
    (result,) = await broker.channel.create_topics([NewTopic(wanted.name)], False)
    state = cache.topics_by_name.get(wanted.name)
    if state is None:
        return ResponseTopic(error_code=result.error_code, name=wanted.name)
    return _topic(context, state, include_ops)


def _topic(context: RequestContext[BrokerServices], state: TopicState, include_ops: bool) -> Any:
    fenced = context.services.metadata.fenced_brokers
    partitions = [
        ResponsePartition(
            error_code=ErrorCode.NONE if p.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
            partition_index=p.partition,
            leader_id=p.leader,
            leader_epoch=p.leader_epoch,
            replica_nodes=list(p.replicas),
            isr_nodes=list(p.isr),
            offline_replicas=[r for r in p.replicas if r in fenced],
        )
        for p in sorted(state.partitions.values(), key=lambda p: p.partition)
    ]
    return ResponseTopic(
        error_code=ErrorCode.NONE,
        name=state.name,
        topic_id=state.topic_id,
        is_internal=state.name in INTERNAL_TOPICS,
        partitions=partitions,
        topic_authorized_operations=(authorized_operations(context, ResourceType.TOPIC, state.name) if include_ops
                                     else AUTHORIZED_OPERATIONS_OMITTED),
    )
