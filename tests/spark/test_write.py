"""Writes through the `kafka-epoch` sink, batch and streaming, checked against what a confluent-kafka consumer
reads back from a real broker process: keys, values, headers and partitions as given, keyed rows where Kafka's
default partitioner puts them (kafka-python's murmur2 is the reference), every row exactly once, each task an
idempotent producer (producer ids and sequences as the broker stored them), retries through the broker's fault
hooks and a lost answer."""

from __future__ import annotations

import asyncio
import random
from itertools import pairwise
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2
from pyspark.sql.types import BinaryType, StructField, StructType

from epoch_broker.client.blocking import BlockingKafkaClient
from epoch_broker.drill.admin import alter_faults
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import fetch
from epoch_broker.protocol.records import BatchHeader, iter_batches
from epoch_broker.spark.kafka import Cluster, KafkaClientError
from epoch_broker.spark.sink import (
    IdempotentProducer,
    columns_of,
    murmur2,
    parse_sink_options,
    write_all,
)
from tests.helpers import BrokerProcess
from tests.spark.support import consumed, create

pytestmark = pytest.mark.slow

HEADERS = "array<struct<key:string,value:binary>>"
KEY_VALUE = StructType([StructField("key", BinaryType()), StructField("value", BinaryType())])


def keyed_partition(key: bytes, partitions: int) -> int:
    """Where the Java client (and librdkafka's murmur2_random) puts a keyed record."""
    return (kafka_python_murmur2(key) & 0x7FFFFFFF) % partitions


def write(frame: Any, bootstrap: str, **options: str) -> None:
    writer = frame.write.format("kafka-epoch").mode("append").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        writer = writer.option(key.replace("_", "."), value)
    writer.save()


def assert_dense(records: list[tuple[Any, ...]]) -> None:
    """Each partition's offsets run 0, 1, 2, ... (consumed() sorts by partition and offset)."""
    for partition in {r[3] for r in records}:
        offsets = [r[4] for r in records if r[3] == partition]
        assert offsets == list(range(len(offsets))), partition


def stored_batches(bootstrap: str, topic: str, partition: int) -> list[BatchHeader]:
    """The partition's batch headers as the broker stored them, by a raw Fetch from offset 0."""
    request = fetch.REQUEST.cls(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=16 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, forgotten_topics_data=[], topics=[fetch.REQUEST.FetchTopic(topic=topic, partitions=[
            fetch.REQUEST.FetchPartition(partition=partition, current_leader_epoch=-1, fetch_offset=0,
                                         partition_max_bytes=16 << 20)])])
    with BlockingKafkaClient.connect(bootstrap) as client:
        answer = client.request(fetch.API, 12, request).responses[0].partitions[0]
    assert answer.error_code == ErrorCode.NONE
    return [header for _, header in iter_batches(bytes(answer.records or b""))]


def test_murmur2_is_kafkas_partitioner_hash() -> None:
    rng = random.Random(7)
    keys = [b"", b"a", "ü".encode(), *(rng.randbytes(rng.randrange(64)) for _ in range(2000))]
    assert [murmur2(key) for key in keys] == [kafka_python_murmur2(key) for key in keys]
    # Kafka's UtilsTest.testMurmur2, as Java's signed ints
    for text, java in [("21", -973932308), ("foobar", -790332482), ("a-little-bit-long-string", -985981536),
                       ("a-little-bit-longer-string", -1486304829), ("abc", 479470107),
                       ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971)]:
        assert murmur2(text.encode()) == java & 0xFFFFFFFF


def test_a_batch_write_lands_every_row_with_its_key_value_headers_and_partition(spark: Any,
                                                                                broker: BrokerProcess) -> None:
    topic = "spark-write"
    create(broker.bootstrap, topic, 3)
    rows = [(None if i % 5 == 0 else f"key-{i}".encode(), f"value-{i}".encode(), i % 3 if i % 7 == 0 else None,
             [("n", str(i).encode()), ("empty", None)] if i % 2 else None) for i in range(90)]
    frame = spark.createDataFrame(rows, f"key binary, value binary, partition int, headers {HEADERS}")
    # small batches: several per partition, so sequences go past 0
    write(frame, broker.bootstrap, topic=topic, kafka_compression_type="zstd", kafka_batch_size="300")
    records = consumed(broker.bootstrap, topic, 3)
    assert len(records) == len(rows)
    assert_dense(records)
    landed = {r[1]: r for r in records}
    for key, value, partition, headers in rows:
        got_key, _, got_topic, got_partition, *_, got_headers, _ = landed[value]
        assert (got_key, got_topic, got_headers) == (key, topic, headers or [])
        if partition is not None:
            assert got_partition == partition
        elif key is not None:
            assert got_partition == keyed_partition(key, 3)


