"""The spark-pipeline drill (issue 31 item 5): its checker invariants on synthetic histories (no cluster, no Spark),
its plan, the transform's inverse, and the drill itself in its short CI form: three brokers, a transactional
producer, a Spark streaming query on local-cluster[2,1,1024] copying the topic through the exactly-once sink, and a
schedule holding a leader kill, an executor kill and a driver kill."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from epoch_broker.drill.checker import CheckResult, check_directory
from epoch_broker.drill.history import HistoryWriter, read_history
from epoch_broker.drill.pipeline import missing_extra, parse_output, transform_value
from epoch_broker.drill.scenarios import scenarios
from epoch_broker.drill.scenarios.spark_pipeline import PIPELINE_FAULTS

INPUT, OUTPUT = "in", "out"
# the input's final log: partition -> values at offsets 0, 1, ... (an aborted transaction's "p0-x" never in it)
FINAL = {0: ["p0-0", "p0-1", "p0-2"], 1: ["p1-0", "p1-1"]}
Row = tuple[int, int, str]  # (input partition, input offset, input value): one output row made from it


def history(tmp_path: Path, rows: list[Row], *, raw: Sequence[str] = ()) -> CheckResult:
    """A drill whose input's final log is FINAL (records of one committed transaction, and one aborted: "p0-x"), and
    whose pipeline wrote `rows` (each keyed by its stream, in one output partition per stream, in list order), and
    rows with the values in `raw` (partition 0)."""
    directory = tmp_path / "history"
    with HistoryWriter(directory, "producer") as producer, HistoryWriter(directory, "reader") as reader, \
            HistoryWriter(directory, "pipeline-reader") as output:
        for txn, (outcome, records) in enumerate([("commit", [(p, v) for p, vs in FINAL.items() for v in vs]),
                                                  ("abort", [(0, "p0-x")])]):
            for partition, value in records:
                producer.record("send", topic=INPUT, partition=partition, value=value, acks="all", txn=txn)
            producer.record("txn", txn=txn, outcome=outcome, error=None)
        for partition, values in FINAL.items():
            for offset, value in enumerate(values):
                reader.record("read", topic=INPUT, partition=partition, offset=offset, value=value, leader_epoch=1,
                              isolation="read_committed")
        at = Counter[int]()
        for partition, offset, value in rows:
            parsed = parse_output(transform_value(partition, offset, value))
            assert parsed is not None
            output.record("output", topic=OUTPUT, partition=partition, offset=at[partition], key=f"p{partition}",
                          value=transform_value(partition, offset, value), source_topic=INPUT,
                          source_partition=parsed[0], source_offset=parsed[1], source_value=parsed[2])
            at[partition] += 1
        for value in raw:
            output.record("output", topic=OUTPUT, partition=0, offset=at[0], key="p0", value=value,
                          source_topic=INPUT, source_partition=None, source_offset=None, source_value=None)
            at[0] += 1
    return check_directory(directory)


EVERY = [(p, o, v) for p, vs in FINAL.items() for o, v in enumerate(vs)]


@pytest.mark.parametrize(("rows", "raw", "exactly_once", "order", "example"), [
    (EVERY, [], 0, 0, ""),
    ([r for r in EVERY if r != (0, 1, "p0-1")], [], 1, 0, "in-0 offset 1 ('p0-1'): no output row"),
    ([*EVERY[:2], (0, 1, "p0-1"), *EVERY[2:]], [], 1, 1, "in-0 offset 1 ('p0-1'): 2 output rows, at out-0 offset 1, "
                                                       "out-0 offset 2"),
    ([*EVERY, (0, 3, "p0-x")], [], 1, 0, "from in-0 offset 3, a record of transaction 1 of producer, aborted"),
    ([*EVERY, (1, 7, "p1-7")], [], 1, 0, "from in-1 offset 7, which the input's final log does not hold"),
    ([*EVERY[:1], (0, 1, "p0-0"), *EVERY[2:]], [], 2, 0, "where the input's final log holds 'p0-1'"),
    (EVERY, ["not a row"], 1, 0, "out-0 offset 3 ('not a row'): names no input record"),
    ([EVERY[1], EVERY[0], *EVERY[2:]], [], 0, 1, "key 'p0' in out-0: offset 1 is from input 0:0, after offset 0 "
                                                 "from 0:1"),
], ids=["clean", "missing", "twice", "aborted", "unknown", "another_value", "unparsed", "out_of_order"])
def test_the_pipeline_invariants_on_synthetic_histories(tmp_path: Path, rows: list[Row], raw: list[str],
                                                        exactly_once: int, order: int, example: str) -> None:
    result = history(tmp_path, rows, raw=raw)
    counts = {name: result.invariant(name).count for name in ("pipeline_exactly_once", "pipeline_order")}
    assert counts == {"pipeline_exactly_once": exactly_once, "pipeline_order": order}
    assert [i.name for i in result.invariants if not i.passed] == [n for n, c in counts.items() if c]
    examples = result.invariant("pipeline_exactly_once").examples + result.invariant("pipeline_order").examples
    assert not example or any(example in line for line in examples), examples
    assert (result.figures["pipeline_input"], result.figures["pipeline_output"]) == (5, len(rows) + len(raw))


def test_a_stream_split_over_two_output_partitions_is_out_of_order(tmp_path: Path) -> None:
    directory = tmp_path / "history"
    with HistoryWriter(directory, "reader") as reader, HistoryWriter(directory, "pipeline-reader") as output:
        for offset, partition in enumerate((0, 1)):
            reader.record("read", topic=INPUT, partition=0, offset=offset, value=f"p0-{offset}", leader_epoch=1)
            output.record("output", topic=OUTPUT, partition=partition, offset=0, key="p0",
                          value=transform_value(0, offset, f"p0-{offset}"), source_topic=INPUT, source_partition=0,
                          source_offset=offset, source_value=f"P0-{offset}")
    result = check_directory(directory)
    assert result.invariant("pipeline_order").examples == ["key 'p0': rows in output partitions 0, 1"]
    assert result.invariant("pipeline_exactly_once").passed


def test_a_history_without_a_pipeline_passes_its_invariants_and_says_so(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path, "reader") as reader:
        reader.record("read", topic=INPUT, partition=0, offset=0, value="p0-0", leader_epoch=1)
    result = check_directory(tmp_path)
    for name in ("pipeline_exactly_once", "pipeline_order"):
        assert result.invariant(name).passed and result.invariant(name).note.endswith("(no pipeline)")
    assert "pipeline_input" not in result.figures


@pytest.mark.parametrize(("value", "parsed"), [
    (transform_value(2, 41, "p2-7"), (2, 41, "P2-7")), ("2:41:", None), ("x:41:P", None), ("2:-1:P", None),
    ("P2-7", None)])
def test_an_output_value_parses_back_to_the_input_record_it_was_made_from(value: str,
                                                                          parsed: tuple[int, int, str] | None) -> None:
    assert parse_output(value) == parsed


@pytest.mark.parametrize("seed", range(12))
def test_the_plan_holds_a_leader_kill_an_executor_kill_and_a_driver_kill(seed: int) -> None:
    plan = scenarios()["spark-pipeline"].schedule(seed, 40.0, ["broker-0", "broker-1", "broker-2"])
    assert set(PIPELINE_FAULTS) <= {fault.fault for fault in plan}, plan
    assert {fault.target for fault in plan if fault.fault != "leader-kill"} <= {"spark-driver", "spark-executor"}


@pytest.mark.slow
@pytest.mark.skipif(bool(missing_extra()), reason=missing_extra())
def test_a_spark_pipeline_drill_copies_every_committed_record_once_in_order_through_every_kill(
        tmp_path: Path) -> None:
    out = tmp_path / "report"
    run = subprocess.run([sys.executable, "-m", "epoch_broker", "drill", "spark-pipeline", "--seed", "1",
                          "--duration", "40", "--out", str(out)], capture_output=True, text=True, timeout=600,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-3000:]
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    figures, invariants = report["check"]["figures"], {i["name"]: i for i in report["check"]["invariants"]}
    for name in ("pipeline_exactly_once", "pipeline_order", "aborted_read", "partial_transaction", "lost"):
        assert invariants[name]["passed"] and invariants[name]["count"] == 0, invariants[name]
    assert "no pipeline" not in invariants["pipeline_exactly_once"]["note"]
    assert figures["transactions_abort"] >= 1 and figures["pipeline_input"] == figures["acked"] > 100
    assert figures["pipeline_output"] == figures["pipeline_input"] and figures["driver_starts"] == 2
    # each fault applied and healed: the executor replaced, the driver started again from its checkpoint
    events = read_history(out / "history")
    faults = [e for e in events if e["op"] == "fault"]
    assert Counter(e["fault"] for e in faults if e["phase"] == "start") >= Counter(PIPELINE_FAULTS)
    assert not [e for e in faults if "not" in (e["detail"] or "")[:4]], faults
    assert any("executors running again" in (e["detail"] or "") for e in faults)
    assert any("from its checkpoint" in (e["detail"] or "") for e in faults)
    # the driver's query ran again with the same id (the sink's transactional ids and commit log carry over)
    log = (out / "pipeline" / "driver.log").read_text()
    assert len({line.split()[-1] for line in log.splitlines() if line.startswith("pipeline: query running")}) == 1
    assert not [e for e in events if e["op"] == "driver" and e["phase"] == "stop" and e["status"] != 0]
    page = (out / "report.html").read_text()
    assert "id='pipeline'" in page and f"{figures['pipeline_output']} output rows" in page


def test_without_the_spark_extra_the_drill_says_so_in_one_line_and_exits_2(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "pyspark"  # a pyspark that cannot be imported, ahead of the installed one
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named pyspark')\n")
    run = subprocess.run([sys.executable, "-m", "epoch_broker", "drill", "spark-pipeline", "--out",
                          str(tmp_path / "report")], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(shadow.parent)})
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.splitlines() == ["epoch-broker drill: the spark-pipeline drill needs the [spark] extra (pip "
                                       "install 'epoch-broker[spark]'): No module named pyspark"]
    assert "starting a controller" not in run.stdout
