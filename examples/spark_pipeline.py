"""A PySpark pipeline on an epoch-broker cluster, and a failover drill that truncates what it read.

    python examples/spark_pipeline.py [--work-dir DIR] [--base-port 29092]

1. Starts a cluster (`epoch-broker cluster --brokers 3`) in the background, as another terminal would.
2. Produces 1,000 page views with confluent-kafka (key: user, value: page) to topic `views`, replicas [0, 1],
   unclean leader election allowed.
3. Runs a Structured Streaming job: `views` read through `kafka-epoch`, views counted per page, the counts
   written to topic `page-counts` (the `kafka-epoch` sink) and to Parquet; Trigger.AvailableNow, checkpointed.
4. The drill, with `epoch-broker admin`: broker 1 stops replicating (a fault hook), 3 views go to broker 0
   alone and the job reads them; broker 1 is then elected uncleanly, which truncates those 3, and 5 new views
   are written in its new leader epoch.
5. Runs the job again: it stops with the truncation message (offsets alone would not show it: the partition
   has grown back past the stored offset). Run once more with failOnDataLoss=false, it resumes at the
   divergence point and reads the 5 new views.
Prints each step; exits 0 when every step went as described, 1 otherwise. Needs `pip install
"epoch-broker[spark]"` (pyspark, pyarrow) and Java 17+.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

VIEWS, COUNTS = "views", "page-counts"
PAGES = ["/", "/pricing", "/docs", "/blog"]


def step(message: str) -> None:
    print(f"\n== {message}", flush=True)


def admin(cluster_dir: Path, *args: str) -> str:
    """`epoch-broker admin --cluster DIR ...`, as a user types it; its output is shown."""
    command = [sys.executable, "-m", "epoch_broker", "admin", "--cluster", str(cluster_dir), *args]
    print("$ epoch-broker admin " + " ".join(args), flush=True)
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    print(result.stdout.rstrip(), flush=True)
    if result.returncode != 0:
        raise SystemExit(f"epoch-broker admin {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def start_cluster(cluster_dir: Path, base_port: int) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen([sys.executable, "-m", "epoch_broker", "cluster", "--brokers", "3", "--data-dir",
                                str(cluster_dir), "--base-port", str(base_port)],
                               stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    assert process.stdout is not None
    for line in process.stdout:
        print(line.rstrip(), flush=True)
        if "running;" in line:
            return process, json.loads((cluster_dir / "cluster.json").read_text())["bootstrap"]
    raise SystemExit(f"epoch-broker cluster exited with {process.wait()} before it ran")


def produce(bootstrap: str, values: list[tuple[str, str]], acks: str = "all") -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5})
    for user, page in values:
        producer.produce(VIEWS, page.encode(), user.encode(), partition=0)
    if producer.flush(60) != 0:
        raise SystemExit("views were not all delivered")


def isr_of(bootstrap: str) -> tuple[int, ...]:
    """The ISR of views-0, as the brokers answer Metadata."""
    from epoch_broker.drill.admin import fetch_metadata

    state = asyncio.run(fetch_metadata(bootstrap.split(","))).partitions.get((VIEWS, 0))
    return state.isr if state is not None else ()


def wait_until(what: str, check: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.5)


def run_job(spark: Any, bootstrap: str, work: Path, fail_on_data_loss: bool) -> tuple[int, str | None]:
    """One AvailableNow run of the pipeline: (views read, the error that stopped it or None)."""
    from pyspark.errors import StreamingQueryException
    from pyspark.sql import functions as F

    def write_counts(views: Any, batch_id: int) -> None:
        counts = views.groupBy("page").agg(F.count("*").alias("views")).persist()  # read the topic once
        counts.write.mode("append").parquet(str(work / "counts.parquet"))
        (counts.selectExpr("page AS key", "CAST(views AS STRING) AS value").write.format("kafka-epoch")
         .mode("append").option("kafka.bootstrap.servers", bootstrap).option("topic", COUNTS).save())
        counts.unpersist()

    views = (spark.readStream.format("kafka-epoch").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", VIEWS).option("failOnDataLoss", str(fail_on_data_loss).lower()).load()
             .selectExpr("CAST(value AS STRING) AS page", "offset", "leaderEpoch"))
    query = (views.writeStream.foreachBatch(write_counts).option("checkpointLocation", str(work / "checkpoint"))
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination()
    except StreamingQueryException as exc:  # Spark wraps the source's message in its own lines
        return 0, next((line for line in str(exc).splitlines() if "kafka-epoch: " in line), str(exc))
    return sum(progress["numInputRows"] for progress in query.recentProgress), None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work-dir", type=Path, default=None, help="cluster data, checkpoint, Parquet (a temp dir)")
    parser.add_argument("--base-port", type=int, default=29092, help="first broker port (default 29092)")
    args = parser.parse_args()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="epoch-pipeline-"))
    cluster_dir = work / "cluster"
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    step(f"1. a cluster of three brokers, data in {cluster_dir}")
    cluster, bootstrap = start_cluster(cluster_dir, args.base_port)
    try:
        step("2. topic views (replicas [0, 1], unclean election allowed) and 1,000 page views")
        topics = AdminClient({"bootstrap.servers": bootstrap})
        created = topics.create_topics([
            NewTopic(VIEWS, num_partitions=1, replica_assignment=[[0, 1]],
                     config={"unclean.leader.election.enable": "true"}),
            NewTopic(COUNTS, num_partitions=1, replication_factor=3)])
        for future in created.values():
            future.result(60)
        wait_until("views with ISR [0, 1]", lambda: isr_of(bootstrap) == (0, 1))
        produce(bootstrap, [(f"user-{i % 37}", PAGES[i % len(PAGES)]) for i in range(1000)])

        step("3. the streaming job: views per page, to topic page-counts and to Parquet")
        from pyspark.sql import SparkSession

        from epoch_broker.spark import register

        spark = (SparkSession.builder.master("local[2]").appName("epoch-broker-pipeline")
                 .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        read, error = run_job(spark, bootstrap, work, fail_on_data_loss=True)
        print(f"read {read} views; counts so far:")
        spark.read.parquet(str(work / "counts.parquet")).groupBy("page").sum("views").orderBy("page").show()

        step("4. the drill: broker 1 stops replicating, 3 views reach broker 0 alone, the job reads them")
        admin(cluster_dir, "fault", "--node", "1", "--set", "fault.replication.paused=true")
        produce(bootstrap, [("user-x", "/lost-1"), ("user-x", "/lost-2"), ("user-x", "/lost-3")], acks="1")
        wait_until("broker 0 alone in the ISR", lambda: isr_of(bootstrap) == (0,))
        admin(cluster_dir, "status")
        read, error = run_job(spark, bootstrap, work, fail_on_data_loss=True)
        print(f"read {read} views (offsets 1000-1002, in broker 0's epoch)")
        admin(cluster_dir, "elect", "--topic", VIEWS, "--partition", "0", "--leader", "1", "--unclean")
        admin(cluster_dir, "fault", "--node", "1", "--clear", "fault.replication.paused")
        produce(bootstrap, [(f"user-{i}", "/after") for i in range(5)], acks="1")
        print("broker 1 leads a new epoch from offset 1000: the 3 views read are gone, 5 new ones sit at 1000-1004")

        step("5. the job again: the stored offset 1003 is inside the log, but its epoch ends at 1000")
        read, error = run_job(spark, bootstrap, work, fail_on_data_loss=True)
        print(f"the query stopped: {error}")
        if error is None or "diverged at offset 1000" not in error:
            return 1
        read, error = run_job(spark, bootstrap, work, fail_on_data_loss=False)
        print(f"with failOnDataLoss=false: read {read} views, resuming at the divergence point (error: {error})")
        spark.stop()
        return 0 if (read, error) == (5, None) else 1
    finally:
        cluster.send_signal(signal.SIGTERM)
        cluster.wait(60)


if __name__ == "__main__":
    sys.exit(main())
