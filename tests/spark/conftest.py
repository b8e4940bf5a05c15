"""One SparkSession for the Spark tests (starting one costs 6-9 s), local, on loopback, with workers running this
venv's interpreter (where epoch_broker and pyarrow are installed); and a broker process per test module."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers import BrokerProcess, start_broker


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from epoch_broker.spark import register
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("epoch-broker-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    register(session)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory.mktemp("spark"), {"offsets.topic.num.partitions": "1"})
    yield process
    process.stop()
