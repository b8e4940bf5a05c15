"""One SparkSession for the Spark tests (starting one costs 6-9 s), local, on loopback, with workers running this
venv's interpreter (where epoch_broker and pyarrow are installed); and a broker process per test module.

Without the [spark] extra (pyspark or pyarrow not importable) every test module here is reported skipped, with
that reason, instead of failing its import at collection."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import BrokerProcess, start_broker


def _missing_extra() -> str:
    """Why these tests cannot run in this venv, or "" when they can."""
    for module in ("pyspark", "pyarrow"):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            return f"needs the [spark] extra (pip install 'epoch-broker[spark]'): {exc}"
    return ""


MISSING_EXTRA = _missing_extra()


class _NeedsExtra(pytest.Item):
    def runtest(self) -> None:
        pytest.skip(MISSING_EXTRA)


class _WithoutExtra(pytest.Module):
    """A test module not imported (its imports need the extra), collected as one skipped item."""

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        # An item, not a module-level skip: with nothing collected `pytest tests/spark` would exit 5, not 0. And
        # not pytest.importorskip atop this file: a skip raised while pytest loads the conftest of a path on its
        # command line stops the run.
        return [_NeedsExtra.from_parent(self, name="needs_spark_extra")]


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    return _WithoutExtra.from_parent(parent, path=module_path) if MISSING_EXTRA else None


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from epoch_broker.spark import register

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
