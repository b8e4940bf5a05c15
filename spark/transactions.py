"""What the exactly-once sink asks of the cluster beyond producing: a transaction at the transaction coordinator
(KIP-98), and the sink's commit log, a compacted topic saying which (sink, batch, Spark partition) committed.

Rules:
- One transactional id per (sink, Spark partition): `<transactionalIdPrefix><sink id>-<partition>`. Every
  attempt of a task uses it, so InitProducerId, asked first, fences the attempts before it: the coordinator
  aborts a transaction one left open (answering CONCURRENT_TRANSACTIONS until the abort markers are written,
  retried here) and bumps the producer epoch, after which the partitions refuse the old attempt's writes
  (INVALID_PRODUCER_EPOCH) and the coordinator its EndTxn (PRODUCER_FENCED).
- A task leaves its transaction open; the driver ends it with EndTxn under the task's producer id and epoch
  (two-phase, as Flink's Kafka sink resumes a transaction): only the driver knows every task succeeded.
- The coordinator is found with FindCoordinator (key type 1) and found again after NOT_COORDINATOR,
  COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS or a lost connection; CONCURRENT_TRANSACTIONS is
  retried after a backoff. Any other error fails the task naming the transactional id and the error.
- The commit log holds one record per committed (sink, batch, partition), written in the task's transaction: key
  `<sink id>/<partition>`, value the JSON of Progress. Batches of one sink and partition commit in batch order
  (Spark starts batch N + 1 only once batch N committed), so the latest committed record of a key says whether a
  batch is done: batch <= its batch. Compaction keeps exactly that record.
- `last_committed` runs after InitProducerId, when no transaction of the key's transactional id is open: every
  record of the key is then decided by a marker of its producer that follows it in the log. It reads the key's
  commit-log partition read_uncommitted (read_committed would stop at the last stable offset, held back by other
  tasks' open transactions, or for a transaction timeout by a killed one's) and decides each record of the key
  by that marker itself. It reads backwards from the high watermark in growing windows: the previous batch's
  record is among the last few records of a partition, so a long-lived query does not read its whole log.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from epoch_broker.client.blocking import BlockingKafkaClient, ConnectionClosed
from epoch_broker.client.completed_fetch import READ_UNCOMMITTED
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import add_partitions_to_txn, end_txn, fetch, find_coordinator, init_producer_id
from epoch_broker.protocol.records import iter_batches, iter_records, parse_end_txn_marker
from epoch_broker.spark.kafka import BACKOFF_S, EARLIEST, LATEST, RETRIABLE, Cluster, KafkaClientError, Leader, Retry

T = TypeVar("T")
TopicPartition = tuple[str, int]
FIND_COORDINATOR_VERSION, INIT_PRODUCER_ID_VERSION, ADD_PARTITIONS_VERSION, END_TXN_VERSION = 3, 4, 3, 3
FETCH_VERSION = 12
KEY_TYPE_TRANSACTION = 1
FIND_AGAIN = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
FIRST_WINDOW = 64  # records read back from the high watermark before doubling: a few batches' worth of tasks
READ_BYTES = 1 << 20


class CoordinatorRefused(KafkaClientError):
    """The transaction coordinator answered an error that asking again will not change."""

    def __init__(self, what: str, transactional_id: str, error: ErrorCode) -> None:
        super().__init__(f"{what} for transactional id {transactional_id!r}: {error.name}")
        self.error = error


@dataclass(frozen=True, slots=True)
class Progress:
    """The commit-log record of one committed (sink, batch, Spark partition): the rows it wrote."""

    sink: str
    batch: int
    partition: int
    rows: int

    @property
    def key(self) -> bytes:
        return commit_log_key(self.sink, self.partition)

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, value: bytes) -> Progress:
        return cls(**json.loads(value))


def commit_log_key(sink: str, partition: int) -> bytes:
    return f"{sink}/{partition}".encode()


def transactional_id(prefix: str, sink: str, partition: int) -> str:
    return f"{prefix}{sink}-{partition}"


class Transaction:
    """One producer's transactions under a transactional id: `init` (fencing earlier producers), then for each
    transaction `add_partitions` before writing to a partition, and `end`."""

    def __init__(self, cluster: Cluster, transactional_id: str, timeout_ms: int) -> None:
        self.cluster = cluster
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self.producer_id = self.producer_epoch = -1
        self.partitions: set[TopicPartition] = set()  # in the open transaction
        self._coordinator: BlockingKafkaClient | None = None

    def close(self) -> None:
        if self._coordinator is not None:
            self._coordinator.close()
            self._coordinator = None

    def init(self) -> None:
        def ask(client: BlockingKafkaClient) -> Any:
            return client.request(init_producer_id.API, INIT_PRODUCER_ID_VERSION, init_producer_id.REQUEST.cls(
                transactional_id=self.transactional_id, transaction_timeout_ms=self.timeout_ms))

        answer = self._at_coordinator("InitProducerId", ask, lambda answer: answer.error_code)
        self.producer_id, self.producer_epoch = answer.producer_id, answer.producer_epoch
        self.partitions.clear()

    def add_partitions(self, wanted: Iterator[TopicPartition] | list[TopicPartition]) -> None:
        """Add the partitions not in the transaction yet (AddPartitionsToTxn, one request)."""
        new = sorted(set(wanted) - self.partitions)
        if not new:
            return
        topics: dict[str, list[int]] = {}
        for topic, partition in new:
            topics.setdefault(topic, []).append(partition)
        request = add_partitions_to_txn.REQUEST.cls(
            transactions=[], v3_and_below_transactional_id=self.transactional_id,
            v3_and_below_producer_id=self.producer_id, v3_and_below_producer_epoch=self.producer_epoch,
            v3_and_below_topics=[add_partitions_to_txn.REQUEST.AddPartitionsToTxnTopic(name=t, partitions=p)
                                 for t, p in topics.items()])

        def error_of(answer: Any) -> int:
            # one error for the request (v3: each partition answers; a refusal names the partition that caused it)
            codes = [(r.partition_error_code, f"{t.name}-{r.partition_index}")
                     for t in answer.results_by_topic_v3_and_below for r in t.results_by_partition]
            failing = [(code, where) for code, where in codes if code not in (ErrorCode.NONE,
                                                                              ErrorCode.OPERATION_NOT_ATTEMPTED)]
            return failing[0][0] if failing else ErrorCode.NONE

        self._at_coordinator("AddPartitionsToTxn",
                             lambda client: client.request(add_partitions_to_txn.API, ADD_PARTITIONS_VERSION, request),
                             error_of)
        self.partitions.update(new)

    def end(self, commit: bool) -> None:
        """EndTxn: commit or abort the open transaction of this producer (its id and epoch: `init`'s, or set by
        whoever resumes the transaction a task left open, as the driver does)."""
        request = end_txn.REQUEST.cls(transactional_id=self.transactional_id, producer_id=self.producer_id,
                                      producer_epoch=self.producer_epoch, committed=commit)
        self._at_coordinator("EndTxn", lambda client: client.request(end_txn.API, END_TXN_VERSION, request),
                             lambda answer: answer.error_code)
        self.partitions.clear()

    def _at_coordinator(self, what: str, call: Callable[[BlockingKafkaClient], T],
                        error_of: Callable[[T], int]) -> T:
        """`call` at the coordinator until it answers without a retriable error, within the delivery timeout."""
        deadline = time.monotonic() + self.cluster.deadline_s
        problem = ""
        while time.monotonic() < deadline:
            try:
                client = self._coordinator or self._find()
                answer = call(client)
            except (OSError, ConnectionClosed) as exc:
                problem = str(exc)
                self.close()
            except Retry as exc:
                problem = str(exc)
            else:
                error = ErrorCode(error_of(answer))
                if error == ErrorCode.NONE:
                    return answer
                if error in FIND_AGAIN:
                    self.close()
                elif error != ErrorCode.CONCURRENT_TRANSACTIONS:
                    raise CoordinatorRefused(what, self.transactional_id, error)
                problem = error.name
            time.sleep(BACKOFF_S)
        raise KafkaClientError(f"{what} for transactional id {self.transactional_id!r}: not done within "
                               f"{self.cluster.deadline_s:.0f} s ({problem})")

    def _find(self) -> BlockingKafkaClient:
        """A connection to the transactional id's coordinator; Retry while there is none."""
        answer = find_coordinator_of(self.cluster, self.transactional_id)
        self._coordinator = BlockingKafkaClient(answer.host, answer.port, "epoch-broker-spark", self.cluster.timeout_s)
        return self._coordinator


