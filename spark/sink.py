"""The `kafka-epoch` sink: batch and streaming writes of DataFrames to topics, with the options and columns of
Spark's Kafka connector (spark-sql-kafka-0-10), so that a pipeline changes only the format name.

Columns: `value` (binary or string, required, may be null), `key` (binary or string, nullable), `topic` (string),
`partition` (int, nullable), `headers` (array<struct<key string, value binary>>); others are ignored. Strings are
written UTF-8. Options: `kafka.bootstrap.servers` (required), `topic` (when set, every row goes there, as the
connector's option overrides the column), `kafka.compression.type`, `kafka.request.timeout.ms` (one attempt),
`kafka.delivery.timeout.ms` (a batch with its retries), `kafka.batch.size`; ours: `exactlyOnce` (false),
`transactionalIdPrefix` ("epoch-spark-"), `commitLogTopic` ("epoch-spark-sink-commits"),
`kafka.transaction.timeout.ms` (60000); unknown options are ignored, as the connector does.

Rules:
- Options and columns are checked in the writer's constructor, which runs on the driver: a bad one is one
  ValueError naming it, before any task runs.
- Each Spark task (`write()` call) is one idempotent producer, as the Java producer's defaults make it: its own
  producer id (InitProducerId), acks=all, per-partition sequence numbers from 0. A retriable error (leader
  moved or not ready, fenced or unknown leader epoch, timeout, too few in-sync replicas, lost connection)
  refreshes the metadata and resends the same bytes with the same sequence, until the delivery timeout; the
  leader drops a batch it already has (answering NONE or DUPLICATE_SEQUENCE_NUMBER), so a retry never writes
  twice. Any other error fails the task naming the topic, partition and error.
- Rows land where the Java client and librdkafka's murmur2_random put them: the `partition` column if set,
  else keyed rows on murmur2(key) & 0x7fffffff mod the partition count. Rows without a key stick to one
  partition, chosen at random, until its batch is closed (the Java producer's sticky partitioner, KIP-480).
- Per partition, batches go in order with one in flight; one Produce request per leader carries the next
  batch of every partition it leads. Memory stays bounded: input Arrow batches are streamed, a batch is closed
  at `kafka.batch.size` bytes, and everything open is sent past BUFFER_BYTES.
- By default a failed task is retried by Spark with a new producer id, and records it had written stay: writes
  are at-least-once, batch and streaming alike, as the connector's are. commit() and abort() have nothing to undo.
- With exactlyOnce=true each task writes its rows and a commit-log record in one Kafka transaction, under a
  transactional id per (sink, Spark partition), and leaves it open; the driver commits every task's transaction
  once all succeeded (Spark's commit) or aborts them (abort): spark/transactions.py. A new attempt fences the old
  ones and aborts what they left open, and one whose (sink, batch, partition) already committed writes nothing,
  so a micro-batch run again after the driver died mid-commit writes only what had not committed. The sink is a
  streaming query's id (the same after a restart from its checkpoint) or, for a batch write, drawn once per
  write. This assumes a deterministic query: the same micro-batch gives the same rows in the same Spark
  partitions; a rerun whose row count differs from the committed one fails. A read_committed consumer then
  reads every row once. The driver checks first that the broker gives this client transactions and creates the
  commit-log topic (compacted) if it is missing.
"""

from __future__ import annotations

import logging
import random
import struct
import time
import uuid
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from epoch_broker.client.blocking import BlockingKafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import create_topics, init_producer_id, produce
from epoch_broker.protocol.records import BATCH_HEADER_SIZE, Compression, build_batch
from epoch_broker.spark.kafka import BACKOFF_S, RETRIABLE, Cluster, KafkaClientError, Leader, Retry
from epoch_broker.spark.options import OptionError
from epoch_broker.spark.source import NAME
from epoch_broker.spark.transactions import (
    CoordinatorRefused,
    Progress,
    Transaction,
    ask_bootstrap,
    commit_log_key,
    find_coordinator_of,
    last_committed,
    transactional_id,
)

