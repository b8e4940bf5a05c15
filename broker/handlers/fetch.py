"""Fetch · v4-18 · record batches for consumers and follower replicas, served from segment files.

Behaviour: a consumer (replica id < 0) needs READ on each topic: a refused topic's partitions answer
TOPIC_AUTHORIZATION_FAILED and are not read, the others are served as usual. A follower (replica id >= 0:
replica_state's from v15) needs CLUSTER_ACTION on the cluster, else the whole fetch is answered
CLUSTER_AUTHORIZATION_FAILED (top level and every partition; Kafka answers TOPIC_AUTHORIZATION_FAILED per
partition: the cluster error names what is missing, the brokers' principal). Then per partition,
`Partition.fetch_records` decides: the KIP-320 check of current_leader_epoch (-1 skips; lower FENCED_LEADER_EPOCH,
higher UNKNOWN_LEADER_EPOCH), then NOT_LEADER_OR_FOLLOWER off the leader; OFFSET_OUT_OF_RANGE outside [log start,
log end]. Consumers read up to the high watermark (read_committed: up to the last stable offset, with the aborted
transactions overlapping the records sent, each as (producer id, first offset)), followers (replica id >= 0) up to
the log end. A follower fetch that passes the epoch check records the follower's log end and caught-up time, once
per request (the high watermark; `ReplicaManager.fetch` adds it to the ISR when eligible); under
`fault.high.watermark.held` it is answered with the high watermark frozen where the hold began (clients still see
the real one).
Records go out as file ranges (sendfile), never decoded. Sizes: partition_max_bytes per partition and
max_bytes for the response, except that the first batch of the first partition with data is always whole
(KIP-74). Long poll: until min_bytes are there or
max_wait_ms passes, woken by appends through the partitions' futures; any partition error answers at once.
Version notes: v12+ last_fetched_epoch -> diverging_epoch: if our end offset for that epoch is below the fetch
offset, or our largest epoch at or below it is lower, the answer is DivergingEpoch(epoch, end_offset) and no
records (KIP-320; decided by the Partition). v12+ leader errors carry current_leader, v16 the leader's endpoint
(KIP-951). v13+ topics are named by id (UNKNOWN_TOPIC_ID). v17's ReplicaDirectoryId (KIP-853) and v18's
HighWatermark (KIP-1166) are what a KRaft voter tells its leader: a broker's fetch takes them and ignores them, as
Kafka's ReplicaManager does.
Fetch sessions: the broker never creates one (it answers session_id 0, as Kafka does when its session cache
is full), so clients stay on full, sessionless fetches; a request naming a session gets
FETCH_SESSION_ID_NOT_FOUND, a non-initial epoch without one INVALID_FETCH_SESSION_EPOCH.
Skipped: preferred read replicas (KIP-392), rack awareness.
"""

from __future__ import annotations

import asyncio
from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.replica.partition import FetchResult, Partition, wait_for_change
from epoch_broker.broker.replica.replica_manager import ReplicaManager
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names, require_cluster_operation
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import fetch

Response = fetch.RESPONSE.cls
TopicResponse = fetch.RESPONSE.FetchableTopicResponse
PartitionData = fetch.RESPONSE.PartitionData
EpochEndOffset = fetch.RESPONSE.EpochEndOffset
LeaderIdAndEpoch = fetch.RESPONSE.LeaderIdAndEpoch
NodeEndpoint = fetch.RESPONSE.NodeEndpoint
AbortedTransaction = fetch.RESPONSE.AbortedTransaction

READ_COMMITTED = 1
_LEADER_HINT_ERRORS = frozenset(
    {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH}
)


