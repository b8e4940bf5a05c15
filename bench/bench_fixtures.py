"""Start-up of the test fixtures (issue 16): what a test author waits for before the first test line runs.

- in process: `epoch_broker.testing.broker()` entered to its first Metadata answer, and its teardown;
- subprocess: `broker(in_process=False)` (`epoch-broker serve`) likewise;
- the peer: the Tansu binary launched to its first Metadata answer (in-memory storage), in the same run;
- cluster: `epoch_broker.testing.cluster(3)` entered, then a topic of 3 partitions created with every ISR full,
  and its teardown.
Each figure is the median of `--runs` fresh starts (default 20; 5 for the cluster), with min and max.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.common import fmt_spread, print_table, start_tansu, wait_metadata, write_results
from epoch_broker.testing import broker, cluster


class _Alive:
    """wait_metadata's process check, for a broker that is not a child process (in process)."""

    returncode = None

    def poll(self) -> None:
        return None


def broker_once(in_process: bool) -> tuple[float, float]:
    """(start to first Metadata answer, teardown) in seconds."""
    started = time.perf_counter()
    handle = broker(in_process=in_process)
    handle.__enter__()
    try:
        wait_metadata(handle.bootstrap_servers, _Alive())  # type: ignore[arg-type]
        ready = time.perf_counter() - started
    finally:
        stopping = time.perf_counter()
        handle.stop()
    return ready, time.perf_counter() - stopping


def cluster_once() -> tuple[float, float]:
    started = time.perf_counter()
    handle = cluster(3)
    handle.__enter__()
    try:
        handle.create_topic("ready", partitions=3, replication_factor=3)
        ready = time.perf_counter() - started
    finally:
        stopping = time.perf_counter()
        handle.stop()
    return ready, time.perf_counter() - stopping


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_fixtures", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="fresh brokers per kind (default 20)")
    parser.add_argument("--cluster-runs", type=int, default=5, help="fresh clusters (default 5)")
    args = parser.parse_args(argv)
    figures: dict[str, dict[str, list[float]]] = {}
    for kind, in_process in (("in process", True), ("subprocess", False)):
        runs = [broker_once(in_process) for _ in range(args.runs)]
        figures[kind] = {"ready_s": [r for r, _ in runs], "teardown_s": [t for _, t in runs]}
        print(f"{kind}: ready {fmt_spread(figures[kind]['ready_s'], 3)} s, teardown "
              f"{fmt_spread(figures[kind]['teardown_s'], 3)} s", flush=True)
    with tempfile.TemporaryDirectory(prefix="epoch-bench-fixtures-") as tmp:
        tansu = []
        for i in range(args.runs):
            workdir = Path(tmp) / f"tansu-{i}"
            workdir.mkdir()
            with start_tansu(workdir) as started:
                tansu.append(started.ready_s)
        figures["tansu (peer, subprocess)"] = {"ready_s": tansu, "teardown_s": []}
        print(f"tansu: ready {fmt_spread(tansu, 3)} s", flush=True)
    runs = [cluster_once() for _ in range(args.cluster_runs)]
    figures["cluster of 3 (topic led, ISRs full)"] = {"ready_s": [r for r, _ in runs],
                                                      "teardown_s": [t for _, t in runs]}
    print_table("fixture start-up (median (min-max), seconds)", ["fixture", "ready", "teardown"], [
        [kind, fmt_spread(f["ready_s"], 3), fmt_spread(f["teardown_s"], 3) if f["teardown_s"] else "-"]
        for kind, f in figures.items()])
    print(f"\nresults: {write_results('bench_fixtures', {'runs': args.runs, 'figures': figures})}")
