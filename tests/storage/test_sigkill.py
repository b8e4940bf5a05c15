"""A real crash: a child process appending in a loop is killed with SIGKILL at random moments.

After each kill the log is reopened (unclean: no clean-shutdown marker) and must be a prefix of the
child's deterministic batch sequence, with valid CRCs, contiguous offsets and an epoch cache that
agrees with the batches, and must keep every batch an earlier check saw. The child then resumes
from the recovered end.
"""

from __future__ import annotations

import os
import pathlib
import random
import signal
import subprocess
import sys
import time

import pytest

from epoch_broker.protocol.records import iter_records, parse_header
from epoch_broker.storage.log_manager import LogManager
from tests.storage.crash_child import CONFIG, batches_below, epoch_for, records_for
from tests.storage.storage_invariants import batches_of, expected_epochs

CHILD = pathlib.Path(__file__).with_name("crash_child.py")
ROOT = pathlib.Path(__file__).parents[2]


def check(log_dir: str, rng: random.Random, decoded: int) -> int:
    """Check the reopened log; records are decoded only from batch ``decoded`` on (earlier ones
    were decoded after an earlier kill, and their bytes are still CRC-checked)."""
    manager = LogManager.open([log_dir], CONFIG)
    log = manager.get_log("crash", 0)
    if log is None:  # killed before the partition directory existed
        return 0
    batches = batches_of(log)
    offset = 0
    for i, raw in enumerate(batches):
        header = parse_header(raw)
        assert header.base_offset == offset, "offsets must be contiguous from 0"
        assert header.partition_leader_epoch == epoch_for(i)
        if i >= decoded:
            got = [(r.key, r.value, r.timestamp) for r in iter_records(raw, 0, header)]
            assert got == [(k, v, ts) for k, v, _, ts in records_for(i)]
        offset = header.next_offset
    assert log.log_end_offset == offset
    assert batches_below(offset) == len(batches)
    assert log.epoch_cache.entries == expected_epochs(batches)
    # Half the time the checker shuts down cleanly, so the child also exercises the clean path.
    if rng.random() < 0.5:
        manager.shutdown()
    else:
        for opened in manager.logs.values():
            opened.close_without_flush()
    return len(batches)


def run(tmp_path: pathlib.Path, iterations: int) -> None:
    seed = int(os.environ.get("CRASH_SEED", time.time_ns()))
    rng = random.Random(seed)
    print(f"CRASH_SEED={seed}")  # shown on failure: rerun with it to replay the same kill schedule
    log_dir = str(tmp_path / "logs")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    progress = []
    for iteration in range(iterations):
        child = subprocess.Popen(
            [sys.executable, str(CHILD), log_dir, str(rng.randrange(1 << 30))],
            stdout=subprocess.PIPE,
            env=env,
        )
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == b"ready\n", f"child failed to start (iteration {iteration})"
            time.sleep(rng.uniform(0.0, 0.12))  # the random moment of the kill is the scenario
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
        assert child.returncode == -signal.SIGKILL
        before = progress[-1] if progress else 0
        progress.append(check(log_dir, rng, before))
        # SIGKILL is not a power loss: the page cache keeps every completed write, so a batch
        # seen after one kill is never lost after a later one.
        assert progress[-1] >= before
    assert progress[-1] > 0, "the child never got anything written"


def test_the_log_survives_sigkill_at_random_moments(tmp_path: pathlib.Path) -> None:
    run(tmp_path, 50)


@pytest.mark.nightly
@pytest.mark.timeout(1200)
def test_the_log_survives_many_more_sigkills(tmp_path: pathlib.Path) -> None:
    run(tmp_path, 400)
