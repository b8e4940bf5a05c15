"""The exactly-once sink through the failures it exists for, each in a Spark process of its own
(tests/spark/jobs.py) against a real broker process: a task that raises after writing half its rows, an
executor JVM SIGKILLed mid-task (local-cluster[2,1,1024]), and a driver SIGKILLed while it committed the tasks'
transactions, after the first, the query then restarted from its checkpoint. A read_committed consumer reads
every row exactly once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from epoch_broker.client.blocking import BlockingKafkaClient
from epoch_broker.drill.admin import alter_faults
from epoch_broker.protocol.messages import list_transactions
from tests.helpers import BrokerProcess, not_yet, wait_for_sync
from tests.spark.jobs import PAD, STREAM_PREFIX
from tests.spark.support import create, produce, read_back

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ROWS = 400


def run_job(*args: str) -> subprocess.CompletedProcess[str]:
    job = subprocess.run([sys.executable, "-m", "tests.spark.jobs", *args], capture_output=True, text=True,
                         timeout=240, cwd=REPO)
    assert job.returncode == 0, job.stderr[-4000:]
    return job


def sink_transactions(bootstrap: str) -> dict[str, str]:
    """The streaming job's transactional ids and their states (ListTransactions; the broker also holds the other
    tests' transactions)."""
    with BlockingKafkaClient.connect(bootstrap) as client:
        answer = client.request(list_transactions.API, 0, list_transactions.REQUEST.cls(
            state_filters=[], producer_id_filters=[]))
    return {t.transactional_id: t.transaction_state for t in answer.transaction_states
            if t.transactional_id.startswith(STREAM_PREFIX)}


def assert_each_row_once(bootstrap: str, topic: str, partitions: int, expected: list[bytes]) -> None:
    committed = sorted(value for _, value, _, _ in read_back(bootstrap, topic, partitions))
    assert committed == sorted(expected)


@pytest.mark.parametrize(("master", "failure"), [("local[2,4]", "raise"), ("local-cluster[2,1,1024]", "kill")])
def test_a_task_failing_after_half_its_rows_is_written_once_by_its_next_attempt(broker: BrokerProcess, master: str,
                                                                                failure: str) -> None:
    topic = f"eos-task-{failure}"
    create(broker.bootstrap, topic, 2)
    run_job("exactly_once_fail", broker.bootstrap, topic, master, failure)
    assert_each_row_once(broker.bootstrap, topic, 2, [b"r%03d" % n + PAD for n in range(ROWS)])
    # the failed attempt's rows are in the log too, in the transaction its next attempt aborted
    assert len(read_back(broker.bootstrap, topic, 2, "read_uncommitted")) >= ROWS + ROWS // 8


def test_a_driver_killed_after_committing_some_tasks_restarts_from_its_checkpoint_and_writes_the_rest_once(
        broker: BrokerProcess, tmp_path: Path) -> None:
    """The driver commits the tasks' transactions one by one, each EndTxn held 30 s by the broker's fault hook:
    it is killed once the first task's rows are committed, before the second's are."""
    source, output = "eos-driver-in", "eos-driver-out"
    create(broker.bootstrap, source, 2)
    create(broker.bootstrap, output, 2)
    expected = [b"d%03d" % n + PAD for n in range(ROWS)]
    produce(broker.bootstrap, source, expected, 2)
    args = ["exactly_once_stream", broker.bootstrap, source, output, str(tmp_path / "checkpoint")]
    asyncio.run(alter_faults(broker.bootstrap, 0, {"fault.request.end_txn": "delay.ms=30000"}))
    driver = subprocess.Popen([sys.executable, "-m", "tests.spark.jobs", *args], cwd=REPO, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # asked of the transaction coordinator: a read_committed consumer of the output sees nothing past the open
        # transaction's first record (the last stable offset), the committed task's rows included
        def one_task_committed() -> object:
            if driver.poll() is not None:
                raise AssertionError(f"the driver ended first ({driver.returncode})")
            states = sink_transactions(broker.bootstrap)
            committed = [state for state in states.values() if state in ("PrepareCommit", "CompleteCommit")]
            assert len(committed) < 2, f"both committed before the driver was killed: {states}"
            return (len(committed) == 1 and "Ongoing" in states.values()) or not_yet(states)

        wait_for_sync(one_task_committed, 240, interval=0.5, what="the first task's transaction committed")
    finally:
        os.killpg(driver.pid, signal.SIGKILL)  # the driver, its JVM and its Python workers
        driver.wait(60)
        asyncio.run(alter_faults(broker.bootstrap, 0, {}, clear=["fault.request.end_txn"]))
    assert "batches [0]" in run_job(*args).stdout  # the restart runs batch 0 again, and only it
    assert_each_row_once(broker.bootstrap, output, 2, expected)
