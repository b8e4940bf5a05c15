"""Transaction markers: a coordinator's commit or abort written to every partition of a transaction (KIP-98).

Rules:
- A marker is appended by the partition's leader (`Partition.append_end_txn_marker`: the coordinator-epoch and
  producer-epoch checks are the partition's) and counts once the high watermark passes it (acks=all).
- `write_local` serves both the WriteTxnMarkers handler and a coordinator writing to partitions it leads itself;
  after a marker on `__consumer_offsets` the group coordinator completes the producer's pending offsets.
- `MarkerSender.send` retries each partition until it is written, its topic is gone, or the coordinator is fenced
  (TRANSACTION_COORDINATOR_FENCED or INVALID_PRODUCER_EPOCH from a partition, or `still_owned` turning false),
  following leadership through the metadata; partitions led elsewhere get one WriteTxnMarkers per leader, over the
  coordinator's connection to that broker (inter_broker.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from epoch_broker.broker.transactions.inter_broker import InterBrokerClients
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import write_txn_markers
from epoch_broker.protocol.records import EndTxnMarker

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
REPLICATION_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 10.0
FIRST_BACKOFF_S, MAX_BACKOFF_S = 0.05, 1.0
FENCED = frozenset({ErrorCode.TRANSACTION_COORDINATOR_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})

PartitionKey = tuple[str, int]


async def write_local(broker: Any, producer_id: int, producer_epoch: int, marker: EndTxnMarker,
                      partitions: Iterable[PartitionKey]) -> dict[PartitionKey, ErrorCode]:
    """Append the marker to each partition led here, then wait until each is replicated. `broker` is app.Broker."""
    replicas = broker.replica_manager
    timestamp = broker.faults.wall_clock_ms()
    results: dict[PartitionKey, ErrorCode] = {}
    appended = []
    for topic, index in partitions:
        partition = replicas.get(topic, index)
        if partition is None:
            results[(topic, index)] = replicas.lookup_error(topic, index)
            continue
        result = partition.append_end_txn_marker(producer_id, producer_epoch, marker, timestamp)
        results[(topic, index)] = result.error
        if result.error == ErrorCode.NONE:
            appended.append((partition, result))
    for partition, result in appended:  # appended first, so followers copy them all in one round
        error = await partition.wait_for_replication(result.last_offset, result.leader_epoch, REPLICATION_TIMEOUT_S)
        results[(partition.topic, partition.index)] = error
        if error == ErrorCode.NONE and partition.topic == OFFSETS_TOPIC:
            groups = broker.group_coordinator
            if groups is not None:
                groups.complete_txn(producer_id, partition.index, marker.commit)
    return results


class MarkerSender:
    def __init__(self, broker: Any, clients: InterBrokerClients) -> None:
        self.broker = broker
        self.clients = clients

    async def send(self, producer_id: int, producer_epoch: int, marker: EndTxnMarker,
                   partitions: Iterable[PartitionKey], still_owned: Callable[[], bool]) -> bool:
        """Write the marker to every partition; False if the coordinator was fenced or lost the transaction."""
        remaining = set(partitions)
        backoff = FIRST_BACKOFF_S
        metadata = self.broker.metadata
        while remaining:
            if not still_owned():
                return False
            by_leader: dict[int, list[PartitionKey]] = {}
            for key in sorted(remaining):
                state = metadata.partition(*key)
                if state is None:  # the topic was deleted: nothing left to mark (as Kafka)
                    remaining.discard(key)
                else:
                    by_leader.setdefault(state.leader, []).append(key)
            answers = await asyncio.gather(*(self._write(leader, producer_id, producer_epoch, marker, keys)
                                             for leader, keys in by_leader.items()))
            for results in answers:
                for key, error in results.items():
                    if error in FENCED:
                        log.info("marker for producer %d on %s-%d refused (%s): this coordinator is fenced",
                                 producer_id, key[0], key[1], error.name)
                        return False
                    if error == ErrorCode.NONE:
                        remaining.discard(key)
            if remaining:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
        return True

    async def _write(self, leader: int, producer_id: int, producer_epoch: int, marker: EndTxnMarker,
                     keys: list[PartitionKey]) -> dict[PartitionKey, ErrorCode]:
        if leader == self.broker.node_id:
            return await write_local(self.broker, producer_id, producer_epoch, marker, keys)
        if leader < 0:
            return dict.fromkeys(keys, ErrorCode.LEADER_NOT_AVAILABLE)
        try:
            return await asyncio.wait_for(self._request(leader, producer_id, producer_epoch, marker, keys),
                                          REQUEST_TIMEOUT_S)
        except (OSError, TimeoutError, ConnectionError) as exc:
            log.debug("WriteTxnMarkers to broker %d failed: %s", leader, exc)
            self.clients.drop(leader)
            return dict.fromkeys(keys, ErrorCode.NETWORK_EXCEPTION)

    async def _request(self, leader: int, producer_id: int, producer_epoch: int, marker: EndTxnMarker,
                       keys: list[PartitionKey]) -> dict[PartitionKey, ErrorCode]:
        client = await self.clients.get(leader)
        request = write_txn_markers.REQUEST
        by_topic: dict[str, list[int]] = {}
        for topic, index in keys:
            by_topic.setdefault(topic, []).append(index)
        body = request.cls(markers=[request.WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=marker.commit,
            coordinator_epoch=marker.coordinator_epoch,
            topics=[request.WritableTxnMarkerTopic(name=t, partition_indexes=p) for t, p in by_topic.items()])])
        response = await client.request(write_txn_markers.API, client.version_for(write_txn_markers.API), body)
        results = dict.fromkeys(keys, ErrorCode.UNKNOWN_SERVER_ERROR)
        for answered in response.markers:
            for topic in answered.topics:
                for partition in topic.partitions:
                    if (topic.name, partition.partition_index) in results:
                        results[(topic.name, partition.partition_index)] = ErrorCode(partition.error_code)
        return results
