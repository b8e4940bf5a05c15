"""What the `kafka-epoch` source asks of the cluster, over the blocking client: metadata, offsets, and the
records of one partition range. Runs on the driver (planning) and in executor tasks (reading).

Rules:
- Every request goes to the partition's leader with its current leader epoch (KIP-320). NOT_LEADER_OR_FOLLOWER,
  FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, LEADER_NOT_AVAILABLE and OFFSET_NOT_AVAILABLE (KIP-207: a new
  leader whose high watermark has not caught up) refresh the metadata and retry after a backoff, until the
  request timeout: never a failure or a guess on a leader change.
- Consumers read up to the high watermark: "latest" is the high watermark (ListOffsets as a consumer).
- Records come from batches as stored: control batches are skipped, every codec the broker accepts is decoded,
  and each record carries the leader epoch of its batch.
- Nothing here holds a socket between calls of the driver (readers are pickled to executors); a task opens its
  own connection and closes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from epoch_broker.client.blocking import BlockingKafkaClient, ConnectionClosed
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import fetch, list_offsets, metadata
from epoch_broker.protocol.records import Record, iter_batches, iter_records

T = TypeVar("T")
RETRIABLE = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
                       ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.LEADER_NOT_AVAILABLE,
                       ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT})
BACKOFF_S = 0.2
METADATA_VERSION, LIST_OFFSETS_VERSION, FETCH_VERSION = 12, 7, 12
EARLIEST, LATEST = -2, -1


class KafkaReadError(RuntimeError):
    """A read the source cannot complete; the message names the topic, partition and why."""


class Retry(Exception):
    """The leader moved or is not ready: refresh the metadata and ask again."""


@dataclass(frozen=True, slots=True)
class Leader:
    node_id: int
    host: str
    port: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """One record as the source yields it."""

    record: Record
    leader_epoch: int
    timestamp_type: int


class Cluster:
    """The cluster as one client sees it: metadata from any bootstrap broker, requests to partition leaders."""

    def __init__(self, bootstrap: str, timeout_s: float) -> None:
        self.bootstrap = [address.strip() for address in bootstrap.split(",") if address.strip()]
        self.timeout_s = timeout_s
        self.partitions: dict[str, dict[int, Leader]] = {}
        self._clients: dict[tuple[str, int], BlockingKafkaClient] = {}

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _client(self, host: str, port: int) -> BlockingKafkaClient:
        client = self._clients.get((host, port))
        if client is None:
            client = self._clients[(host, port)] = BlockingKafkaClient(host, port, "epoch-broker-spark",
                                                                        self.timeout_s)
        return client

    def _drop(self, host: str, port: int) -> None:
        client = self._clients.pop((host, port), None)
        if client is not None:
            client.close()

    def refresh(self) -> dict[str, dict[int, Leader]]:
        """Metadata of every topic, from the first bootstrap broker that answers."""
        problems = []
        for address in self.bootstrap:
            host, _, port = address.rpartition(":")
            try:
                response = self._client(host, int(port)).request(
                    metadata.API, METADATA_VERSION, metadata.REQUEST.cls(topics=None, allow_auto_topic_creation=False))
            except (OSError, ConnectionClosed) as exc:
                self._drop(host, int(port))
                problems.append(f"{address}: {exc}")
                continue
            brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
            self.partitions = {
                topic.name: {p.partition_index: Leader(p.leader_id, *brokers.get(p.leader_id, ("", -1)),
                                                       p.leader_epoch)
                             for p in topic.partitions}
                for topic in response.topics if topic.error_code == ErrorCode.NONE}
            return self.partitions
        raise KafkaReadError(f"no bootstrap broker answered Metadata: {'; '.join(problems)}")

    def with_leader(self, topic: str, partition: int, call: Callable[[BlockingKafkaClient, Leader], T]) -> T:
        """Run `call` against the partition's leader, refreshing the metadata and retrying while it says Retry
        (or the leader is unreachable), until the request timeout."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            leader = self.partitions.get(topic, {}).get(partition)
            try:
                if leader is None or leader.node_id < 0:
                    raise Retry(f"{topic}-{partition} has no leader")
                return call(self._client(leader.host, leader.port), leader)
            except (Retry, OSError, ConnectionClosed) as exc:
                if leader is not None and leader.node_id >= 0 and not isinstance(exc, Retry):
                    self._drop(leader.host, leader.port)
                if time.monotonic() >= deadline:
                    raise KafkaReadError(f"{topic}-{partition}: no usable leader within {self.timeout_s:.0f} s "
                                         f"({exc})") from exc
                time.sleep(BACKOFF_S)
                self.refresh()

    def list_offset(self, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
        """(offset, leader epoch) for EARLIEST, LATEST (the high watermark) or a timestamp."""
        def ask(client: BlockingKafkaClient, leader: Leader) -> tuple[int, int]:
            request = list_offsets.REQUEST.cls(replica_id=-1, isolation_level=0, topics=[
                list_offsets.REQUEST.ListOffsetsTopic(name=topic, partitions=[
                    list_offsets.REQUEST.ListOffsetsPartition(partition_index=partition, timestamp=timestamp,
                                                              current_leader_epoch=leader.leader_epoch)])])
            answer = client.request(list_offsets.API, LIST_OFFSETS_VERSION, request).topics[0].partitions[0]
            error = ErrorCode(answer.error_code)
            if error in RETRIABLE:
                raise Retry(f"ListOffsets {topic}-{partition}: {error.name}")
            if error != ErrorCode.NONE:
                raise KafkaReadError(f"ListOffsets {topic}-{partition}: {error.name}")
            return answer.offset, answer.leader_epoch

        return self.with_leader(topic, partition, ask)

    def read(self, topic: str, partition: int, start: int, end: int, max_bytes: int,
             fail_on_data_loss: bool) -> Iterator[list[StoredRecord]]:
        """The records of [start, end), one list per fetch answer."""
        offset = start
        while offset < end:
            chunk, next_offset = self.with_leader(topic, partition, lambda client, leader, at=offset: self._fetch(
                client, leader, topic, partition, at, max_bytes, fail_on_data_loss))
            if next_offset <= offset:
                raise KafkaReadError(f"{topic}-{partition}: no records at offset {offset} although the high "
                                     f"watermark is at least {end}")
            records = [r for r in chunk if start <= r.record.offset < end]
            if records:
                yield records
            offset = next_offset

    def _fetch(self, client: BlockingKafkaClient, leader: Leader, topic: str, partition: int, offset: int,
               max_bytes: int, fail_on_data_loss: bool) -> tuple[list[StoredRecord], int]:
        request = fetch.REQUEST.cls(
            replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=max_bytes, isolation_level=0, session_id=0,
            session_epoch=-1, forgotten_topics_data=[], topics=[fetch.REQUEST.FetchTopic(topic=topic, partitions=[
                fetch.REQUEST.FetchPartition(partition=partition, current_leader_epoch=leader.leader_epoch,
                                             fetch_offset=offset, partition_max_bytes=max_bytes)])])
        answer = client.request(fetch.API, FETCH_VERSION, request).responses[0].partitions[0]
        error = ErrorCode(answer.error_code)
        if error in RETRIABLE:
            raise Retry(f"Fetch {topic}-{partition}: {error.name}")
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            if fail_on_data_loss or offset >= answer.log_start_offset >= 0:
                raise KafkaReadError(f"{topic}-{partition}: offset {offset} is out of range (log start "
                                     f"{answer.log_start_offset}); records were deleted or truncated "
                                     "(failOnDataLoss=false skips to the log start)")
            return [], answer.log_start_offset
        if error != ErrorCode.NONE:
            raise KafkaReadError(f"Fetch {topic}-{partition} at {offset}: {error.name}")
        data = bytes(answer.records or b"")
        records: list[StoredRecord] = []
        next_offset = offset
        for position, header in iter_batches(data):
            next_offset = header.next_offset
            if header.is_control:
                continue
            records += [StoredRecord(record, header.partition_leader_epoch, header.timestamp_type)
                        for record in iter_records(data, position, header)]
        return records, next_offset