def find_coordinator_of(cluster: Cluster, transactional: str) -> Any:
    """FindCoordinator for a transactional id at a bootstrap broker: its answer; Retry while the coordinator is
    not available, CoordinatorRefused for any other error (TRANSACTIONAL_ID_AUTHORIZATION_FAILED: the principal
    may not use transactions)."""
    answer = ask_bootstrap(cluster, lambda client: client.request(
        find_coordinator.API, FIND_COORDINATOR_VERSION,
        find_coordinator.REQUEST.cls(key=transactional, key_type=KEY_TYPE_TRANSACTION)))
    error = ErrorCode(answer.error_code)
    if error in FIND_AGAIN:
        raise Retry(f"FindCoordinator: {error.name}")
    if error != ErrorCode.NONE:
        raise CoordinatorRefused("FindCoordinator", transactional, error)
    return answer


def ask_bootstrap(cluster: Cluster, call: Callable[[BlockingKafkaClient], T]) -> T:
    """`call` on a connection of its own to the first bootstrap broker that answers (a broker of a cluster
    may be down); Retry when none does."""
    problems = []
    for address in cluster.bootstrap:
        host, _, port = address.rpartition(":")
        try:
            with BlockingKafkaClient(host, int(port), "epoch-broker-spark", cluster.timeout_s) as client:
                return call(client)
        except (OSError, ConnectionClosed) as exc:
            problems.append(f"{address}: {exc}")
    raise Retry(f"no bootstrap broker answered: {'; '.join(problems)}")


