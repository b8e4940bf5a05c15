"""What the `kafka-epoch` source asks of the cluster, over the blocking client: metadata, offsets, and the
records of one partition range. Runs on the driver (planning) and in executor tasks (reading).

Rules:
- Every request goes to the partition's leader with its current leader epoch (KIP-320). NOT_LEADER_OR_FOLLOWER,
  FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, LEADER_NOT_AVAILABLE and OFFSET_NOT_AVAILABLE (KIP-207: a new
  leader whose high watermark has not caught up) refresh the metadata and retry after a backoff: never a
  failure or a guess on a leader change. One attempt is bounded by the request timeout (a socket that does not
  answer is dropped and the call tried again); a call with its retries by a longer deadline, as the Java
  clients' request.timeout.ms sits under default.api.timeout.ms (consumers) or delivery.timeout.ms (producers).
- Consumers read up to the high watermark, or under read_committed (`isolation_level`, of every Fetch and
  ListOffsets) up to the last stable offset: "latest" is that bound (ListOffsets as a consumer).
- Records come from batches as stored, every codec the broker accepts decoded, each record with the leader epoch
  of its batch; client/completed_fetch.py says which batches a consumer returns: never control batches (markers),
  and under read_committed not those of aborted transactions (the Fetch answer's aborted list). A read moves
  past every batch, returned or not, and still knows the epoch of each (the end check of a range, positions).
- The records a read returns of one Fetch answer are decoded at once into columns (protocol/record_columns.py,
  compiled where the install could compile it): no object per record. Every record of a returned batch is
  checked as a consumer parses it; a malformed one is CorruptRecordError. CRCs are not checked, as they were not
  before this decoder (Kafka's consumer checks them, check.crcs=true): the leader checked each batch's CRC when
  it appended it (storage/log.py).
- Requests about many partitions (offsets, epochs) go as one request per leader, not one per partition: a
  streaming query asks them every micro-batch.
- A position is an offset and the leader epoch of the record before it (-1 when unknown), as a Kafka consumer
  keeps it (KIP-320). `epochs_before` finds that epoch from the leader's epoch history (OffsetForLeaderEpoch),
  `end_offsets_for_epochs` tells whether a position is still in the leader's log (its epoch ends at or after it).
- A fetch carries the epoch of the record before its offset (last_fetched_epoch): a leader whose log diverged
  from what was read answers DivergingEpoch instead of records, and the read stops with the divergence point.
- Nothing here holds a socket between calls of the driver (readers are pickled to executors); a task opens its
  own connection and closes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from epoch_broker.client.blocking import BlockingKafkaClient, ConnectionClosed
from epoch_broker.client.completed_fetch import READ_UNCOMMITTED, fetched_batches
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import fetch, list_offsets, metadata, offset_for_leader_epoch
from epoch_broker.protocol.record_columns import RecordColumns, decode_columns
from epoch_broker.protocol.record_scan import Buffer
from epoch_broker.protocol.records import BatchHeader, batch_body

T = TypeVar("T")
TopicPartition = tuple[str, int]
RETRIABLE = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
                       ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.LEADER_NOT_AVAILABLE,
                       ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT})
BACKOFF_S = 0.2
METADATA_VERSION, LIST_OFFSETS_VERSION, FETCH_VERSION, EPOCH_VERSION = 12, 7, 12, 4
EARLIEST, LATEST = -2, -1


class KafkaClientError(RuntimeError):
    """A request the source or the sink cannot complete; the message names the topic, partition and why."""


class Retry(Exception):
    """The leader moved or is not ready: refresh the metadata and ask again."""


class DivergedError(KafkaClientError):
    """The leader's log no longer holds what was read before `offset`: it diverged at `divergence` (KIP-320)."""

    def __init__(self, topic: str, partition: int, offset: int, leader_epoch: int, divergence: int) -> None:
        super().__init__(f"{topic}-{partition}: the log diverged at offset {divergence} below the position "
                         f"{offset} (leader epoch {leader_epoch}); records were truncated")
        self.divergence = divergence


@dataclass(frozen=True, slots=True)
class Leader:
    node_id: int
    host: str
    port: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class Fetched:
    """What one Fetch answer gave a read of [start, end): its records in that range a consumer returns, as columns
    (None when there are none), and the leader epoch of the batch holding offset end - 1 when this answer held it
    (None otherwise), returned or not: under read_committed a range often ends on a transaction marker."""

    rows: RecordColumns | None
    end_epoch: int | None = None