@handles(fetch.API, "4-18")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    if request.session_id != 0:
        return Response(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=request.session_id)
    if request.session_epoch not in (0, -1):
        return Response(error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    version = context.api_version
    broker = context.services
    replicas = broker.replica_manager
    replica_id = request.replica_state.replica_id if version >= 15 else request.replica_id
    by_id = version >= 13
    names = [_name(broker, topic, by_id) for topic in request.topics]
    known = [name for name in names if name is not None]
    if replica_id >= 0:
        require_cluster_operation(context, AclOperation.CLUSTER_ACTION)
        readable = set(known)
    else:
        readable = authorized_names(context, AclOperation.READ, ResourceType.TOPIC, known)
    # (request partition, response partition, local Partition or None)
    entries: list[tuple[Any, Any, Partition | None]] = []
    topics = []
    for topic, name in zip(request.topics, names, strict=True):
        if name is None:
            topic_error = ErrorCode.UNKNOWN_TOPIC_ID  # before authorization, as in Kafka (an id is not secret)
        elif name not in readable:
            topic_error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        else:
            topic_error = ErrorCode.NONE
        response_topic = TopicResponse(topic=name or "", topic_id=topic.topic_id, partitions=[])
        topics.append(response_topic)
        for wanted in topic.partitions:
            response = PartitionData(partition_index=wanted.partition, records=b"", error_code=topic_error,
                                     aborted_transactions=[] if request.isolation_level == READ_COMMITTED else None)
            partition = None
            if topic_error == ErrorCode.NONE:
                assert name is not None
                partition = (replicas.get_by_id(topic.topic_id, wanted.partition) if by_id
                             else replicas.get(name, wanted.partition))
                if partition is None:
                    response.error_code = replicas.lookup_error(name, wanted.partition)
            response_topic.partitions.append(response)
            entries.append((wanted, response, partition))

    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(request.max_wait_ms, 0) / 1000
    first_read = True  # a follower's fetch offset is recorded on the first read only
    while True:
        total, failed = _read_all(entries, request.max_bytes, replica_id, first_read, replicas,
                                  request.isolation_level == READ_COMMITTED)
        first_read = False
        remaining = deadline - loop.time()
        if total >= request.min_bytes or failed or remaining <= 0 or replicas.stopping:
            break
        waited_from = loop.time()
        await wait_for_change([p for _, _, p in entries if p is not None], remaining)
        context.remote_s += loop.time() - waited_from
    if (metrics := broker.metrics) is not None:
        for topic in topics:
            if size := sum(len(partition.records) for partition in topic.partitions):
                metrics.record_fetch(topic.topic, size, replica_id >= 0)
    endpoints = _leader_endpoints(broker, entries, context.listener) if version >= 16 else []
    return Response(responses=topics, node_endpoints=endpoints)


def _name(broker: BrokerServices, topic: Any, by_id: bool) -> str | None:
    """The topic's name, or None for an id this broker does not know (v13+)."""
    if not by_id:
        return topic.topic
    state = broker.metadata.topics_by_id.get(topic.topic_id)
    return None if state is None else state.name


def _read_all(entries: list, response_max_bytes: int, replica_id: int, record_follower_fetch: bool,
              replicas: ReplicaManager, read_committed: bool) -> tuple[int, bool]:
    """Fill every partition response; returns (record bytes, whether any partition has an error)."""
    total = 0
    failed = False
    for wanted, response, partition in entries:
        if partition is not None:
            result = replicas.fetch(partition, wanted.fetch_offset, wanted.current_leader_epoch,
                                    wanted.last_fetched_epoch, replica_id,
                                    min(wanted.partition_max_bytes, max(response_max_bytes - total, 0)), total == 0,
                                    record_follower_fetch, read_committed)
            _fill(response, result, partition)
        total += len(response.records)
        failed = failed or response.error_code != ErrorCode.NONE
    return total, failed


def _fill(response: Any, result: FetchResult, partition: Partition) -> None:
    response.error_code = result.error
    if result.error in _LEADER_HINT_ERRORS:
        response.current_leader = LeaderIdAndEpoch(leader_id=partition.leader_id, leader_epoch=partition.leader_epoch)
    if result.log_start_offset < 0:
        return  # refused before reading: the rest stays at its defaults
    response.log_start_offset = result.log_start_offset
    response.high_watermark = result.high_watermark
    response.last_stable_offset = result.last_stable_offset
    response.records = result.records
    if result.aborted_transactions:
        response.aborted_transactions = [AbortedTransaction(producer_id=txn.producer_id, first_offset=txn.first_offset)
                                         for txn in result.aborted_transactions]
    if result.diverging_epoch is not None:
        response.diverging_epoch = EpochEndOffset(epoch=result.diverging_epoch[0], end_offset=result.diverging_epoch[1])



def _leader_endpoints(broker: BrokerServices, entries: list, listener: str) -> list:
    leaders = {p.leader_id for _, response, p in entries if p is not None and response.current_leader.leader_id >= 0}
    return broker.metadata.node_endpoints(leaders, listener, NodeEndpoint)