def last_committed(cluster: Cluster, topic: str, partition: int, key: bytes) -> Progress | None:
    """The latest committed Progress of `key` in the commit log's partition (see the module's rules)."""
    (log_start, _), = cluster.list_offsets([(topic, partition)], EARLIEST).values()
    (high_watermark, _), = cluster.list_offsets([(topic, partition)], LATEST).values()
    window = FIRST_WINDOW
    while True:
        start = max(log_start, high_watermark - window)
        found = committed_in(read_batches(cluster, topic, partition, start, high_watermark), key)
        if found or start == log_start:
            return found[-1] if found else None
        window *= 4


def committed_in(answers: Iterator[bytes], key: bytes) -> list[Progress]:
    """The committed Progress records of `key`, in log order, in the record bytes of consecutive Fetch answers:
    each record of the key waits for a marker of its producer (read_uncommitted answers hold the markers too);
    one without a marker in the range read is left out, as is one a marker aborted."""
    pending: dict[int, list[Progress]] = {}
    committed: list[Progress] = []
    for data in answers:
        for position, header in iter_batches(data):
            if header.is_control:
                waiting = pending.pop(header.producer_id, [])
                if parse_end_txn_marker(data, position, header).commit:
                    committed += waiting
                continue
            for record in iter_records(data, position, header):
                if record.key == key and record.value is not None:
                    pending.setdefault(header.producer_id, []).append(Progress.decode(record.value))
    return committed


def read_batches(cluster: Cluster, topic: str, partition: int, start: int, end: int) -> Iterator[bytes]:
    """The record bytes of Fetch answers (read_uncommitted) covering [start, end) of a partition."""
    offset = start
    while offset < end:
        def fetch_at(client: BlockingKafkaClient, leader: Leader, at: int = offset) -> bytes:
            request = fetch.REQUEST.cls(
                replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=READ_BYTES, isolation_level=READ_UNCOMMITTED,
                session_id=0, session_epoch=-1, forgotten_topics_data=[],
                topics=[fetch.REQUEST.FetchTopic(topic=topic, partitions=[fetch.REQUEST.FetchPartition(
                    partition=partition, current_leader_epoch=leader.leader_epoch, fetch_offset=at,
                    partition_max_bytes=READ_BYTES)])])
            answer = client.request(fetch.API, FETCH_VERSION, request).responses[0].partitions[0]
            error = ErrorCode(answer.error_code)
            if error in RETRIABLE:
                raise Retry(f"Fetch {topic}-{partition}: {error.name}")
            if error != ErrorCode.NONE:
                raise KafkaClientError(f"Fetch {topic}-{partition} at {at}: {error.name}")
            return bytes(answer.records or b"")

        data = cluster.with_leader(topic, partition, fetch_at)
        next_offset = max((header.next_offset for _, header in iter_batches(data)), default=offset)
        if next_offset <= offset:
            raise KafkaClientError(f"{topic}-{partition}: no records at offset {offset} below the high watermark {end}")
        yield data
        offset = next_offset
