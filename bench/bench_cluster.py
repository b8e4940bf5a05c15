"""Cluster benchmark: a controller and 3 brokers on loopback (drill/launcher.py, as `epoch-broker cluster`
starts them), measured with confluent-kafka. Ours only (Tansu runs a single node here).

- start: launch of the controller to the ready line of the last broker (one sample per run);
- failover: SIGKILL of the leader of an RF 3, min.insync.replicas 2 partition to the delivery of the first
  acks=all record produced after the kill (one sample per run, each on a fresh cluster), with the launcher's
  timings (heartbeats 200 ms, session 1500 ms). Broken down from the process logs: the controller fences the
  dead broker as soon as its listener refuses a connection (probed when its heartbeat connection closes; two
  heartbeat intervals later at most), and the new leader takes over (its "leading in epoch" line); the client
  learns the new leader when librdkafka asks again: its fast leader query 15-50 ms after its own connection
  broke. A query that still saw the old leader (the fencing came later) waits for librdkafka's 1 s topic scan
  (a partition whose leader is down is re-queried once a second, not configurable): such a run measures about
  1 s. The producer retries and reconnects every 20-100 ms (FAILOVER_CLIENT) so that its backoff adds nothing;
- acks=all throughput and latency at a fixed offered rate (10 MB/s of 1 KB records by default, over 3
  partitions led by the 3 brokers) for about 10 s per run, after one delivery to each partition (connections
  and metadata in place: steady state); each record's latency is produce() to its delivery callback, so it
  includes the producer's linger.ms: 1 ms by default here (`--linger-ms`), as a latency-minded producer sets
  it; librdkafka's own default of 5 ms adds up to 5 ms to every record (0 sends a request per record, and
  the brokers spend their CPU on request overhead instead).
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import re
import signal
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.common import fmt_spread, print_table, write_results
from epoch_broker.drill import launcher

BROKERS = 3
REPLICATION = 3
MIN_INSYNC = "2"
READY_TIMEOUT_S = 60.0
# The failover producer retries fast, so that failover measures the cluster rather than librdkafka's backoff.
# log_level 2: the connection errors a killed or stopped broker causes are expected, not news.
FAILOVER_CLIENT = {"log_level": 2, "retry.backoff.ms": 20, "retry.backoff.max.ms": 100, "reconnect.backoff.ms": 20,
                   "reconnect.backoff.max.ms": 100, "message.timeout.ms": 60000}


@dataclass
class FailoverRun:
    start_s: float
    failover_s: float
    old_leader: int
    new_leader: int
    fenced_s: float  # kill to the controller's "fencing broker" line (log clock, ms resolution)
    leading_s: float  # kill to the new leader's "leading in epoch" line


def _log_time_after(path: str, pattern: str, after: float) -> float:
    """Seconds from `after` (time.time()) to the first line of the log at `path` matching `pattern` that is
    stamped after it (logging's "%Y-%m-%d %H:%M:%S,mmm" local time); NaN if none."""
    for line in Path(path).read_text(errors="replace").splitlines():
        if re.search(pattern, line):
            with contextlib.suppress(ValueError):
                stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                if stamp >= after - 0.001:
                    return stamp - after
    return float("nan")


@dataclass
class ThroughputRun:
    offered_mb_s: float
    delivered_mb_s: float
    records: int
    errors: int
    p50_ms: float
    p99_ms: float
    max_ms: float


@contextlib.contextmanager
def running_cluster(workdir: Path) -> Iterator[tuple[launcher.ClusterFile, float]]:
    """A fresh cluster in workdir and its start-to-ready seconds; stopped (by pid) on exit."""
    base = launcher.free_base_port(BROKERS, range(20000, 30000))  # the controller's two ports and the brokers'
    cluster = launcher.plan_cluster(workdir, BROKERS, base + launcher.CONTROLLER_PORT_OFFSET,
                                    [base + i for i in range(BROKERS)])
    started = time.perf_counter()
    launcher.start_cluster(cluster, workdir, timeout_s=READY_TIMEOUT_S)
    try:
        yield cluster, time.perf_counter() - started
    finally:
        launcher.stop_cluster(cluster)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, partitions, REPLICATION, config={"min.insync.replicas": MIN_INSYNC})
    for future in admin.create_topics([new]).values():
        future.result(30)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:  # every partition led, with its full ISR
        described = admin.list_topics(topic, timeout=10).topics[topic].partitions.values()
        if len(described) == partitions and all(p.leader >= 0 and len(p.isrs) == REPLICATION for p in described):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: no full ISR within {READY_TIMEOUT_S} s")
        time.sleep(0.05)


