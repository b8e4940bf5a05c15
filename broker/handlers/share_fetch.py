"""ShareFetch · v1 · records for share group members, acquired for them one lock at a time (KIP-932).

Behaviour: needs READ on the group (GROUP_AUTHORIZATION_FAILED, the whole request) and READ on each topic
(TOPIC_AUTHORIZATION_FAILED for its partitions); an empty group or member id is INVALID_REQUEST. The share session
(`share_sessions.py`) is opened (epoch 0, which may not carry acknowledgements: INVALID_REQUEST), moved on, or
closed (-1), and ends with the connection that opened it; a session error answers the whole request. Then, in
Kafka's order: the piggybacked acknowledgements of each partition are applied by its leader
(`Partition.share_acknowledge`, answered in acknowledge_error_code); a final request releases what the member still
holds and fetches nothing; otherwise the request's partitions join the session, its forgotten ones leave it (what
the member held there is released), and every partition of the session is share-fetched (`Partition.share_fetch`)
until max_records records are acquired: the whole batches holding them, with their AcquiredRecords ranges and
delivery counts. With nothing acquired the request waits up to max_wait_ms, woken by appends, released records and
expired locks. A partition not led here answers NOT_LEADER_OR_FOLLOWER with the leader and its endpoint.
The group's configs (IncrementalAlterConfigs on the GROUP resource) set its share-partitions' start
(`share.auto.offset.reset`: latest, earliest, by_duration), lock duration, delivery count limit, in-flight limit
and isolation (`share.isolation.level` read_committed: up to the last stable offset, aborted transactions'
batches archived, never delivered); the broker's group.share.* keys stand in for those not set.
Version notes: v1 only (v0 was Kafka 4.0's early access); v2's acquire modes and record limit (KIP-1206) are not
served. acquisition_lock_timeout_ms is the group's record lock duration.
Skipped: min_bytes (an answer goes as soon as anything is acquired).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from epoch_broker.broker.config import group_config_value
from epoch_broker.broker.config.parsers import BY_DURATION, iso_duration_ms
from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.replica.partition import Partition, ShareSettings, wait_for_change
from epoch_broker.broker.replica.share_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    acknowledge,
    release,
    update_partitions,
)
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import share_fetch
from epoch_broker.storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP

R = share_fetch.RESPONSE
NO_LEADER = R.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)


@handles(share_fetch.API, "1")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    broker = context.services
    replicas = broker.replica_manager
    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch
    settings = share_settings(broker, group_id)
    lock_ms = settings.record_lock_duration_ms
    if not group_id or not member_id:
        return R.cls(error_code=ErrorCode.INVALID_REQUEST, error_message="GroupId and MemberId must be set.",
                     acquisition_lock_timeout_ms=lock_ms)
    if not context.authorized(AclOperation.READ, ResourceType.GROUP, group_id):
        return R.cls(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, acquisition_lock_timeout_ms=lock_ms)
    asked = [(bytes(topic.topic_id), p.partition_index, p.acknowledgement_batches)
             for topic in request.topics for p in topic.partitions]
    if epoch == INITIAL_EPOCH and any(batches for _, _, batches in asked):
        return R.cls(error_code=ErrorCode.INVALID_REQUEST, acquisition_lock_timeout_ms=lock_ms,
                     error_message="Acknowledge data present in the initial share fetch request.")
    sessions = replicas.share_sessions
    if epoch == INITIAL_EPOCH:
        error, session, replaced = sessions.open(group_id, member_id, context.peer)
        release(replicas, group_id, member_id, replaced)
    else:
        error, session = sessions.next(group_id, member_id, epoch)
    if error != ErrorCode.NONE or session is None:
        return R.cls(error_code=error, acquisition_lock_timeout_ms=lock_ms)

    topics = broker.metadata.topics_by_id
    readable = authorized_names(context, AclOperation.READ, ResourceType.TOPIC,
                                [topics[t].name for t, _, _ in asked if t in topics])
    answers: dict[tuple[bytes, int], Any] = {}

    def answer(topic_id: bytes, index: int) -> Any:
        if (topic_id, index) not in answers:
            answers[(topic_id, index)] = R.PartitionData(partition_index=index, current_leader=NO_LEADER,
                                                         records=b"", acquired_records=[])
        return answers[(topic_id, index)]

    def topic_error(topic_id: bytes) -> ErrorCode:
        if topic_id not in topics:
            return ErrorCode.UNKNOWN_TOPIC_ID
        return ErrorCode.NONE if topics[topic_id].name in readable else ErrorCode.TOPIC_AUTHORIZATION_FAILED

    fetchable = []
    for topic_id, index, batches in asked:
        refused = topic_error(topic_id)
        if refused != ErrorCode.NONE:
            answer(topic_id, index).error_code = refused
            continue
        fetchable.append((topic_id, index))
        if batches:
            answer(topic_id, index).acknowledge_error_code = await acknowledge(replicas, group_id, member_id, topic_id,
                                                                         index, batches)
    if epoch == FINAL_EPOCH:
        release(replicas, group_id, member_id, session.partitions)
        return _response(answers, [], lock_ms, broker, context.listener)
    forgotten = [(bytes(t.topic_id), index) for t in request.forgotten_topics_data for index in t.partitions]
    release(replicas, group_id, member_id, update_partitions(session, fetchable, forgotten))

    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(request.max_wait_ms, 0) / 1000
    while True:
        led: list[Partition] = []
        acquired = failed = 0
        budget = request.max_bytes
        for topic_id, index in list(session.partitions):
            partition = replicas.get_by_id(topic_id, index)
            if partition is None:
                answer(topic_id, index).error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                failed += 1
                continue
            result = await partition.share_fetch(group_id, member_id, settings, replicas.share_persister,
                                                 request.max_records - acquired, request.batch_size, max(budget, 1))
            if result.error != ErrorCode.NONE:
                response = answer(topic_id, index)
                response.error_code = result.error
                response.current_leader = R.LeaderIdAndEpoch(leader_id=partition.leader_id,
                                                             leader_epoch=partition.leader_epoch)
                failed += 1
                continue
            led.append(partition)
            if result.acquired:
                response = answer(topic_id, index)
                response.records = result.records
                response.acquired_records = [R.AcquiredRecords(first_offset=a.first_offset, last_offset=a.last_offset,
                                                               delivery_count=a.delivery_count)
                                             for a in result.acquired]
                acquired += sum(a.last_offset - a.first_offset + 1 for a in result.acquired)
                budget -= len(result.records)
        remaining = deadline - loop.time()
        if acquired or failed or remaining <= 0 or request.max_records <= 0 or not led or replicas.stopping:
            break
        waited_from = loop.time()
        await wait_for_change(led, remaining)
        context.remote_s += loop.time() - waited_from
    leaders = {a.current_leader.leader_id for a in answers.values() if a.current_leader.leader_id >= 0}
    return _response(answers, leaders, lock_ms, broker, context.listener)


def share_settings(broker: BrokerServices, group_id: str) -> ShareSettings:
    """The group's share settings: its group configs, else the broker's group.share.* keys."""
    configs = broker.metadata.group_configs.get(group_id, {})

    def value(name: str) -> str:
        return group_config_value(broker.config, configs, name)

    reset = value("share.auto.offset.reset")
    if reset.startswith(BY_DURATION):
        start = int(time.time() * 1000) - iso_duration_ms(reset[len(BY_DURATION):])
    else:
        start = EARLIEST_TIMESTAMP if reset == "earliest" else LATEST_TIMESTAMP
    return ShareSettings(int(value("share.record.lock.duration.ms")), int(value("share.delivery.count.limit")),
                         int(value("share.partition.max.record.locks")), start,
                         read_committed=value("share.isolation.level") == "read_committed")


def _response(answers: dict[tuple[bytes, int], Any], leaders: Any, lock_ms: int, broker: BrokerServices,
              listener: str) -> Any:
    by_topic: dict[bytes, list[Any]] = {}
    for (topic_id, _), partition in answers.items():
        by_topic.setdefault(topic_id, []).append(partition)
    endpoints = broker.metadata.node_endpoints(leaders, listener, R.NodeEndpoint)
    return R.cls(acquisition_lock_timeout_ms=lock_ms, node_endpoints=endpoints,
                 responses=[R.ShareFetchableTopicResponse(topic_id=topic_id, partitions=partitions)
                            for topic_id, partitions in by_topic.items()])
