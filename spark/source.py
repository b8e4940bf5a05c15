"""The `kafka-epoch` data source for PySpark (Spark 4's Python Data Source API), and its batch reads.

Columns are those of Spark's Kafka connector (`key`, `value`, `topic`, `partition`, `offset`, `timestamp`,
`timestampType`, and `headers` with `includeHeaders`), plus `leaderEpoch`: the leader epoch of the record's
batch (KIP-101), which no other connector gives.

Rules:
- Planning happens on the driver: the options are checked (one line naming a bad one, before any task runs),
  the topics' partitions found, and each partition's [start, end) resolved with ListOffsets ("latest" is the
  high watermark; under kafka.isolation.level=read_committed the last stable offset: a batch read over a
  partition with an open transaction ends where that transaction begins, it does not wait for it). One Spark
  task per partition range; everything a task needs is in its InputPartition.
- A task opens its own connection (readers are pickled to executor processes), fetches its range from the
  leader and yields Arrow record batches, one per fetch answer: a partition is never held in memory whole. A
  batch's columns are the decoder's buffers (kafka.py, protocol/record_columns.py) wrapped as Arrow arrays
  without a copy, and topic and partition repeated: no Python object per row (but for headers, when asked).
- A task checks the epochs at both ends of its range when they are known: the leader checks the epoch of the
  record before its start (DivergingEpoch), and the task checks that the batch holding the offset before its
  end (a record, or under read_committed often a transaction marker) is in the epoch the driver planned with.
  A log truncated between planning and reading is caught, never read past silently.
- `minPartitions` splits the largest ranges (halving the largest piece each time) until there are enough tasks.
  Streaming reads (stream.py) plan their micro-batches into the same ranges and read them with the same task.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from epoch_broker.protocol.record_columns import RecordColumns
from epoch_broker.spark.kafka import Cluster, DivergedError, KafkaClientError, TopicPartition
from epoch_broker.spark.options import EARLIEST, LATEST, OptionError, Position, SourceOptions, parse_source_options

NAME = "kafka-epoch"
BASE_COLUMNS = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
                "timestampType int")
HEADERS_COLUMN = "headers array<struct<key: string, value: binary>>"
EPOCH_COLUMN = "leaderEpoch int"
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
log = logging.getLogger("epoch_broker.spark")


def schema_ddl(include_headers: bool) -> str:
    return ", ".join([BASE_COLUMNS, *([HEADERS_COLUMN] if include_headers else []), EPOCH_COLUMN])


@dataclass(frozen=True)
class RangePartition(InputPartition):
    """One task: a topic partition's [start, end), the leader epochs of the records before each end (-1 when
    unknown), and how to reach and read the cluster."""

    bootstrap: str
    topic: str
    partition: int
    start: int
    end: int
    start_epoch: int
    end_epoch: int
    include_headers: bool
    fail_on_data_loss: bool
    timeout_s: float
    deadline_s: float
    max_bytes: int
    isolation_level: int


@dataclass(frozen=True, slots=True)
class Range:
    """What the driver plans for one partition: read [start, end); the records before each end have these
    leader epochs (-1 when unknown)."""

    topic: str
    partition: int
    start: int
    end: int
    start_epoch: int = -1
    end_epoch: int = -1


class KafkaEpochDataSource(DataSource):
    """`spark.read.format("kafka-epoch").option("kafka.bootstrap.servers", ...).option("subscribe", ...)`."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return schema_ddl(self._options().include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(self._options())

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from epoch_broker.spark.stream import StreamReader

        return StreamReader(self._options())

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from epoch_broker.spark.sink import BatchWriter

        return BatchWriter(dict(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from epoch_broker.spark.sink import StreamWriter

        return StreamWriter(dict(self.options), schema)

    def _options(self) -> SourceOptions:
        try:
            return parse_source_options(dict(self.options))
        except OptionError as exc:
            raise ValueError(f"{NAME}: {exc}") from exc


class BatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        with cluster_of(self.options) as cluster:
            return tasks(self.options, plan_ranges(cluster, self.options))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(partition)


def tasks(options: SourceOptions, ranges: list[Range]) -> list[InputPartition]:
    """One task per non-empty range, after `minPartitions` splitting (Spark needs at least one: an empty one)."""
    pieces = split_ranges([r for r in ranges if r.end > r.start], options.min_partitions or 0)
    return [RangePartition(options.bootstrap, r.topic, r.partition, r.start, r.end, r.start_epoch, r.end_epoch,
                           options.include_headers, options.fail_on_data_loss, options.request_timeout_s,
                           options.api_timeout_s, min(options.fetch_max_bytes, options.max_partition_fetch_bytes),
                           options.isolation_level)
            for r in pieces] or [
        RangePartition(options.bootstrap, "", -1, 0, 0, -1, -1, options.include_headers, True, 1.0, 1.0, 0,
                       options.isolation_level)]


def cluster_of(options: SourceOptions) -> Cluster:
    return Cluster(options.bootstrap, options.request_timeout_s, options.api_timeout_s, options.isolation_level)


def split_ranges(ranges: list[Range], min_partitions: int) -> list[Range]:
    """Halve the largest range until there are `min_partitions`; a piece's inner ends have unknown epochs."""
    pieces = list(ranges)
    while len(pieces) < min_partitions:
        largest = max(range(len(pieces)), key=lambda i: pieces[i].end - pieces[i].start, default=None)
        if largest is None or pieces[largest].end - pieces[largest].start < 2:
            break
        whole = pieces[largest]
        middle = whole.start + (whole.end - whole.start) // 2
        pieces[largest:largest + 1] = [Range(whole.topic, whole.partition, whole.start, middle, whole.start_epoch),
                                       Range(whole.topic, whole.partition, middle, whole.end, -1, whole.end_epoch)]
    return pieces


def read_range(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """A task: the records of one range as Arrow batches, with its epoch checks (see the module's rules)."""
    assert isinstance(partition, RangePartition)
    if partition.end <= partition.start:
        return
    end_epoch: int | None = None  # of the batch holding offset end - 1, once read
    with Cluster(partition.bootstrap, partition.timeout_s, partition.deadline_s, partition.isolation_level) as cluster:
        cluster.refresh()
        try:
            for fetched in cluster.read(partition.topic, partition.partition, partition.start, partition.end,
                                        partition.max_bytes, partition.fail_on_data_loss, partition.start_epoch,
                                        partition.include_headers):
                if fetched.end_epoch is not None:
                    end_epoch = fetched.end_epoch
                if fetched.rows is None:
                    continue  # only skipped records or markers
                batch = to_arrow(partition.topic, partition.partition, fetched.rows)
                del fetched  # not alive while the next fetch is decoded
                yield batch
        except DivergedError as exc:
            if partition.fail_on_data_loss:
                raise KafkaClientError(f"{exc} while reading [{partition.start}, {partition.end}) "
                                     "(failOnDataLoss=false reads on)") from exc
            log.warning("%s; the next micro-batch resumes there (failOnDataLoss=false)", exc)
            return
    if end_epoch is not None and partition.end_epoch >= 0 and end_epoch != partition.end_epoch:
        message = (f"{partition.topic}-{partition.partition}: offset {partition.end - 1} was planned in leader "
                   f"epoch {partition.end_epoch} but is in a batch of epoch {end_epoch}: the log was "
                   "truncated and rewritten while the query read it")
        if partition.fail_on_data_loss:
            raise KafkaClientError(message)
        log.warning("%s (failOnDataLoss=false reads on)", message)


def plan_ranges(cluster: Cluster, options: SourceOptions) -> list[Range]:
    """Every partition's range, resolved on the driver (one request per leader for each kind of offset)."""
    found = cluster.refresh()
    wanted = options.partitions_in(found)
    if options.assign and (missing := [f"{t}-{p}" for t, p in options.assign if (t, p) not in set(wanted)]):
        raise ValueError(f"{NAME}: option assign names partitions that do not exist: {', '.join(missing)}")
    if options.subscribe and (absent := sorted(set(options.subscribe) - set(found))):
        raise ValueError(f"{NAME}: option subscribe names topics that do not exist: {', '.join(absent)}")
    starts = starting_positions(cluster, options, wanted)
    ends = resolve_positions(cluster, wanted, options.ending, LATEST)
    return [Range(t, p, starts[(t, p)].offset, ends[(t, p)].offset, starts[(t, p)].leader_epoch)
            for t, p in wanted]


def starting_positions(cluster: Cluster, options: SourceOptions, wanted: list[TopicPartition]
                       ) -> dict[TopicPartition, Position]:
    """Where reading starts: by timestamp when asked (the first record at or after it), else `startingOffsets`."""
    timestamps = options.starting_timestamps
    if timestamps is None:
        return resolve_positions(cluster, wanted, options.starting, EARLIEST)
    per_partition = ({tp: timestamps for tp in wanted} if isinstance(timestamps, int)
                     else {tp: timestamps.get(tp, EARLIEST) for tp in wanted})
    positions: dict[TopicPartition, Position] = {}
    for timestamp in set(per_partition.values()):
        asked = [tp for tp, value in per_partition.items() if value == timestamp]
        for tp, (offset, _) in _list_offsets(cluster, asked, timestamp).items():
            if offset < 0 and not options.latest_when_no_timestamp:
                raise ValueError(f"{NAME}: {tp[0]}-{tp[1]} has no record at or after timestamp {timestamp} "
                                 "(startingOffsetsByTimestampStrategy=latest starts at the end instead)")
            positions[tp] = Position(offset)
    if unmatched := [tp for tp, position in positions.items() if position.offset < 0]:
        positions |= {tp: Position(offset) for tp, (offset, _) in _list_offsets(cluster, unmatched, LATEST).items()}
    return positions


def resolve_positions(cluster: Cluster, wanted: list[TopicPartition], spec: Any, unnamed: int
                      ) -> dict[TopicPartition, Position]:
    """The positions a starting or ending option means (JSON that does not name a partition: `unnamed`)."""
    given = {tp: spec.get(tp, Position(unnamed)) if isinstance(spec, dict) else Position(spec) for tp in wanted}
    for special in (EARLIEST, LATEST):
        if asked := [tp for tp, position in given.items() if position.offset == special]:
            given |= {tp: Position(offset) for tp, (offset, _) in _list_offsets(cluster, asked, special).items()}
    return given


def _list_offsets(cluster: Cluster, wanted: list[TopicPartition], timestamp: int
                  ) -> dict[TopicPartition, tuple[int, int]]:
    try:
        return cluster.list_offsets(wanted, timestamp)
    except KafkaClientError as exc:
        raise ValueError(f"{NAME}: {exc}") from exc


def to_arrow(topic: str, partition: int, rows: RecordColumns) -> pa.RecordBatch:
    """The decoder's columns as one Arrow batch, with `headers` when it decoded them."""
    count = rows.rows
    columns = [
        _binary(count, rows.key_offsets, rows.key_data, rows.key_validity, rows.key_nulls),
        _binary(count, rows.value_offsets, rows.value_data, rows.value_validity, rows.value_nulls),
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.repeat(pa.scalar(partition, pa.int32()), count),
        _fixed(pa.int64(), count, rows.offsets),
        # milliseconds to Spark's microseconds, an error (not a wrap) past 64 bits
        pc.multiply_checked(_fixed(pa.int64(), count, rows.timestamps), 1000).view(TIMESTAMP_TYPE),
        _fixed(pa.int32(), count, rows.timestamp_types),
    ]
    names = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    if rows.headers is not None:
        columns.append(pa.array([[{"key": k, "value": v} for k, v in pairs] for pairs in rows.headers],
                                HEADER_TYPE))
        names.append("headers")
    columns.append(_fixed(pa.int32(), count, rows.leader_epochs))
    names.append("leaderEpoch")
    return pa.RecordBatch.from_arrays(columns, names=names)


def _binary(count: int, offsets: bytearray, data: bytearray, validity: bytearray | None, nulls: int) -> pa.Array:
    """A binary column over the decoder's buffers (no copy: Arrow holds the bytearrays)."""
    used = memoryview(offsets).cast("i")[count]
    return pa.Array.from_buffers(pa.binary(), count, [
        None if validity is None else pa.py_buffer(validity).slice(0, (count + 7) // 8),
        pa.py_buffer(offsets).slice(0, 4 * (count + 1)), pa.py_buffer(data).slice(0, used)], null_count=nulls)


def _fixed(kind: pa.DataType, count: int, values: bytearray) -> pa.Array:
    return pa.Array.from_buffers(kind, count, [None, pa.py_buffer(values).slice(0, count * kind.byte_width)],
                                 null_count=0)