def test_a_topic_column_writes_to_several_topics_and_strings_are_utf8(spark: Any, broker: BrokerProcess) -> None:
    sizes = {"spark-write-a": 2, "spark-write-b": 1}
    for topic, partitions in sizes.items():
        create(broker.bootstrap, topic, partitions)
    rows = [(f"k{i}", f"v{i} ü", "spark-write-a" if i % 3 else "spark-write-b") for i in range(40)]
    write(spark.createDataFrame(rows, "key string, value string, topic string"), broker.bootstrap,
          kafka_compression_type="gzip")
    for topic, partitions in sizes.items():
        records = consumed(broker.bootstrap, topic, partitions)
        assert sorted((r[0], r[1], r[3]) for r in records) == sorted(
            (key.encode(), value.encode(), keyed_partition(key.encode(), partitions))
            for key, value, name in rows if name == topic)
        assert_dense(records)


def test_a_streaming_write_lands_every_row(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    topic = "spark-write-stream"
    create(broker.bootstrap, topic, 2)
    source = tmp_path / "in"
    source.mkdir()
    lines = {n: [f"line {n}-{i}" for i in range(50)] for n in range(2)}
    for n, text in lines.items():
        (source / f"{n}.txt").write_text("\n".join(text) + "\n")
    query = (spark.readStream.format("text").option("maxFilesPerTrigger", 1).load(str(source))
             .selectExpr("value AS key", "value").writeStream.format("kafka-epoch")
             .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    assert query.awaitTermination(120), "the availableNow query did not finish"
    assert query.exception() is None
    assert len(query.recentProgress) == 2  # one micro-batch per file
    records = consumed(broker.bootstrap, topic, 2)
    assert sorted((r[0], r[1], r[3]) for r in records) == sorted(
        (line.encode(), line.encode(), keyed_partition(line.encode(), 2)) for text in lines.values() for line in text)
    assert_dense(records)


REFUSED = "spark-write-refused"


@pytest.mark.parametrize(("columns", "options", "message"), [
    (["CAST(id AS STRING) AS key"], {"topic": REFUSED}, "the DataFrame needs a value column"),
    (["CAST(id AS STRING) AS value"], {"topic": REFUSED, "kafka.compression.type": "brotli"},
     "option kafka.compression.type must be one of none, gzip, snappy, lz4, zstd, not 'brotli'"),
    (["CAST(id AS STRING) AS value"], {}, "give the option topic or a topic column"),
    (["CAST(id AS STRING) AS value", "CAST(id AS INT) AS key"], {"topic": REFUSED},
     "column key must be binary or string, not int"),
    (["CAST(id AS STRING) AS value", "array(CAST(id AS STRING)) AS headers"], {"topic": REFUSED},
     "column headers must be array<struct<key:string,value:binary>>, not array<string>"),
    (["CAST(id AS STRING) AS value"], {"topic": REFUSED, "kafka.request.timeout.ms": "soon"},
     "option kafka.request.timeout.ms must be an integer of at least 1, not 'soon'"),
])
def test_bad_options_and_columns_get_one_clear_error_before_any_task_runs(
        spark: Any, broker: BrokerProcess, columns: list[str], options: dict[str, str], message: str) -> None:
    if REFUSED not in Cluster(broker.bootstrap, 10, 10).refresh():
        create(broker.bootstrap, REFUSED, 1)
    writer = (spark.range(3).selectExpr(*columns).write.format("kafka-epoch").mode("append")
              .option("kafka.bootstrap.servers", broker.bootstrap))
    for key, value in options.items():
        writer = writer.option(key, value)
    with pytest.raises(Exception, match=f"kafka-epoch: {message}") as raised:
        writer.save()
    assert "Failed to initialize Python data source writer" in str(raised.value)  # planning, not a task
    assert consumed(broker.bootstrap, REFUSED, 1) == []


def test_overwrite_is_refused_as_the_connector_refuses_it(spark: Any, broker: BrokerProcess) -> None:
    frame = spark.createDataFrame([(b"v",)], "value binary")
    with pytest.raises(Exception, match="save mode Overwrite is not allowed"):
        (frame.write.format("kafka-epoch").mode("overwrite").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("topic", "t").save())


def test_a_row_the_sink_cannot_place_fails_the_write_naming_its_partition(spark: Any,
                                                                          broker: BrokerProcess) -> None:
    topic = "spark-write-no-partition"
    create(broker.bootstrap, topic, 2)
    with pytest.raises(Exception, match=f"{topic}-5: no such partition \\({topic} has 2\\)"):
        write(spark.createDataFrame([(b"v", 5)], "value binary, partition int"), broker.bootstrap, topic=topic)


def test_each_task_is_one_idempotent_producer(spark: Any, broker: BrokerProcess) -> None:
    topic = "spark-write-idempotent"
    create(broker.bootstrap, topic, 2)
    frame = spark.range(0, 200, 1, 2).selectExpr("CAST(CONCAT('k', id) AS BINARY) AS key",
                                                 "CAST(REPEAT('x', 50) AS BINARY) AS value")
    write(frame, broker.bootstrap, topic=topic, kafka_batch_size="600")
    producers: set[int] = set()
    for partition in range(2):
        batches = stored_batches(broker.bootstrap, topic, partition)
        assert batches[0].base_offset == 0
        assert all(b.base_offset == a.next_offset for a, b in pairwise(batches))
        next_sequence: dict[int, int] = {}
        for batch in batches:
            assert batch.producer_id >= 0 and batch.producer_epoch == 0
            assert batch.base_sequence == next_sequence.get(batch.producer_id, 0)
            next_sequence[batch.producer_id] = batch.last_sequence + 1
        producers |= set(next_sequence)
    assert len(producers) == 2  # one per Spark task
    assert len(consumed(broker.bootstrap, topic, 2)) == 200


def arrow_rows(count: int) -> pa.RecordBatch:
    return pa.record_batch({"key": pa.array([b"k%d" % i for i in range(count)], pa.binary()),
                            "value": pa.array([b"v%d" % i for i in range(count)], pa.binary())})


def test_retriable_errors_send_the_same_batch_again_and_others_fail_naming_the_partition(
        broker: BrokerProcess) -> None:
    topic = "spark-write-retried"
    create(broker.bootstrap, topic, 2)
    options = parse_sink_options({"kafka.bootstrap.servers": broker.bootstrap, "topic": topic,
                                  "kafka.batch.size": "200"})
    columns = columns_of(KEY_VALUE, options)
    asyncio.run(alter_faults(broker.bootstrap, 0, {"fault.request.produce": "error=NOT_LEADER_OR_FOLLOWER,count=3"}))
    commit = write_all(options, columns, iter([arrow_rows(30), arrow_rows(30)]))
    assert sum(commit.records.values()) == 60
    records = consumed(broker.bootstrap, topic, 2)
    assert sorted((r[0], r[1]) for r in records) == sorted((b"k%d" % (i % 30), b"v%d" % (i % 30)) for i in range(60))
    assert_dense(records)

    asyncio.run(alter_faults(broker.bootstrap, 0, {"fault.request.produce": "error=MESSAGE_TOO_LARGE,count=1"}))
    with pytest.raises(KafkaClientError, match=f"Produce {topic}-[01]: MESSAGE_TOO_LARGE"):
        write_all(options, columns, iter([arrow_rows(5)]))


class AnswersLost(Cluster):
    """Every request goes twice and the first answer is thrown away: a retry after a lost answer."""

    def with_leaders(self, wanted: Any, call: Any) -> Any:
        super().with_leaders(wanted, call)
        return super().with_leaders(wanted, call)


def test_a_batch_sent_again_after_its_answer_was_lost_is_written_once(broker: BrokerProcess) -> None:
    topic = "spark-write-lost-answer"
    create(broker.bootstrap, topic, 2)
    options = parse_sink_options({"kafka.bootstrap.servers": broker.bootstrap, "topic": topic,
                                  "kafka.batch.size": "100"})
    with AnswersLost(broker.bootstrap, 10, 10) as cluster:
        cluster.refresh()
        producer = IdempotentProducer(cluster, options)
        for i in range(20):
            producer.append(topic, None, b"k%d" % i, b"v%d" % i, [])
        producer.send(everything=True)
    assert sum(producer.written.values()) == 20
    records = consumed(broker.bootstrap, topic, 2)
    assert sorted(r[1] for r in records) == sorted(b"v%d" % i for i in range(20))
    assert_dense(records)
