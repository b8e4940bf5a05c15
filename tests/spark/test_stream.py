"""Streaming reads through the `kafka-epoch` source on one broker process (issue 11): Trigger.AvailableNow into
Parquet and a restart from the checkpoint in a new Spark process, maxOffsetsPerTrigger, and a subscribePattern
query picking up a new topic and added partitions. Rows are checked against a confluent-kafka consumer.
Truncation and failover need a cluster: test_stream_cluster.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions
from pyspark.errors import StreamingQueryException

from tests.helpers import REPO, BrokerProcess
from tests.spark.support import Collected, consumed, create, produce, stream, wait_until

pytestmark = pytest.mark.slow


def last_checkpoint_offsets(checkpoint: Path) -> dict[str, Any]:
    """The source's offsets in the newest entry of the checkpoint's offset log (its last line)."""
    newest = max((checkpoint / "offsets").glob("[0-9]*"), key=lambda path: int(path.name))
    return json.loads(newest.read_text().splitlines()[-1])


def test_available_now_to_parquet_then_a_new_spark_process_resumes_from_the_checkpoint(
        spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    topic, partitions = "stream-restart", 3
    create(broker.bootstrap, topic, partitions)
    produce(broker.bootstrap, topic, [b"first %d" % i for i in range(60)], partitions)
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    query = (stream(spark, broker.bootstrap, subscribe=topic).writeStream.format("parquet")
             .option("path", str(output)).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    assert spark.read.parquet(str(output)).count() == 60
    # The checkpoint holds each partition's next offset with the leader epoch of the record before it.
    assert last_checkpoint_offsets(checkpoint) == {
        topic: {str(p): {"offset": 20, "leaderEpoch": 0} for p in range(partitions)}}

    produce(broker.bootstrap, topic, [b"second %d" % i for i in range(40)], partitions)
    job = subprocess.run([sys.executable, "-m", "tests.spark.jobs", "resume", broker.bootstrap, topic, str(output),
                          str(checkpoint)], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert job.returncode == 0, job.stderr[-3000:]
    assert "read 40 rows" in job.stdout

    rows = sorted((r.partition, r.offset, bytes(r.value), r.leaderEpoch)
                  for r in spark.read.parquet(str(output)).collect())
    expected = sorted((row[3], row[4], row[1], row[8]) for row in consumed(broker.bootstrap, topic, partitions))
    assert len(expected) == 100
    assert rows == expected  # every record once: none skipped, none read twice across the restart


def test_max_offsets_per_trigger_splits_the_backlog_into_micro_batches(spark: Any, broker: BrokerProcess) -> None:
    topic = "stream-limited"
    create(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, [b"%d" % i for i in range(100)], 2)
    query = (stream(spark, broker.bootstrap, subscribe=topic, maxOffsetsPerTrigger="30").writeStream
             .format("memory").queryName("limited").trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [30, 30, 30, 10]
    rows = sorted((r.partition, r.offset) for r in spark.sql("select partition, offset from limited").collect())
    assert rows == [(p, o) for p in range(2) for o in range(50)]


def test_subscribe_pattern_picks_up_a_new_topic_and_added_partitions(spark: Any, broker: BrokerProcess,
                                                                      tmp_path: Path) -> None:
    create(broker.bootstrap, "pattern-a", 1)
    produce(broker.bootstrap, "pattern-a", [b"a%d" % i for i in range(5)], 1)
    collected = Collected()
    query = (stream(spark, broker.bootstrap, subscribePattern="pattern-.*").writeStream.foreachBatch(collected)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(processingTime="200 milliseconds")
             .start())
    try:
        wait_until(lambda: len(collected.snapshot()) == 5, what="the first topic's 5 records")
        create(broker.bootstrap, "pattern-b", 2)
        produce(broker.bootstrap, "pattern-b", [b"b%d" % i for i in range(6)], 2)
        wait_until(lambda: len(collected.snapshot()) == 11, what="the new topic's 6 records")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_partitions([NewPartitions("pattern-a", 3)])["pattern-a"].result(30)
        produce(broker.bootstrap, "pattern-a", [b"new%d" % i for i in range(6)], 3)  # 2 to each partition
        wait_until(lambda: len(collected.snapshot()) == 17, what="the records of the added partitions")
        assert query.exception() is None
    finally:
        query.stop()
    expected = sorted((row[2], row[3], row[4], row[1]) for topic, count in (("pattern-a", 3), ("pattern-b", 2))
                      for row in consumed(broker.bootstrap, topic, count))
    assert collected.snapshot() == expected
    # the added partitions were read from their first offset
    assert sorted((t, p, o) for t, p, o, _ in collected.snapshot() if t == "pattern-a" and p > 0) == [
        ("pattern-a", p, o) for p in (1, 2) for o in range(2)]


def test_a_deleted_topic_is_data_loss_and_false_reads_on_without_it(spark: Any, broker: BrokerProcess,
                                                                    tmp_path: Path) -> None:
    create(broker.bootstrap, "doomed", 1)
    create(broker.bootstrap, "kept", 1)
    produce(broker.bootstrap, "doomed", [b"d"] * 3, 1)
    produce(broker.bootstrap, "kept", [b"k"] * 2, 1)

    def run(fail_on_data_loss: str) -> Any:
        query = (stream(spark, broker.bootstrap, subscribePattern="doomed|kept", failOnDataLoss=fail_on_data_loss)
                 .writeStream.format("parquet").option("path", str(tmp_path / "out"))
                 .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
        try:
            query.awaitTermination(120)
        except StreamingQueryException as exc:
            return exc
        return None

    assert run("true") is None
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics(["doomed"])["doomed"].result(30)
    produce(broker.bootstrap, "kept", [b"k2"], 1)
    error = run("true")
    assert error is not None and "data loss: doomed-0 (at offset 3): no longer in the cluster" in str(error)
    assert run("false") is None
    assert sorted((r.topic, r.offset) for r in spark.read.parquet(str(tmp_path / "out")).collect()) == [
        ("doomed", 0), ("doomed", 1), ("doomed", 2), ("kept", 0), ("kept", 1), ("kept", 2)]
