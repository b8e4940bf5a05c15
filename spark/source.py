"""The `kafka-epoch` data source for PySpark (Spark 4's Python Data Source API): batch reads of topics.

Columns are those of Spark's Kafka connector (`key`, `value`, `topic`, `partition`, `offset`, `timestamp`,
`timestampType`, and `headers` with `includeHeaders`), plus `leaderEpoch`: the leader epoch of the record's
batch (KIP-101), which no other connector gives.

Rules:
- Planning happens on the driver: the options are checked (one line naming a bad one, before any task runs),
  the topics' partitions found, and each partition's [start, end) resolved with ListOffsets ("latest" is the
  high watermark). One Spark task per partition range; everything a task needs is in its InputPartition.
- A task opens its own connection (readers are pickled to executor processes), fetches its range from the
  leader and yields Arrow record batches, one per fetch answer: a partition is never held in memory whole.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from epoch_broker.spark.kafka import Cluster, KafkaReadError, StoredRecord
from epoch_broker.spark.options import EARLIEST, LATEST, OptionError, Position, SourceOptions, parse_source_options
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

NAME = "kafka-epoch"
BASE_COLUMNS = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
                "timestampType int")
HEADERS_COLUMN = "headers array<struct<key: string, value: binary>>"
EPOCH_COLUMN = "leaderEpoch int"
HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def schema_ddl(include_headers: bool) -> str:
    return ", ".join([BASE_COLUMNS, *([HEADERS_COLUMN] if include_headers else []), EPOCH_COLUMN])


@dataclass(frozen=True)
class RangePartition(InputPartition):
    """One task: a topic partition's [start, end), and how to reach the cluster."""

    bootstrap: str
    topic: str
    partition: int
    start: int
    end: int
    include_headers: bool
    fail_on_data_loss: bool
    timeout_s: float
    max_bytes: int


class KafkaEpochDataSource(DataSource):
    """`spark.read.format("kafka-epoch").option("kafka.bootstrap.servers", ...).option("subscribe", ...)`."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return schema_ddl(self._options().include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(self._options())

    def _options(self) -> SourceOptions:
        try:
            return parse_source_options(dict(self.options))
        except OptionError as exc:
            raise ValueError(f"{NAME}: {exc}") from exc


class BatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        with Cluster(options.bootstrap, options.request_timeout_s) as cluster:
            ranges = plan_ranges(cluster, options)
        return [RangePartition(options.bootstrap, topic, partition, start, end, options.include_headers,
                               options.fail_on_data_loss, options.request_timeout_s, options.fetch_max_bytes)
                for topic, partition, start, end in ranges if end > start] or [
                    RangePartition(options.bootstrap, "", -1, 0, 0, options.include_headers, True, 1.0, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        if partition.end <= partition.start:
            return
        with Cluster(partition.bootstrap, partition.timeout_s) as cluster:
            cluster.refresh()
            for records in cluster.read(partition.topic, partition.partition, partition.start, partition.end,
                                        partition.max_bytes, partition.fail_on_data_loss):
                yield to_arrow(partition.topic, partition.partition, records, partition.include_headers)


def plan_ranges(cluster: Cluster, options: SourceOptions) -> list[tuple[str, int, int, int]]:
    """(topic, partition, start, end) of every partition read, resolved on the driver."""
    found = cluster.refresh()
    if options.assign:
        missing = [f"{t}-{p}" for t, p in options.assign if p not in found.get(t, {})]
        if missing:
            raise ValueError(f"{NAME}: option assign names partitions that do not exist: {', '.join(missing)}")
        wanted = list(options.assign)
    else:
        wanted = sorted((topic, p) for topic, partitions in found.items() if options.wants(topic)
                        for p in partitions)
        if options.subscribe and (absent := sorted(set(options.subscribe) - set(found))):
            raise ValueError(f"{NAME}: option subscribe names topics that do not exist: {', '.join(absent)}")
    return [(topic, p, _resolve(cluster, topic, p, options.starting, EARLIEST),
             _resolve(cluster, topic, p, options.ending, LATEST)) for topic, p in wanted]


def _resolve(cluster: Cluster, topic: str, partition: int, spec: Any, unnamed: int) -> int:
    """The offset a starting or ending option means for one partition (JSON that does not name the partition:
    `unnamed`, earliest for starting offsets and latest for ending ones)."""
    position = spec.get((topic, partition), Position(unnamed)) if isinstance(spec, dict) else Position(spec)
    if position.offset in (EARLIEST, LATEST):
        try:
            return cluster.list_offset(topic, partition, position.offset)[0]
        except KafkaReadError as exc:
            raise ValueError(f"{NAME}: {exc}") from exc
    return position.offset


def to_arrow(topic: str, partition: int, records: list[StoredRecord], include_headers: bool) -> pa.RecordBatch:
    count = len(records)
    columns = [
        pa.array([r.record.key for r in records], pa.binary()),
        pa.array([r.record.value for r in records], pa.binary()),
        pa.array([topic] * count, pa.string()),
        pa.array([partition] * count, pa.int32()),
        pa.array([r.record.offset for r in records], pa.int64()),
        pa.array([r.record.timestamp * 1000 for r in records], pa.timestamp("us", tz="UTC")),
        pa.array([r.timestamp_type for r in records], pa.int32()),
    ]
    names = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    if include_headers:
        columns.append(pa.array([[{"key": k, "value": v} for k, v in r.record.headers] for r in records],
                                HEADER_TYPE))
        names.append("headers")
    columns.append(pa.array([r.leader_epoch for r in records], pa.int32()))
    names.append("leaderEpoch")
    return pa.RecordBatch.from_arrays(columns, names=names)
