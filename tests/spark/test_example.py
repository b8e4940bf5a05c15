"""docs/pyspark.md's example pipeline (examples/spark_pipeline.py) runs as written: a cluster, a streaming job writing
counts to a topic and to Parquet, then the drill whose unclean election stops the job with the truncation
message, and the resumed run that reads the new records from the divergence point."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO, free_base_port

pytestmark = pytest.mark.slow


def test_the_example_pipeline_runs_and_its_drill_stops_then_resumes_the_query(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, str(REPO / "examples" / "spark_pipeline.py"), "--work-dir",
                          str(tmp_path), "--base-port", str(free_base_port(3))],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "read 1000 views" in run.stdout
    assert "read 3 views (offsets 1000-1002" in run.stdout
    assert ("the query stopped: epoch_broker.spark.stream.DataLossError: kafka-epoch: data loss: views-0: the stored "
            "offset 1003 (leader epoch 0) is past the end of that epoch in the leader's log: the log diverged at "
            "offset 1000") in run.stdout
    assert "with failOnDataLoss=false: read 5 views, resuming at the divergence point" in run.stdout
    assert len(list((tmp_path / "counts.parquet").glob("*.parquet"))) > 0
