"""Spark jobs in a Spark process of their own, started by the tests as a user's pipeline would run:

    python -m tests.spark.jobs resume BOOTSTRAP TOPIC OUTPUT CHECKPOINT
        a Structured Streaming job reading TOPIC through `kafka-epoch` with Trigger.AvailableNow into Parquet at
        OUTPUT, resuming from CHECKPOINT (a pipeline restarted after a stop); prints "read N rows".
    python -m tests.spark.jobs executors BOOTSTRAP TOPIC
        a batch read on `local-cluster[2,1,1024]`: executors in two JVMs of their own, so tasks run in Python
        workers that share nothing with the driver; prints one JSON line: the rows and the workers' pids.
    python -m tests.spark.jobs exactly_once_fail BOOTSTRAP TOPIC MASTER FAILURE
        an exactly-once batch write of 400 rows (r000..r399, padded) in 2 Spark partitions, whose partition 0
        fails on its first attempt once 50 of its first 100 rows are in the topic: FAILURE is "raise" (the task
        raises; master local[2,4], so Spark tries it again) or "kill" (its executor JVM is SIGKILLed; master
        local-cluster).
    python -m tests.spark.jobs exactly_once_stream BOOTSTRAP SOURCE OUTPUT CHECKPOINT
        a streaming copy of SOURCE to OUTPUT through the exactly-once sink (transactionalIdPrefix STREAM_PREFIX),
        Trigger.AvailableNow; prints the micro-batches it ran.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any


def session(master: str) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import pyspark

    os.environ.setdefault("SPARK_HOME", os.path.dirname(pyspark.__file__))  # local-cluster starts executors there
    from pyspark.sql import SparkSession

    from epoch_broker.spark import register

    spark = (SparkSession.builder.master(master).appName("epoch-broker-test-job")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC").getOrCreate())
    register(spark)
    return spark


def resume(bootstrap: str, topic: str, output: str, checkpoint: str) -> None:
    spark = session("local[2]")
    query = (spark.readStream.format("kafka-epoch").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).load()
             .writeStream.format("parquet").option("path", output).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    print(f"read {sum(p['numInputRows'] for p in query.recentProgress)} rows", flush=True)
    spark.stop()


def executor_jvm() -> str:
    """The JVM this Python worker serves (its nearest java ancestor): "<pid> <main class>"."""
    pid = os.getppid()
    while pid > 1:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if os.path.basename(command[0]) == b"java":
            main = next(arg for arg in command if arg.startswith(b"org.apache.spark."))
            return f"{pid} {main.decode()}"
        pid = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    return "none"


def executors(bootstrap: str, topic: str) -> None:
    from pyspark.sql.functions import udf

    spark = session("local-cluster[2,1,1024]")
    jvm = udf(lambda _: executor_jvm(), "string")
    frame = (spark.read.format("kafka-epoch").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("minPartitions", "4").load())
    rows = frame.select("partition", "offset", "value", "leaderEpoch", jvm("offset").alias("jvm")).collect()
    print(json.dumps({"rows": sorted([r.partition, r.offset, bytes(r.value).decode(), r.leaderEpoch] for r in rows),
                      "jvms": sorted({r.jvm for r in rows})}), flush=True)
    spark.stop()


ROWS, BATCH_ROWS = 400, 20
STREAM_PREFIX = "eos-stream-"  # exactly_once_stream's transactionalIdPrefix: its transactions among a broker's
# Rows padded so that a few fill the 64 KiB buffers between Spark's JVM and its Python workers: rows sent before a
# failure then reach the sink (a worker flushes a full buffer), which small rows would wait in a buffer for.
PAD = b"." * 4000


def values_written(bootstrap: str, topic: str, prefix: bytes) -> int:
    """How many records of the topic (read_uncommitted: committed or not) have a value starting with `prefix`."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "jobs", "isolation.level": "read_uncommitted",
                         "enable.partition.eof": True, "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        found, at_end = 0, set()
        while len(at_end) < len(partitions):
            for message in consumer.consume(1000, timeout=1.0):
                if message.error() is not None:
                    at_end.add(message.partition())
                elif message.value().startswith(prefix):
                    found += 1
        return found
    finally:
        consumer.close()


def numbered_source(bootstrap: str, topic: str, failure: str) -> Any:
    """A data source of ROWS rows (value r000, r001, ..., each + PAD) in 2 partitions of Arrow batches of
    BATCH_ROWS rows, whose partition 0 fails on its first attempt once half of its first 100 rows (r000..r099) are
    in the topic: it raises ("raise"), or SIGKILLs its executor JVM ("kill")."""
    import pyarrow as pa
    from pyspark import TaskContext
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class Reader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(0), InputPartition(1)]

        def read(self, partition: InputPartition) -> Any:
            task, half = TaskContext.get(), ROWS // 4
            first = partition.value * ROWS // 2
            for start in range(first, first + ROWS // 2, BATCH_ROWS):
                if partition.value == 0 and task.attemptNumber() == 0 and start == half:
                    # some of them: the last ones wait in the sink's open batch and Spark's buffers
                    while values_written(bootstrap, topic, b"r0") < half // 2:
                        time.sleep(0.2)
                    if failure == "kill":
                        os.kill(int(executor_jvm().split()[0]), 9)
                    raise RuntimeError("the first attempt fails after writing half its rows")
                yield pa.record_batch([pa.array([b"r%03d" % n + PAD for n in range(start, start + BATCH_ROWS)])],
                                      names=["value"])

    class Numbered(DataSource):
        @classmethod
        def name(cls) -> str:
            return "numbered"

        def schema(self) -> str:
            return "value binary"

        def reader(self, schema: Any) -> DataSourceReader:
            return Reader()

    return Numbered


def exactly_once_fail(bootstrap: str, topic: str, master: str, failure: str) -> None:
    spark = session(master)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(BATCH_ROWS))
    spark.dataSource.register(numbered_source(bootstrap, topic, failure))
    (spark.read.format("numbered").load().write.format("kafka-epoch").mode("append")
     .option("kafka.bootstrap.servers", bootstrap).option("topic", topic).option("exactlyOnce", "true")
     .option("kafka.batch.size", "200").save())
    spark.stop()


def exactly_once_stream(bootstrap: str, source: str, output: str, checkpoint: str) -> None:
    spark = session("local[2]")
    query = (spark.readStream.format("kafka-epoch").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", source).load().select("key", "value")
             .writeStream.format("kafka-epoch").option("kafka.bootstrap.servers", bootstrap).option("topic", output)
             .option("exactlyOnce", "true").option("transactionalIdPrefix", STREAM_PREFIX)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    print(f"batches {[p['batchId'] for p in query.recentProgress]}", flush=True)
    spark.stop()


if __name__ == "__main__":
    {"resume": resume, "executors": executors, "exactly_once_fail": exactly_once_fail,
     "exactly_once_stream": exactly_once_stream}[sys.argv[1]](*sys.argv[2:])
