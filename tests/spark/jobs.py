"""A Structured Streaming job in a Spark process of its own, as a pipeline restarted after a stop would run:
`python -m tests.spark.stream_job BOOTSTRAP TOPIC OUTPUT CHECKPOINT` reads TOPIC through `kafka-epoch` with
Trigger.AvailableNow into Parquet at OUTPUT, resuming from CHECKPOINT, and exits 0 once caught up."""

from __future__ import annotations

import os
import sys


def main(bootstrap: str, topic: str, output: str, checkpoint: str) -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from epoch_broker.spark import register
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("epoch-broker-restarted-job")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC").getOrCreate())
    register(spark)
    query = (spark.readStream.format("kafka-epoch").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).load()
             .writeStream.format("parquet").option("path", output).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    print(f"read {sum(p['numInputRows'] for p in query.recentProgress)} rows", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])