PRODUCE_VERSION, INIT_PRODUCER_ID_VERSION, CREATE_TOPICS_VERSION = 9, 4, 5
ACKS_ALL = -1
# The producer's retriable errors: the reader's, plus those only a write gets. UNKNOWN_TOPIC_OR_PARTITION is
# transient on a broker whose metadata has not caught up with a topic just created.
WRITE_RETRIABLE = RETRIABLE | {ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                               ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
# The leader already has the batch: the write succeeded (Kafka answers NONE with the original offset; older
# brokers DUPLICATE_SEQUENCE_NUMBER).
WRITTEN = frozenset({ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER})
COORDINATOR_RETRIABLE = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                                   ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
CODECS = {codec.name.lower(): codec for codec in Compression}
BUFFER_BYTES = 32 << 20  # the Java producer's buffer.memory
# The most a record adds to a batch beyond its key, value and header bytes (varints at their widest), and per
# header: so that a batch closed at batch.size bytes by this estimate is no bigger.
RECORD_OVERHEAD, HEADER_OVERHEAD = 36, 10
SEQUENCE_MODULUS = 1 << 31  # sequences wrap at Int.MaxValue, as Kafka's do
DEFAULT_TRANSACTIONAL_ID_PREFIX, DEFAULT_COMMIT_LOG_TOPIC = "epoch-spark-", "epoch-spark-sink-commits"

TopicPartition = tuple[str, int]
log = logging.getLogger("epoch_broker.spark")
Headers = list[tuple[str, bytes | None]]


@dataclass(frozen=True, slots=True)
class SinkOptions:
    bootstrap: str
    topic: str | None = None
    compression: Compression = Compression.NONE
    request_timeout_s: float = 30.0
    delivery_timeout_s: float = 120.0
    batch_size: int = 1 << 20
    exactly_once: bool = False
    transactional_id_prefix: str = DEFAULT_TRANSACTIONAL_ID_PREFIX
    commit_log_topic: str = DEFAULT_COMMIT_LOG_TOPIC
    transaction_timeout_ms: int = 60_000  # the Java producer's transaction.timeout.ms


@dataclass(frozen=True, slots=True)
class Columns:
    """Where each column the sink reads sits in the input (None: absent)."""

    value: int
    key: int | None
    topic: int | None
    partition: int | None
    headers: int | None


@dataclass
class WriteCommit(WriterCommitMessage):
    """What one task wrote: its producer id and the records written per (topic, partition); with exactlyOnce,
    the transaction holding them, left open for the driver to commit (None: the task wrote nothing, its batch
    had committed)."""

    producer_id: int
    records: dict[TopicPartition, int]
    transactional_id: str | None = None
    producer_epoch: int = -1


def parse_sink_options(raw: Mapping[str, str]) -> SinkOptions:
    options = {key.lower(): value for key, value in raw.items()}
    bootstrap = options.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise OptionError("option kafka.bootstrap.servers is required")
    topic = options.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("option topic must name a topic")
    codec = options.get("kafka.compression.type", "none").strip().lower()
    if codec not in CODECS:
        raise OptionError(f"option kafka.compression.type must be one of {', '.join(CODECS)}, not {codec!r}")
    exactly_once = options.get("exactlyonce", "false").strip().lower()
    if exactly_once not in ("true", "false"):
        raise OptionError(f"option exactlyOnce must be true or false, not {exactly_once!r}")
    prefix = options.get("transactionalidprefix", DEFAULT_TRANSACTIONAL_ID_PREFIX)
    commit_log = options.get("commitlogtopic", DEFAULT_COMMIT_LOG_TOPIC).strip()
    if not commit_log:
        raise OptionError("option commitLogTopic must name a topic")
    return SinkOptions(bootstrap, topic.strip() if topic else None, CODECS[codec],
                       _count(options, "kafka.request.timeout.ms", 30000, 1) / 1000,
                       _count(options, "kafka.delivery.timeout.ms", 120000, 1) / 1000,
                       _count(options, "kafka.batch.size", 1 << 20, 0), exactly_once == "true", prefix, commit_log,
                       _count(options, "kafka.transaction.timeout.ms", 60000, 1))


def _count(options: Mapping[str, str], name: str, default: int, least: int) -> int:
    text = options.get(name, str(default))
    value = int(text) if text.strip().lstrip("-").isdigit() else None
    if value is None or value < least:
        raise OptionError(f"option {name} must be an integer of at least {least}, not {text!r}")
    return value


def columns_of(schema: StructType, options: SinkOptions) -> Columns:
    """The input's columns the sink reads, found by name as Spark's default resolver does (case-insensitive),
    each of a type the connector accepts (nullability aside)."""
    found = {f.name.lower(): (index, f.dataType.simpleString()) for index, f in enumerate(schema.fields)}

    def column(name: str, *accepted: str) -> int | None:
        if name not in found:
            return None
        index, data_type = found[name]
        if data_type not in accepted:
            raise OptionError(f"column {name} must be {' or '.join(accepted)}, not {data_type}")
        return index

    value = column("value", "binary", "string")
    if value is None:
        raise OptionError("the DataFrame needs a value column (binary or string)")
    topic = column("topic", "string")
    if topic is None and options.topic is None:
        raise OptionError("give the option topic or a topic column (string)")
    return Columns(value, column("key", "binary", "string"), topic, column("partition", "int"),
                   column("headers", "array<struct<key:string,value:binary>>"))


def _checked(options: Mapping[str, str], schema: StructType) -> tuple[SinkOptions, Columns]:
    try:
        parsed = parse_sink_options(options)
        return parsed, columns_of(schema, parsed)
    except OptionError as exc:
        raise ValueError(f"{NAME}: {exc}") from exc


class BatchWriter(DataSourceArrowWriter):
    """`df.write.format("kafka-epoch").mode("append")`: each task produces its rows (with exactlyOnce, in one
    transaction per task under a sink id drawn here, on the driver); commit and abort are no-ops. Overwrite is
    refused, as the connector refuses it: a topic cannot be emptied by a write."""

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool = False) -> None:
        if overwrite:
            raise ValueError(f"{NAME}: save mode Overwrite is not allowed (a topic is only appended to); "
                             "use mode append")
        self.options, self.columns = _checked(options, schema)
        self.sink = uuid.uuid4().hex  # one write: its task attempts share it, a new write gets another
        if self.options.exactly_once:
            check_transactions(self.options, self.sink)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteCommit:
        if self.options.exactly_once:
            return write_exactly_once(self.options, self.columns, iterator, self.sink, 0, _task().partitionId())
        return write_all(self.options, self.columns, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        end_transactions(self.options, messages, commit=True)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        end_transactions(self.options, messages, commit=False)


class StreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("kafka-epoch")`: each micro-batch's tasks produce as a batch write does; with
    exactlyOnce each in a transaction under the query's id (kept across restarts from a checkpoint) and the
    micro-batch's id, so a micro-batch run again writes only what had not committed."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options, self.columns = _checked(options, schema)
        if self.options.exactly_once:
            check_transactions(self.options, "query")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteCommit:
        if not self.options.exactly_once:
            return write_all(self.options, self.columns, iterator)
        task = _task()
        # set by Spark's MicroBatchExecution on every job of a micro-batch (StreamExecution.QUERY_ID_KEY and
        # MicroBatchExecution.BATCH_ID_KEY)
        query, batch = task.getLocalProperty("sql.streaming.queryId"), task.getLocalProperty("streaming.sql.batchId")
        if query is None or batch is None:
            raise KafkaClientError("exactlyOnce: the task does not know its streaming query or micro-batch id")
        return write_exactly_once(self.options, self.columns, iterator, query, int(batch), task.partitionId())

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        end_transactions(self.options, messages, commit=True)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        end_transactions(self.options, messages, commit=False)


def _task() -> TaskContext:
    task = TaskContext.get()
    if task is None:
        raise KafkaClientError("exactlyOnce: a write outside a Spark task")
    return task


def check_transactions(options: SinkOptions, sink: str) -> None:
    """On the driver, before any task runs: the broker gives this client transactions (a transaction
    coordinator answers for the sink's transactional ids) and the commit-log topic exists (created compacted if
    not). One ValueError saying what is missing otherwise."""
    probe = transactional_id(options.transactional_id_prefix, sink, 0)
    with Cluster(options.bootstrap, options.request_timeout_s, options.request_timeout_s) as cluster:
        deadline = time.monotonic() + options.request_timeout_s
        while True:
            try:
                find_coordinator_of(cluster, probe)
                break
            except CoordinatorRefused as exc:
                raise ValueError(f"{NAME}: exactlyOnce=true needs Kafka transactions, which the broker refuses this "
                                 f"client: {exc}") from exc
            except Retry as exc:
                if time.monotonic() >= deadline:
                    raise ValueError(f"{NAME}: exactlyOnce=true needs Kafka transactions, and no transaction "
                                     f"coordinator answered within {options.request_timeout_s:.0f} s ({exc})"
                                     ) from exc
                time.sleep(BACKOFF_S)
        if options.commit_log_topic not in cluster.refresh():
            _create_commit_log(cluster, options)


def _create_commit_log(cluster: Cluster, options: SinkOptions) -> None:
    topic = create_topics.REQUEST.CreatableTopic(
        name=options.commit_log_topic, num_partitions=1, replication_factor=-1, assignments=[],
        configs=[create_topics.REQUEST.CreatableTopicConfig(name="cleanup.policy", value="compact")])
    request = create_topics.REQUEST.cls(topics=[topic], timeout_ms=int(options.request_timeout_s * 1000))
    try:
        answer = ask_bootstrap(cluster, lambda client: client.request(create_topics.API, CREATE_TOPICS_VERSION,
                                                                      request)).topics[0]
    except Retry as exc:
        raise ValueError(f"{NAME}: exactlyOnce=true could not create its commit-log topic: {exc}") from exc
    if answer.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
        raise ValueError(f"{NAME}: exactlyOnce=true could not create its commit-log topic {options.commit_log_topic}: "
                         f"{ErrorCode(answer.error_code).name} {answer.error_message or ''}".rstrip())


def write_all(options: SinkOptions, columns: Columns, batches: Iterator[pa.RecordBatch]) -> WriteCommit:
    """One task: produce every row of `batches`, streamed, and wait until all are acknowledged."""
    with Cluster(options.bootstrap, options.request_timeout_s, options.delivery_timeout_s) as cluster:
        cluster.refresh()
        producer = IdempotentProducer(cluster, options)
        produce_rows(producer, columns, batches)
        producer.send(everything=True)
        return WriteCommit(producer.producer_id, producer.written)


def write_exactly_once(options: SinkOptions, columns: Columns, batches: Iterator[pa.RecordBatch], sink: str,
                       batch_id: int, spark_partition: int) -> WriteCommit:
    """One task of an exactly-once write: fence the task's earlier attempts, then write nothing if the commit
    log says (sink, batch, partition) committed, else every row and the commit-log record in one transaction,
    left open: the driver commits it once every task succeeded (a task cannot tell a complete input from one
    cut short by a failure upstream of it: PySpark ends a writer's input either way)."""
    with Cluster(options.bootstrap, options.request_timeout_s, options.delivery_timeout_s) as cluster:
        cluster.refresh()
        transaction = Transaction(cluster, transactional_id(options.transactional_id_prefix, sink, spark_partition),
                                  options.transaction_timeout_ms)
        try:
            transaction.init()
            producer = IdempotentProducer(cluster, options, transaction)
            key = commit_log_key(sink, spark_partition)
            log_partition = keyed_partition(key, producer.partition_count(options.commit_log_topic))
            done = last_committed(cluster, options.commit_log_topic, log_partition, key)
            if done is not None and done.batch >= batch_id:
                rows = sum(batch.num_rows for batch in batches)
                if done.batch == batch_id and done.rows != rows:
                    raise KafkaClientError(
                        f"exactlyOnce: batch {batch_id} partition {spark_partition} of sink {sink} committed "
                        f"{done.rows} rows, and this attempt has {rows}: the query is not deterministic (the same "
                        "batch must give the same rows in the same Spark partitions)")
                return WriteCommit(producer.producer_id, {})
            rows = produce_rows(producer, columns, batches)
            producer.append(options.commit_log_topic, log_partition, key,
                            Progress(sink, batch_id, spark_partition, rows).encode(), [])
            producer.send(everything=True)
        finally:
            transaction.close()
        written = {tp: count for tp, count in producer.written.items() if tp[0] != options.commit_log_topic}
        return WriteCommit(producer.producer_id, written, transaction.transactional_id, transaction.producer_epoch)


def end_transactions(options: SinkOptions, messages: list[WriterCommitMessage | None], commit: bool) -> None:
    """On the driver: commit (or abort) the transactions the tasks left open. A commit refused (the transaction
    was aborted: it stayed open past kafka.transaction.timeout.ms, or a later attempt fenced it) fails naming it;
    an abort refused is left to the coordinator, which aborts the transaction at its timeout."""
    open_ones = [m for m in messages if isinstance(m, WriteCommit) and m.transactional_id is not None]
    if not open_ones:
        return
    with Cluster(options.bootstrap, options.request_timeout_s, options.delivery_timeout_s) as cluster:
        for message in open_ones:
            assert message.transactional_id is not None
            transaction = Transaction(cluster, message.transactional_id, options.transaction_timeout_ms)
            transaction.producer_id, transaction.producer_epoch = message.producer_id, message.producer_epoch
            try:
                transaction.end(commit)
            except CoordinatorRefused as exc:
                if commit:
                    raise KafkaClientError(
                        f"exactlyOnce: {exc}: the task's transaction was aborted before the driver committed it "
                        f"(open longer than kafka.transaction.timeout.ms={options.transaction_timeout_ms}, or "
                        "fenced by another attempt); a streaming query restarted from its checkpoint writes what "
                        "is missing") from exc
                log.warning("exactlyOnce: aborting %s: %s", message.transactional_id, exc)
            finally:
                transaction.close()


def produce_rows(producer: IdempotentProducer, columns: Columns, batches: Iterator[pa.RecordBatch]) -> int:
    """Append every row of `batches` to the producer, sending as its buffer fills: the number of rows."""
    rows = 0
    for batch in batches:
        rows += batch.num_rows
        for topic, partition, key, value, headers in rows_of(batch, columns, producer.options.topic):
            producer.append(topic, partition, key, value, headers)
        producer.send(everything=producer.buffered > BUFFER_BYTES)
    return rows


def rows_of(batch: pa.RecordBatch, columns: Columns, topic_option: str | None
            ) -> Iterator[tuple[str, int | None, bytes | None, bytes | None, Headers]]:
    """(topic, partition or None, key, value, headers) of each row, strings encoded UTF-8."""
    def values(index: int | None) -> list[Any]:
        return batch.column(index).to_pylist() if index is not None else [None] * batch.num_rows

    topics = [topic_option] * batch.num_rows if topic_option is not None else values(columns.topic)
    for value, key, topic, partition, headers in zip(values(columns.value), values(columns.key), topics,
                                                     values(columns.partition), values(columns.headers),
                                                     strict=True):
        if topic is None:
            raise KafkaClientError("a row has a null topic: set the topic option, or a topic in every row")
        if headers and any(header["key"] is None for header in headers):
            raise KafkaClientError(f"a row for topic {topic} has a header with a null key")
        yield (topic, partition, _bytes(key), _bytes(value),
               [(header["key"], header["value"]) for header in headers or ()])


def _bytes(data: bytes | str | None) -> bytes | None:
    return data.encode() if isinstance(data, str) else data


def keyed_partition(key: bytes, count: int) -> int:
    """Where the Java client's default partitioner puts a keyed record among `count` partitions."""
    return (murmur2(key) & 0x7FFFFFFF) % count


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2, seed 0x9747b28c) as an unsigned 32-bit
    integer; Java's signed result has the same low 31 bits, which are all the partitioner uses."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    length = len(data)
    h = 0x9747B28C ^ length
    for (k,) in struct.iter_unpack("<I", data[: length & ~3]):
        k = (k * m) & mask
        k ^= k >> 24
        h = ((h * m) & mask) ^ ((k * m) & mask)
    tail = data[length & ~3:]
    if tail:
        h ^= int.from_bytes(tail, "little")
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    return h ^ (h >> 15)


@dataclass(slots=True)
class OpenBatch:
    records: list[tuple[bytes | None, bytes | None, Headers, None]] = field(default_factory=list)
    size: int = BATCH_HEADER_SIZE


@dataclass(frozen=True, slots=True)
class ClosedBatch:
    """A batch encoded with its producer id and sequence: retries send these very bytes."""

    data: bytearray
    count: int


class IdempotentProducer:
    """One task's producer: records are appended to an open batch per partition, closed batches wait in a
    queue per partition, and `send` drains the queues, one batch per partition in flight."""

    def __init__(self, cluster: Cluster, options: SinkOptions, transaction: Transaction | None = None) -> None:
        self.cluster = cluster
        self.options = options
        self.transaction = transaction  # set: every batch is in its open transaction
        self.producer_id, self.producer_epoch = (transaction.producer_id, transaction.producer_epoch) if transaction \
            else (-1, -1)
        self.sequences: dict[TopicPartition, int] = {}
        self.open: dict[TopicPartition, OpenBatch] = {}
        self.closed: dict[TopicPartition, deque[ClosedBatch]] = {}
        self.sticky: dict[str, int] = {}
        self.buffered = 0
        self.written: dict[TopicPartition, int] = {}

    def append(self, topic: str, partition: int | None, key: bytes | None, value: bytes | None,
               headers: Headers) -> None:
        count = self.partition_count(topic)
        if partition is None:
            if key is not None:
                partition = keyed_partition(key, count)
            else:
                partition = self.sticky.setdefault(topic, random.randrange(count))
        elif not 0 <= partition < count:
            raise KafkaClientError(f"{topic}-{partition}: no such partition ({topic} has {count})")
        size = (RECORD_OVERHEAD + len(key or b"") + len(value or b"")
                + sum(HEADER_OVERHEAD + len(k.encode()) + len(v or b"") for k, v in headers))
        batch = self.open.get((topic, partition))
        if batch is not None and batch.size + size > self.options.batch_size:
            self._close(topic, partition)
            batch = None
        if batch is None:
            batch = self.open[(topic, partition)] = OpenBatch()
        batch.records.append((key, value, headers, None))  # timestamp None: now, when the batch is built
        batch.size += size
        self.buffered += size

    def send(self, everything: bool) -> None:
        """Send every closed batch (and, if `everything`, every open one), returning when all are written."""
        if everything:
            for topic, partition in list(self.open):
                self._close(topic, partition)
        if self.transaction is not None:
            self.transaction.add_partitions(list(self.closed))
        while self.closed:
            self._send_heads()

    def _send_heads(self) -> None:
        """Send the next batch of every partition, one Produce request per leader, until all are written."""
        heads = {tp: queue[0] for tp, queue in self.closed.items()}
        refused: dict[TopicPartition, str] = {}
        try:
            written = self.cluster.with_leaders(
                list(heads), lambda client, share: self._produce(client, share, heads, refused))
        except KafkaClientError as exc:  # the last answers of the partitions given up on say more
            answers = "".join(f"; {t}-{p} answered {why}" for (t, p), why in refused.items())
            raise KafkaClientError(f"Produce {exc}{answers}") from exc
        for tp, count in written.items():
            queue = self.closed[tp]
            queue.popleft()
            if not queue:
                del self.closed[tp]
            self.written[tp] = self.written.get(tp, 0) + count

    def _produce(self, client: BlockingKafkaClient, share: dict[TopicPartition, Leader],
                 heads: dict[TopicPartition, ClosedBatch], refused: dict[TopicPartition, str]
                 ) -> dict[TopicPartition, int]:
        """One Produce request to a leader with the next batch of each partition it leads: the records written
        per partition; those with a retriable error (noted in `refused`) are left out, to be sent again."""
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), leader in share.items():
            by_topic.setdefault(topic, []).append(produce.REQUEST.PartitionProduceData(
                index=partition, records=heads[(topic, partition)].data, current_leader_epoch=leader.leader_epoch))
        response = client.request(produce.API, PRODUCE_VERSION, produce.REQUEST.cls(
            transactional_id=self.transaction.transactional_id if self.transaction else None, acks=ACKS_ALL,
            timeout_ms=int(self.options.request_timeout_s * 1000),
            topic_data=[produce.REQUEST.TopicProduceData(name=topic, partition_data=data)
                        for topic, data in by_topic.items()]))
        written: dict[TopicPartition, int] = {}
        for topic in response.responses:
            for answer in topic.partition_responses:
                error = ErrorCode(answer.error_code)
                why = f"{error.name}{f' ({answer.error_message})' if answer.error_message else ''}"
                if error in WRITTEN:
                    written[(topic.name, answer.index)] = heads[(topic.name, answer.index)].count
                elif error in WRITE_RETRIABLE:
                    refused[(topic.name, answer.index)] = why
                else:
                    raise KafkaClientError(f"Produce {topic.name}-{answer.index}: {why}")
        return written

    def _close(self, topic: str, partition: int) -> None:
        """Encode the open batch of a partition with the next sequence and queue it."""
        batch = self.open.pop((topic, partition))
        if self.producer_id < 0:
            self._init_producer_id(topic, partition)
        sequence = self.sequences.get((topic, partition), 0)
        self.sequences[(topic, partition)] = (sequence + len(batch.records)) % SEQUENCE_MODULUS
        data = build_batch(batch.records, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                           base_sequence=sequence, compression=self.options.compression,
                           is_transactional=self.transaction is not None)
        self.closed.setdefault((topic, partition), deque()).append(ClosedBatch(data, len(batch.records)))
        self.buffered -= batch.size - BATCH_HEADER_SIZE
        if self.sticky.get(topic) == partition:
            del self.sticky[topic]  # the next records without a key pick a partition afresh

    def _init_producer_id(self, topic: str, partition: int) -> None:
        """A new producer id for this task, asked of the leader of the first partition written (any broker
        answers InitProducerId without a transactional id)."""
        def ask(client: BlockingKafkaClient, _: Leader) -> tuple[int, int]:
            answer = client.request(init_producer_id.API, INIT_PRODUCER_ID_VERSION, init_producer_id.REQUEST.cls(
                transactional_id=None, transaction_timeout_ms=-1))
            error = ErrorCode(answer.error_code)
            if error in COORDINATOR_RETRIABLE:
                raise Retry(f"InitProducerId: {error.name}")
            if error != ErrorCode.NONE:
                raise KafkaClientError(f"InitProducerId: {error.name}")
            return answer.producer_id, answer.producer_epoch

        self.producer_id, self.producer_epoch = self.cluster.with_leader(topic, partition, ask)

    def partition_count(self, topic: str) -> int:
        """The topic's partition count, waiting up to the request timeout for a topic not in the metadata yet
        (one just created elsewhere)."""
        deadline = time.monotonic() + self.options.request_timeout_s
        while (partitions := self.cluster.partitions.get(topic)) is None:
            if time.monotonic() >= deadline:
                raise KafkaClientError(f"topic {topic} does not exist (not in the metadata within "
                                      f"{self.options.request_timeout_s:.0f} s)")
            time.sleep(BACKOFF_S)
            self.cluster.refresh()
        return len(partitions)
