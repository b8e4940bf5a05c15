"""Batch reads through the `kafka-epoch` data source (issue 11, first step), checked row by row against what a
confluent-kafka consumer reads from the same topic of a real broker process."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.helpers import REPO, BrokerProcess
from tests.spark.support import consumed, create, produce

pytestmark = pytest.mark.slow

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PARTITIONS = 3


def produce_every_kind(bootstrap: str, topic: str) -> None:
    """Keys, null keys and values, headers, every codec, over every partition."""
    for n, codec in enumerate(CODECS):
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5})
        for i in range(20):
            key = None if i % 7 == 0 else f"{codec}-{i}".encode()
            value = None if i % 5 == 0 else (f"value {codec} {i} " * (1 + i % 3)).encode()
            headers = [("h", f"{i}".encode()), ("empty", None)] if i % 2 else None
            producer.produce(topic, value, key, partition=(n + i) % PARTITIONS, headers=headers,
                             timestamp=1_700_000_000_000 + i)
        assert producer.flush(30) == 0


def test_a_batch_read_gives_every_record_with_every_column_as_a_consumer_sees_it(spark: Any,
                                                                                   broker: BrokerProcess) -> None:
    topic = "spark-batch"
    create(broker.bootstrap, topic, PARTITIONS)
    produce_every_kind(broker.bootstrap, topic)
    frame = (spark.read.format("kafka-epoch").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribe", topic).option("includeHeaders", "true").load())
    assert [(f.name, f.dataType.simpleString()) for f in frame.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"), ("offset", "bigint"),
        ("timestamp", "timestamp"), ("timestampType", "int"),
        ("headers", "array<struct<key:string,value:binary>>"), ("leaderEpoch", "int")]
    rows = sorted(((bytes(r.key) if r.key is not None else None, bytes(r.value) if r.value is not None else None,
                    r.topic, r.partition, r.offset, int(r.timestamp.timestamp() * 1000), r.timestampType,
                    [(h.key, bytes(h.value) if h.value is not None else None) for h in r.headers], r.leaderEpoch)
                   for r in frame.collect()), key=lambda r: (r[3], r[4]))
    expected = consumed(broker.bootstrap, topic, PARTITIONS)
    assert len(rows) == len(CODECS) * 20
    assert rows == expected


def test_offset_options_and_assign_choose_the_range(spark: Any, broker: BrokerProcess) -> None:
    topic = "spark-range"
    create(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, [b"%d" % i for i in range(10)], 2)
    frame = (spark.read.format("kafka-epoch").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("assign", f'{{"{topic}": [1]}}')
             .option("startingOffsets", f'{{"{topic}": {{"1": 1}}}}')
             .option("endingOffsets", f'{{"{topic}": {{"1": {{"offset": 4, "leaderEpoch": 0}}}}}}').load())
    assert sorted((r.partition, r.offset, bytes(r.value)) for r in frame.collect()) == [
        (1, 1, b"3"), (1, 2, b"5"), (1, 3, b"7")]


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": "a", "assign": '{"a": [0]}'}, "exactly one of the options subscribe, subscribePattern, assign"),
    ({"assign": '{"no-such-topic": [0]}'}, "assign names partitions that do not exist: no-such-topic-0"),
    ({"subscribe": "a", "startingOffsets": "{not json"}, "option startingOffsets is not valid JSON"),
    ({"subscribe": "a", "endingOffsets": "earliest"}, "endingOffsets cannot be earliest"),
])
def test_bad_options_get_one_clear_error_before_any_task_runs(spark: Any, broker: BrokerProcess,
                                                              options: dict[str, str], message: str) -> None:
    reader = spark.read.format("kafka-epoch").option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    with pytest.raises(Exception, match=message):
        reader.load().collect()


def test_min_partitions_splits_ranges_into_more_tasks_and_timestamps_choose_the_start(spark: Any,
                                                                                      broker: BrokerProcess) -> None:
    topic = "spark-split"
    create(broker.bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(40):
        producer.produce(topic, b"%d" % i, partition=i % 2, timestamp=1_700_000_000_000 + i)
    assert producer.flush(30) == 0
    reader = (spark.read.format("kafka-epoch").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic))
    split = reader.option("minPartitions", "7").load()
    assert split.rdd.getNumPartitions() == 7
    assert sorted((r.partition, r.offset) for r in split.collect()) == [(p, o) for p in range(2) for o in range(20)]
    # the first record at or after the timestamp of record 30 (partition 0, offset 15; partition 1, offset 15)
    later = reader.option("startingTimestamp", str(1_700_000_000_000 + 30)).load()
    assert sorted((r.partition, r.offset) for r in later.collect()) == [(p, o) for p in range(2) for o in range(15, 20)]
    with pytest.raises(Exception, match=f"{topic}-0 has no record at or after timestamp 1800000000000"):
        reader.option("startingTimestamp", "1800000000000").load().collect()
    assert reader.option("startingTimestamp", "1800000000000").option(
        "startingOffsetsByTimestampStrategy", "latest").load().count() == 0


def test_executors_in_processes_of_their_own_read_the_topic(broker: BrokerProcess) -> None:
    """local-cluster[2,1,1024]: two executor JVMs besides the driver; the tasks share nothing with the driver but
    their InputPartition."""
    topic = "spark-executors"
    create(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, [b"v%d" % i for i in range(200)], 2)
    job = subprocess.run([sys.executable, "-m", "tests.spark.jobs", "executors", broker.bootstrap, topic],
                         capture_output=True, text=True, timeout=300, cwd=REPO)
    assert job.returncode == 0, job.stderr[-3000:]
    result = json.loads(job.stdout.strip().splitlines()[-1])
    expected = sorted([row[3], row[4], row[1].decode(), row[8]] for row in consumed(broker.bootstrap, topic, 2))
    assert result["rows"] == expected and len(expected) == 200
    assert len(result["jvms"]) == 2
    assert all(jvm.endswith("org.apache.spark.executor.CoarseGrainedExecutorBackend") for jvm in result["jvms"])
