"""Spark jobs in a Spark process of their own, started by the tests as a user's pipeline would run:

    python -m tests.spark.jobs resume BOOTSTRAP TOPIC OUTPUT CHECKPOINT
        a Structured Streaming job reading TOPIC through `kafka-epoch` with Trigger.AvailableNow into Parquet at
        OUTPUT, resuming from CHECKPOINT (a pipeline restarted after a stop); prints "read N rows".
    python -m tests.spark.jobs executors BOOTSTRAP TOPIC
        a batch read on `local-cluster[2,1,1024]`: executors in two JVMs of their own, so tasks run in Python
        workers that share nothing with the driver; prints one JSON line: the rows and the workers' pids.
"""

from __future__ import annotations

import json
import os
import sys
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


if __name__ == "__main__":
    {"resume": resume, "executors": executors}[sys.argv[1]](*sys.argv[2:])