class Cluster:
    """The cluster as one client sees it: metadata from any bootstrap broker, requests to partition leaders."""

    def __init__(self, bootstrap: str, timeout_s: float, deadline_s: float,
                 isolation_level: int = READ_UNCOMMITTED) -> None:
        self.bootstrap = [address.strip() for address in bootstrap.split(",") if address.strip()]
        self.timeout_s = timeout_s  # one attempt (kafka.request.timeout.ms: the socket's timeout)
        self.deadline_s = deadline_s  # all attempts of one call, retries included
        self.isolation_level = isolation_level  # of every Fetch and ListOffsets
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
        raise KafkaClientError(f"no bootstrap broker answered Metadata: {'; '.join(problems)}")

    def with_leaders(self, wanted: list[TopicPartition],
                     call: Callable[[BlockingKafkaClient, dict[TopicPartition, Leader]], dict[TopicPartition, T]]
                     ) -> dict[TopicPartition, T]:
        """Run `call` once per leader with that leader's share of `wanted`; the partitions it leaves out of its
        answer (retriable errors) and those of a leader that cannot be reached are asked again after a metadata
        refresh and a backoff, until the call's deadline."""
        deadline = time.monotonic() + self.deadline_s
        answers: dict[TopicPartition, T] = {}
        pending = list(dict.fromkeys(wanted))
        problem = ""
        while True:
            by_leader: dict[int, dict[TopicPartition, Leader]] = {}
            for tp in pending:
                leader = self.partitions.get(tp[0], {}).get(tp[1])
                if leader is None or leader.node_id < 0:
                    problem = f"{tp[0]}-{tp[1]} has no leader"
                else:
                    by_leader.setdefault(leader.node_id, {})[tp] = leader
            for share in by_leader.values():
                leader = next(iter(share.values()))
                try:
                    answers.update(call(self._client(leader.host, leader.port), share))
                except (OSError, ConnectionClosed) as exc:
                    self._drop(leader.host, leader.port)
                    problem = f"broker {leader.node_id} at {leader.host}:{leader.port}: {exc}"
            pending = [tp for tp in pending if tp not in answers]
            if not pending:
                return answers
            if time.monotonic() >= deadline:
                names = ", ".join(f"{t}-{p}" for t, p in pending)
                raise KafkaClientError(f"{names}: no usable leader within {self.deadline_s:.0f} s ({problem})")
            time.sleep(BACKOFF_S)
            self.refresh()

    def with_leader(self, topic: str, partition: int, call: Callable[[BlockingKafkaClient, Leader], T]) -> T:
        """`with_leaders` for one partition; `call` raises Retry to be asked again."""
        def one(client: BlockingKafkaClient, share: dict[TopicPartition, Leader]) -> dict[TopicPartition, T]:
            try:
                return {(topic, partition): call(client, share[(topic, partition)])}
            except Retry:
                return {}

        return self.with_leaders([(topic, partition)], one)[(topic, partition)]

    def list_offsets(self, wanted: list[TopicPartition], timestamp: int) -> dict[TopicPartition, tuple[int, int]]:
        """(offset, leader epoch) of each partition for EARLIEST, LATEST (the high watermark, or under
        read_committed the last stable offset) or a timestamp (-1 when no record is that recent, or none below
        that bound)."""
        def ask(client: BlockingKafkaClient, share: dict[TopicPartition, Leader]
                ) -> dict[TopicPartition, tuple[int, int]]:
            request = list_offsets.REQUEST.cls(replica_id=-1, isolation_level=self.isolation_level, topics=[
                list_offsets.REQUEST.ListOffsetsTopic(name=topic, partitions=[
                    list_offsets.REQUEST.ListOffsetsPartition(partition_index=p, timestamp=timestamp,
                                                              current_leader_epoch=share[(topic, p)].leader_epoch)
                    for p in partitions])
                for topic, partitions in _by_topic(share).items()])
            response = client.request(list_offsets.API, LIST_OFFSETS_VERSION, request)
            return _accepted("ListOffsets", ((t.name, a.partition_index, a.error_code, (a.offset, a.leader_epoch))
                                             for t in response.topics for a in t.partitions))

        return self.with_leaders(wanted, ask)

    def list_offset(self, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
        return self.list_offsets([(topic, partition)], timestamp)[(topic, partition)]

    def end_offsets_for_epochs(self, wanted: dict[TopicPartition, int]) -> dict[TopicPartition, tuple[int, int]]:
        """OffsetForLeaderEpoch as a consumer: for each partition's epoch, (the largest epoch the leader knows
        that is <= it, where that epoch ends). (-1, -1) when the leader knows no such epoch."""
        def ask(client: BlockingKafkaClient, share: dict[TopicPartition, Leader]
                ) -> dict[TopicPartition, tuple[int, int]]:
            request = offset_for_leader_epoch.REQUEST.cls(replica_id=-1, topics=[
                offset_for_leader_epoch.REQUEST.OffsetForLeaderTopic(topic=topic, partitions=[
                    offset_for_leader_epoch.REQUEST.OffsetForLeaderPartition(
                        partition=p, current_leader_epoch=share[(topic, p)].leader_epoch,
                        leader_epoch=wanted[(topic, p)]) for p in partitions])
                for topic, partitions in _by_topic(share).items()])
            response = client.request(offset_for_leader_epoch.API, EPOCH_VERSION, request)
            return _accepted("OffsetForLeaderEpoch", (
                (t.topic, a.partition, a.error_code, (a.leader_epoch, a.end_offset))
                for t in response.topics for a in t.partitions))

        return self.with_leaders(list(wanted), ask)

    def epochs_before(self, offsets: dict[TopicPartition, int], log_starts: dict[TopicPartition, int],
                      known: dict[TopicPartition, tuple[int, int, int]] | None = None) -> dict[TopicPartition, int]:
        """The leader epoch of the record at `offset - 1` of each partition (-1 when that record is before the
        log start or older than the leader's epoch history).

        `known` may give, per partition, an epoch with its [start, end) offsets, as a validated position tells:
        an offset inside it needs no request. Otherwise the leader's epoch history is walked down from its
        latest epoch, one OffsetForLeaderEpoch per step for all partitions at once: asking for epoch c - 1
        answers where epoch c starts, so the first epoch that starts at or before the record is its epoch."""
        found: dict[TopicPartition, int] = {}
        walking: dict[TopicPartition, int] = {}  # partition: candidate epoch, whose start is asked next
        for tp, offset in offsets.items():
            epoch, start, end = (known or {}).get(tp, (-1, 0, 0))
            if offset <= log_starts.get(tp, 0):
                found[tp] = -1
            elif epoch >= 0 and start < offset <= end:
                found[tp] = epoch
            else:
                walking[tp] = self.partitions[tp[0]][tp[1]].leader_epoch
        if walking:  # the latest epoch the leader knows that is <= its current one
            walking = {tp: epoch for tp, (epoch, _) in self.end_offsets_for_epochs(walking).items()}
        previous_start = dict.fromkeys(walking, 1 << 62)
        while walking:
            for tp, epoch in list(walking.items()):
                if epoch < 0:
                    found[tp] = -1
                    del walking[tp]
            answers = self.end_offsets_for_epochs({tp: epoch - 1 for tp, epoch in walking.items()})
            for tp, (older, candidate_start) in answers.items():
                if candidate_start < offsets[tp]:
                    found[tp] = walking.pop(tp)
                elif older < 0 or candidate_start < 0 or candidate_start >= previous_start[tp]:
                    found[tp] = -1  # older than the leader's epoch history
                    del walking[tp]
                else:
                    previous_start[tp] = candidate_start
                    walking[tp] = older
        return found

    def read(self, topic: str, partition: int, start: int, end: int, max_bytes: int, fail_on_data_loss: bool,
             last_epoch: int = -1, with_headers: bool = False) -> Iterator[Fetched]:
        """The records of [start, end) (their headers too `with_headers`), per fetch answer that holds some or
        holds offset end - 1; `last_epoch` is the leader epoch of the record before `start` when known (the
        leader checks it: DivergedError if its log no longer agrees)."""
        offset = start
        while offset < end:
            def fetch_at(client: BlockingKafkaClient, leader: Leader, at: int = offset,
                         epoch: int = last_epoch) -> tuple[Fetched, int, int]:
                return self._fetch(client, leader, topic, partition, at, start, end, epoch, max_bytes,
                                   fail_on_data_loss, with_headers)

            fetched, next_offset, last_epoch = self.with_leader(topic, partition, fetch_at)
            if next_offset <= offset:
                bound = "high watermark" if self.isolation_level == READ_UNCOMMITTED else "last stable offset"
                raise KafkaClientError(f"{topic}-{partition}: no records at offset {offset} although the {bound} "
                                       f"is at least {end}")
            offset = next_offset
            if fetched.rows is not None or fetched.end_epoch is not None:
                yield fetched
            del fetched  # one fetch decoded at a time: nothing of this one stays while the next is decoded

    def _fetch(self, client: BlockingKafkaClient, leader: Leader, topic: str, partition: int, offset: int,
               start: int, end: int, last_epoch: int, max_bytes: int, fail_on_data_loss: bool,
               with_headers: bool) -> tuple[Fetched, int, int]:
        """One Fetch at `offset` for a read of [start, end): (what it gave, the offset after its last batch, the
        leader epoch of that batch)."""
        wanted = fetch.REQUEST.FetchPartition(partition=partition, current_leader_epoch=leader.leader_epoch,
                                              fetch_offset=offset, last_fetched_epoch=last_epoch,
                                              partition_max_bytes=max_bytes)
        request = fetch.REQUEST.cls(
            replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=max_bytes, isolation_level=self.isolation_level,
            session_id=0, session_epoch=-1, forgotten_topics_data=[],
            topics=[fetch.REQUEST.FetchTopic(topic=topic, partitions=[wanted])])
        answer = client.request(fetch.API, FETCH_VERSION, request).responses[0].partitions[0]
        error = ErrorCode(answer.error_code)
        if error in RETRIABLE:
            raise Retry(f"Fetch {topic}-{partition}: {error.name}")
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            if fail_on_data_loss or offset >= answer.log_start_offset >= 0:
                raise KafkaClientError(f"{topic}-{partition}: offset {offset} is out of range (log start "
                                     f"{answer.log_start_offset}); records were deleted or truncated "
                                     "(failOnDataLoss=false skips to the log start)")
            return Fetched(None), answer.log_start_offset, -1
        if error != ErrorCode.NONE:
            raise KafkaClientError(f"Fetch {topic}-{partition} at {offset}: {error.name}")
        diverging = answer.diverging_epoch
        if diverging is not None and diverging.epoch >= 0:
            raise DivergedError(topic, partition, offset, last_epoch, diverging.end_offset)
        aborted = [(txn.producer_id, txn.first_offset) for txn in answer.aborted_transactions or ()]
        return fetched_range(bytes(answer.records or b""), self.isolation_level, aborted, start, end, offset,
                             last_epoch, with_headers)


def fetched_range(data: bytes, isolation_level: int, aborted: list[tuple[int, int]], start: int, end: int,
                  offset: int, last_epoch: int, with_headers: bool = False) -> tuple[Fetched, int, int]:
    """A Fetch answer at `offset` (its records and aborted list) as a read of [start, end) takes it: (what it
    gave, the offset after its last batch, the leader epoch of that batch; `offset` and `last_epoch` when it
    held none)."""
    returned: list[tuple[Buffer, BatchHeader]] = []  # the bodies of the batches a consumer returns, in range
    next_offset, end_epoch = offset, None
    for position, header, visible in fetched_batches(data, isolation_level, aborted):
        next_offset, last_epoch = header.next_offset, header.partition_leader_epoch
        if header.base_offset < end <= header.next_offset:
            end_epoch = header.partition_leader_epoch
        if visible and header.next_offset > start and header.base_offset < end:
            returned.append((batch_body(data, position, header), header))
    rows = decode_columns(returned, start, end, with_headers) if returned else None
    return Fetched(rows if rows is not None and rows.rows else None, end_epoch), next_offset, last_epoch


def _accepted(what: str, answers: Iterable[tuple[str, int, int, T]]) -> dict[TopicPartition, T]:
    """The error-free answers of a per-leader request, by partition; those with a retriable error are left out
    (with_leaders asks again), any other error is raised naming the partition."""
    found: dict[TopicPartition, T] = {}
    for topic, partition, code, value in answers:
        error = ErrorCode(code)
        if error == ErrorCode.NONE:
            found[(topic, partition)] = value
        elif error not in RETRIABLE:
            raise KafkaClientError(f"{what} {topic}-{partition}: {error.name}")
    return found


def _by_topic(share: dict[TopicPartition, Leader]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for topic, partition in share:
        topics.setdefault(topic, []).append(partition)
    return topics