def leader_of(producer: Producer, topic: str) -> int:
    return producer.list_topics(topic, timeout=10).topics[topic].partitions[0].leader


def deliver_one(producer: Producer, topic: str) -> float:
    """Produce one record, wait for its delivery; returns the perf_counter time of the successful delivery."""
    outcome: list[tuple[KafkaError | None, float]] = []
    producer.produce(topic, b"x" * 100, partition=0,
                     on_delivery=lambda err, _msg: outcome.append((err, time.perf_counter())))
    producer.flush(90)
    if not outcome or outcome[0][0] is not None:
        raise RuntimeError(f"acks=all record to {topic} was not delivered: {outcome}")
    return outcome[0][1]


def failover_once(workdir: Path) -> FailoverRun:
    with running_cluster(workdir) as (cluster, start_s):
        topic = f"failover-{uuid.uuid4().hex[:8]}"
        create_topic(cluster.bootstrap, topic, 1)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0, **FAILOVER_CLIENT})
        deliver_one(producer, topic)  # connected, metadata known
        old_leader = leader_of(producer, topic)
        victim = cluster.process(old_leader)
        killed, killed_wall = time.perf_counter(), time.time()
        launcher.signal_process(victim, signal.SIGKILL)
        delivered = deliver_one(producer, topic)
        new_leader = leader_of(producer, topic)
        producer.flush(10)
        fenced = _log_time_after(cluster.controller.log, f"fencing broker {old_leader} ", killed_wall)
        leading = _log_time_after(cluster.process(new_leader).log, f"{topic}-0: leading in epoch", killed_wall)
    if new_leader == old_leader:
        raise RuntimeError(f"leader {old_leader} was killed but is still named leader")
    return FailoverRun(start_s, delivered - killed, old_leader, new_leader, fenced, leading)


