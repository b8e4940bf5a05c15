"""Controller benchmark: the file store (one controller, its metadata log in its data dir) and the ZooKeeper store
(three controllers, one active, sharing the log in an embedded ZooKeeper from Debian's package), side by side in
the same run, each with 3 brokers on loopback (epoch_broker.testing.cluster, drill/launcher.py's timings).

- cluster start: launch of the first process (ZooKeeper, or the controller) to the ready line of the last
  broker; one sample per fresh cluster.
- topic creation: N topics (1 partition, RF 3) created through broker 0, sequentially, one topic per
  CreateTopics request on one connection, each request sent once the previous one is answered: topics/s of
  the answers (each answer waits for the controller's commit: a file append, or a ZooKeeper multi-op). Then the
  time until a broker's Metadata shows every one of them with a leader (the brokers have applied the metadata),
  counted from the first request: topics/s to led.
- leader elections: a topic of P partitions (RF 3), leadership moved back and forth between each partition's
  first two replicas (ElectLeaders with target_leader, clean: the ISR is kept), partitions in turn, sequentially,
  with `admin.elect` to the active controller; elections/s. Each call opens its own connection, as the admin
  CLI does, so the figure includes a loopback connect per election; each answer waits for the commit.
- controller failover (ZooKeeper store only: the file store has one controller and no standby, so a dead
  controller stays dead until restarted): on one cluster with a topic of P partitions (RF 3, full ISRs),
  SIGKILL of the active controller (found with `admin.active_controller`, killed by its pid in cluster.json) to
  the first forced election (`admin.elect`, target -1: the next replica in the ISR) that a new active
  controller answers `elected`; elections are retried every RETRY_S on any error (no controller active yet,
  NOT_CONTROLLER, a connection refused, or the new controller not yet seeing live brokers). Also: kill to the
  first controller answering DescribeCluster as active. The killed controller is restarted (it rejoins as a
  standby) and every ISR is full again before the next run, so each run kills whichever controller is active.
  The ZooKeeper session of a SIGKILLed controller only expires after zookeeper.session.timeout.ms (the
  launcher's 4000 ms, `--session-timeout-ms`): a standby can claim /controller only then, so the goal is under
  the session timeout + 1 s.

Clusters for the rates alternate file, zookeeper, file, ... so drift on the machine hits both alike. Ratios are
zookeeper / file of the medians: above 1 means the ZooKeeper store takes longer (start) or does more per second;
in brackets, the range of the per-run ratios (each ZooKeeper cluster against the file cluster run just before it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.common import fmt_spread, print_table, spread, write_results
from epoch_broker import testing
from epoch_broker.client.blocking import BlockingKafkaClient
from epoch_broker.drill import admin, launcher
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import create_topics, metadata

STORES = ("file", "zookeeper")
BROKERS = 3
REPLICATION = 3
RETRY_S = 0.03  # between failover election attempts
FAILOVER_LIMIT_S = 60.0
LED_TIMEOUT_S = 120.0
REQUEST_TIMEOUT_S = 30.0


@dataclass
class RateRun:
    store: str
    start_s: float
    topics: int
    create_s: float  # the N CreateTopics answers
    led_s: float  # first request to every topic led in Metadata
    elections: int
    elect_s: float
    not_needed: int  # answers "not needed" (should be 0: the target never leads already)


@dataclass
class FailoverRun:
    killed: int
    new_active: int
    active_s: float  # kill to a controller answering DescribeCluster as the active one
    elected_s: float  # kill to the first `elected`
    attempts: int
    errors: dict[str, int] = field(default_factory=dict)  # first word of each error, counted


def start_cluster(store: str, workdir: Path, session_timeout_ms: int) -> tuple[testing.Cluster, float]:
    zookeeper = store == "zookeeper"
    config = {"zookeeper.session.timeout.ms": session_timeout_ms} if zookeeper else {}
    cluster = testing.cluster(BROKERS, data_dir=workdir, config=config, controllers=3 if zookeeper else 1,
                              zookeeper="embedded" if zookeeper else "")
    started = time.perf_counter()
    cluster.__enter__()
    return cluster, time.perf_counter() - started


@contextlib.contextmanager
def running(store: str, workdir: Path, session_timeout_ms: int) -> Iterator[tuple[testing.Cluster, float]]:
    cluster, start_s = start_cluster(store, workdir, session_timeout_ms)
    try:
        yield cluster, start_s
    finally:
        cluster.stop()


def cluster_file(cluster: testing.Cluster) -> launcher.ClusterFile:
    return launcher.ClusterFile.read(cluster.data_dir)  # re-read: a restart records a new pid


def create_rate(cluster: testing.Cluster, count: int, prefix: str) -> tuple[float, float]:
    """(seconds for `count` sequential CreateTopics answers, seconds from the first request until every topic
    is led in a broker's Metadata)."""
    names = [f"{prefix}-{i:04d}" for i in range(count)]
    address = cluster_file(cluster).brokers[0].address
    with BlockingKafkaClient.connect(address, "bench-controller", REQUEST_TIMEOUT_S) as client:
        client.negotiate()
        create_v = client.version_for(create_topics.API)
        metadata_v = client.version_for(metadata.API)
        started = time.perf_counter()
        for name in names:
            topic = create_topics.REQUEST.CreatableTopic(name=name, num_partitions=1,
                                                         replication_factor=REPLICATION, configs=[])
            answer = client.request(create_topics.API, create_v,
                                    create_topics.REQUEST.cls(topics=[topic], timeout_ms=int(REQUEST_TIMEOUT_S * 1000)))
            found = answer.topics[0]
            if found.error_code != ErrorCode.NONE:
                raise RuntimeError(f"create topic {name}: {ErrorCode(found.error_code).name}: {found.error_message}")
        created = time.perf_counter() - started
        wanted = set(names)
        request = metadata.REQUEST.cls(topics=[metadata.REQUEST.MetadataRequestTopic(name=n) for n in names],
                                       allow_auto_topic_creation=False)
        while True:
            answer = client.request(metadata.API, metadata_v, request)
            led = {t.name for t in answer.topics if t.name in wanted and t.partitions
                   and all(p.leader_id >= 0 for p in t.partitions)}
            if led == wanted:
                return created, time.perf_counter() - started
            if time.perf_counter() - started > LED_TIMEOUT_S:
                raise TimeoutError(f"{len(wanted - led)} of {count} topics not led within {LED_TIMEOUT_S:.0f} s")
            time.sleep(0.01)


def election_rate(cluster: testing.Cluster, partitions: int, count: int) -> tuple[float, int]:
    """(seconds for `count` sequential elections, answers "not needed") on a new topic of `partitions`."""
    topic = cluster.create_topic(f"elect-{time.monotonic_ns() % 10**8}", partitions, REPLICATION)
    status = cluster.status()
    pairs = {p: status[(topic, p)].replicas[:2] for p in range(partitions)}
    leaders = {p: status[(topic, p)].leader for p in range(partitions)}

    async def run() -> tuple[float, int]:
        controller = await admin.active_controller(cluster_file(cluster))
        not_needed = 0
        started = time.perf_counter()
        for i in range(count):
            p = i % partitions
            first, second = pairs[p]
            target = second if leaders[p] == first else first
            if await admin.elect(controller, topic, p, target) == "not needed":
                not_needed += 1
            leaders[p] = target
        return time.perf_counter() - started, not_needed

    return asyncio.run(run())


def error_kind(message: str) -> str:
    """A short name for a failed attempt: Kafka's error name when the answer had one."""
    if message.startswith("no controller is active"):
        return "no controller active"
    named = re.search(r"\b[A-Z][A-Z_]{4,}\b", message)
    return named.group(0) if named else "connection"


def failover_once(cluster: testing.Cluster, topic: str, partition: int) -> FailoverRun:
    """SIGKILL the active controller; time to its successor's first completed election."""
    async def run() -> FailoverRun:
        before = cluster_file(cluster)
        active = await admin.active_controller(before)
        victim = next(spec for spec in before.controllers if spec.address == active)
        killed = time.perf_counter()
        cluster.kill(victim.node_id, signal.SIGKILL)  # returns once it has exited (reaped)
        active_s = float("nan")
        new_active = -1
        errors: dict[str, int] = {}
        attempts = 0
        while True:
            attempts += 1
            try:
                current = cluster_file(cluster)
                address = await admin.active_controller(current)
                if new_active == -1:
                    active_s = time.perf_counter() - killed
                    new_active = next(s.node_id for s in current.controllers if s.address == address)
                outcome = await admin.elect(address, topic, partition, -1)
                if outcome == "elected":
                    return FailoverRun(victim.node_id, new_active, active_s, time.perf_counter() - killed,
                                       attempts, errors)
                kind = "not-needed"
            except (admin.AdminError, OSError) as exc:
                kind = error_kind(str(exc))
            errors[kind] = errors.get(kind, 0) + 1
            if time.perf_counter() - killed > FAILOVER_LIMIT_S:
                raise TimeoutError(f"no election within {FAILOVER_LIMIT_S:.0f} s of the kill: {errors}")
            await asyncio.sleep(RETRY_S)

    result = asyncio.run(run())
    cluster.restart(result.killed)  # back as a standby
    return result


def failover_runs(workdir: Path, runs: int, partitions: int, session_timeout_ms: int) -> tuple[list[FailoverRun],
                                                                                               float]:
    with running("zookeeper", workdir, session_timeout_ms) as (cluster, start_s):
        topic = cluster.create_topic("failover", partitions, REPLICATION)
        results = []
        for i in range(runs):
            for p in range(partitions):  # every ISR full, every replica eligible
                cluster.wait_for_isr(topic, p, REPLICATION)
            run = failover_once(cluster, topic, i % partitions)
            errors = ", ".join(f"{k} x{v}" for k, v in sorted(run.errors.items())) or "none"
            print(f"failover run {i + 1}/{runs}: killed controller {run.killed}, {run.new_active} active after "
                  f"{run.active_s * 1000:.0f} ms, elected after {run.elected_s * 1000:.0f} ms "
                  f"({run.attempts} attempts; errors: {errors})", flush=True)
            results.append(run)
    return results, start_s


def ratio(zookeeper: list[float], file: list[float], digits: int = 2) -> str:
    """zookeeper / file of the medians, with the range of the per-run ratios when runs pair up."""
    if not zookeeper or not file:
        return "-"
    median = spread(zookeeper)[0] / spread(file)[0]
    if len(zookeeper) == len(file) > 1:
        pairs = [z / f for z, f in zip(zookeeper, file, strict=True)]
        return f"{median:.{digits}f}x ({min(pairs):.{digits}f}-{max(pairs):.{digits}f})"
    return f"{median:.{digits}f}x"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_controller", description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="controller failovers (kills) on the ZooKeeper cluster "
                                                        "(default 5)")
    ap.add_argument("--rate-runs", type=int, default=3,
                    help="fresh clusters per store for start, topic creation and elections (default 3)")
    ap.add_argument("--topics", type=int, default=200, help="topics created per rate run (default 200)")
    ap.add_argument("--partitions", type=int, default=30,
                    help="partitions of the elections topic (default 30)")
    ap.add_argument("--elections", type=int, default=300, help="elections per rate run (default 300)")
    ap.add_argument("--failover-partitions", type=int, default=6,
                    help="partitions of the failover topic (default 6)")
    ap.add_argument("--session-timeout-ms", type=int, default=int(launcher.ZOOKEEPER_SESSION_TIMEOUT_MS),
                    help=f"zookeeper.session.timeout.ms (default the launcher's "
                         f"{launcher.ZOOKEEPER_SESSION_TIMEOUT_MS})")
    args = ap.parse_args(argv)
    if min(args.runs, args.rate_runs, args.topics, args.partitions, args.elections, args.failover_partitions) < 1:
        ap.error("counts must be at least 1")

    rates: list[RateRun] = []
    with tempfile.TemporaryDirectory(prefix="epoch-bench-controller-") as tmp:
        for i in range(args.rate_runs):
            for store in STORES:
                t0 = time.perf_counter()
                with running(store, Path(tmp) / f"{store}-{i}", args.session_timeout_ms) as (cluster, start_s):
                    create_s, led_s = create_rate(cluster, args.topics, f"created-{i}")
                    elect_s, not_needed = election_rate(cluster, args.partitions, args.elections)
                run = RateRun(store, start_s, args.topics, create_s, led_s, args.elections, elect_s, not_needed)
                print(f"run {i + 1}/{args.rate_runs} {store}: {time.perf_counter() - t0:.1f} s; started in "
                      f"{start_s:.2f} s, {args.topics / create_s:.0f} topics/s answered "
                      f"({args.topics / led_s:.0f}/s to led), {args.elections / elect_s:.0f} elections/s"
                      + (f" ({not_needed} not needed)" if not_needed else ""), flush=True)
                rates.append(run)
        t0 = time.perf_counter()
        failovers, failover_start_s = failover_runs(Path(tmp) / "failover", args.runs, args.failover_partitions,
                                                    args.session_timeout_ms)
        print(f"failover: {time.perf_counter() - t0:.1f} s", flush=True)

    def of(store: str, fn: Callable[[RateRun], float]) -> list[float]:
        return [fn(r) for r in rates if r.store == store]

    rows = []
    figures: list[tuple[str, Callable[[RateRun], float], int]] = [

            ("cluster start, launch to every broker ready (s)", lambda r: r.start_s, 2),
            (f"topics created/s: {args.topics} sequential CreateTopics (1 partition, RF 3) answered",
             lambda r: r.topics / r.create_s, 0),
            (f"topics/s until all {args.topics} led in Metadata", lambda r: r.topics / r.led_s, 0),
            (f"leader elections/s: {args.elections} sequential admin.elect over {args.partitions} partitions",
             lambda r: r.elections / r.elect_s, 0)]
    for label, fn, digits in figures:
        file, zookeeper = of("file", fn), of("zookeeper", fn)
        rows.append([label, fmt_spread(file, digits), fmt_spread(zookeeper, digits), ratio(zookeeper, file)])
    not_needed = sum(r.not_needed for r in rates)
    print_table(f"controller stores, 3 brokers on loopback; median (min-max) of {args.rate_runs} fresh clusters "
                "per store", ["metric", "file (1 controller)", "zookeeper (3 controllers)", "zookeeper/file"], rows)
    if not_needed:
        print(f"note: {not_needed} elections were answered 'not needed'")

    goal_s = args.session_timeout_ms / 1000 + 1

    def ms(values: list[float]) -> str:
        return fmt_spread([v * 1000 for v in values], 0)

    elected = [r.elected_s for r in failovers]
    failover_rows = [
        ["zookeeper.session.timeout.ms", str(args.session_timeout_ms), "n/a"],
        ["SIGKILL of the active controller to a new one active (DescribeCluster, ms)",
         ms([r.active_s for r in failovers]), "no standby"],
        [f"SIGKILL of the active controller to its successor's first election on a {args.failover_partitions}-"
         "partition RF 3 topic (ms)", ms(elected), "no standby"],
        ["  of which beyond the session timeout (ms)", ms([e - args.session_timeout_ms / 1000 for e in elected]),
         "n/a"],
        [f"goal: under session timeout + 1 s = {goal_s * 1000:.0f} ms",
         f"{sum(e < goal_s for e in elected)}/{len(elected)} runs met it", "n/a"],
        ["cluster start for the failover runs (s)", f"{failover_start_s:.2f}", "-"],
    ]
    print_table(f"controller failover, median (min-max) of {args.runs} kills on one cluster (3 controllers + "
                "embedded ZooKeeper, 3 brokers); the killed controller is restarted as a standby between kills",
                ["metric", "zookeeper", "file"], failover_rows)
    path = write_results("bench_controller", {
        "settings": vars(args), "rate_runs": [asdict(r) for r in rates],
        "failover_runs": [asdict(r) for r in failovers], "failover_start_s": failover_start_s,
        "table": rows, "failover_table": failover_rows})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
