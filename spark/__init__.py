"""The `kafka-epoch` data source for PySpark: read topics of epoch-broker (or Kafka) from Spark pipelines, with
each record's leader epoch. `pip install "epoch-broker[spark]"` brings pyspark and pyarrow; the broker never needs
them. It may import only `client/` and `protocol/` (tests/test_layering.py).

    from epoch_broker.spark import register
    register(spark)
    df = spark.read.format("kafka-epoch").option("kafka.bootstrap.servers", "127.0.0.1:9092") \\
        .option("subscribe", "events").load()
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Register the `kafka-epoch` format with a SparkSession."""
    from epoch_broker.spark.source import KafkaEpochDataSource  # pyspark is imported only when asked for

    spark.dataSource.register(KafkaEpochDataSource)