def throughput_once(workdir: Path, rate_mb_s: float, seconds: float, size: int, linger_ms: float
                    ) -> ThroughputRun:
    with running_cluster(workdir) as (cluster, _):
        topic = f"throughput-{uuid.uuid4().hex[:8]}"
        create_topic(cluster.bootstrap, topic, BROKERS)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": linger_ms,
                             "queue.buffering.max.kbytes": 1024 * 1024, "log_level": 2})
        latencies: list[float] = []  # of the delivered records; the others count as failed
        value = b"v" * size
        for partition in range(BROKERS):  # warm-up: connections to every leader, metadata known
            producer.produce(topic, value, partition=partition)
        producer.flush(30)

        def delivered(sent: float, err: KafkaError | None, _msg: Message) -> None:
            if err is None:
                latencies.append(time.perf_counter() - sent)

        per_second = rate_mb_s * 1_000_000 / size
        sent = 0
        start = time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            while sent < per_second * elapsed:  # keep to the offered rate, whatever the answers do
                producer.produce(topic, value, on_delivery=functools.partial(delivered, time.perf_counter()))
                sent += 1
            producer.poll(0.002)
        producer.flush(60)
        total_s = time.perf_counter() - start
    ordered = sorted(latencies)
    return ThroughputRun(
        offered_mb_s=rate_mb_s, delivered_mb_s=len(latencies) * size / 1_000_000 / total_s, records=sent,
        errors=sent - len(latencies), p50_ms=statistics.median(ordered) * 1000,
        p99_ms=ordered[int(len(ordered) * 0.99)] * 1000, max_ms=ordered[-1] * 1000)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_cluster", description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="fresh clusters for start and failover (default 5)")
    ap.add_argument("--rate-mb", type=float, default=10.0, help="offered acks=all load, MB/s (default 10)")
    ap.add_argument("--seconds", type=float, default=10.0, help="length of the throughput run (default 10)")
    ap.add_argument("--size", type=int, default=1000, help="record value bytes (default 1000)")
    ap.add_argument("--throughput-runs", type=int, default=3, help="fresh clusters for throughput (default 3)")
    ap.add_argument("--linger-ms", type=float, default=1.0, help="the throughput producer's linger.ms (default 1)")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.throughput_runs < 1:
        ap.error("--runs and --throughput-runs must be at least 1")
    print(f"failover producer settings (retry and reconnect fast, so that client backoff adds nothing to the "
          f"cluster's failover): {FAILOVER_CLIENT}", flush=True)

    failovers: list[FailoverRun] = []
    loads: list[ThroughputRun] = []
    with tempfile.TemporaryDirectory(prefix="epoch-bench-cluster-") as tmp:
        for i in range(args.runs):
            run = failover_once(Path(tmp) / f"failover-{i}")
            print(f"run {i + 1}/{args.runs}: ready in {run.start_s:.2f} s, failover {run.failover_s * 1000:.0f} ms "
                  f"(leader {run.old_leader} -> {run.new_leader}; fenced after {run.fenced_s * 1000:.0f} ms, "
                  f"new leader leading after {run.leading_s * 1000:.0f} ms)", flush=True)
            failovers.append(run)
        for i in range(args.throughput_runs):
            load = throughput_once(Path(tmp) / f"throughput-{i}", args.rate_mb, args.seconds, args.size,
                                   args.linger_ms)
            print(f"throughput run {i + 1}/{args.throughput_runs}: {load.delivered_mb_s:.1f} MB/s delivered of "
                  f"{load.offered_mb_s:.1f} offered, p50 {load.p50_ms:.1f} p99 {load.p99_ms:.1f} max "
                  f"{load.max_ms:.1f} ms, {load.errors} errors", flush=True)
            loads.append(load)

    def ms(values: list[float]) -> str:
        return fmt_spread([v * 1000 for v in values], 0)

    table = [
        ["3 brokers + controller: launch to all ready (ms)", ms([r.start_s for r in failovers])],
        ["failover: SIGKILL of the leader to the first acks=all delivery (ms)", ms([r.failover_s for r in failovers])],
        ["  of which: SIGKILL to the dead leader fenced (controller log, ms)", ms([r.fenced_s for r in failovers])],
        ["  of which: SIGKILL to the new leader leading (its log, ms)", ms([r.leading_s for r in failovers])],
        [f"acks=all RF 3, {args.size} B records: delivered MB/s (offered {args.rate_mb:g})",
         fmt_spread([r.delivered_mb_s for r in loads], 1)],
        [f"acks=all latency p50, linger.ms {args.linger_ms:g} (ms)", fmt_spread([r.p50_ms for r in loads], 1)],
        [f"acks=all latency p99, linger.ms {args.linger_ms:g} (ms)", fmt_spread([r.p99_ms for r in loads], 1)],
        [f"acks=all latency max, linger.ms {args.linger_ms:g} (ms)", fmt_spread([r.max_ms for r in loads], 1)],
        ["acks=all records / failed deliveries (all runs)",
         f"{sum(r.records for r in loads)} / {sum(r.errors for r in loads)}"],
    ]
    print_table(f"cluster (controller + {BROKERS} brokers on loopback), confluent-kafka; median (min-max) of "
                f"{args.runs} runs for start and failover, {args.throughput_runs} runs of {args.seconds:g} s for "
                "throughput", ["metric", "ours"], table)
    path = write_results("bench_cluster", {"failover_runs": [asdict(r) for r in failovers],
                                           "throughput_runs": [asdict(r) for r in loads], "table": table})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
