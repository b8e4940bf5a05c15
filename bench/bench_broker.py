"""Broker benchmark: the same confluent-kafka workload, in the same run, against our broker (writing to disk in
a temp dir) and against Tansu (in memory).

For each message size (100 B, 10 KB) and partition count (1, 8): produce N bytes with acks=1, then consume
them all with assign() from the beginning. Reported per broker: produce and consume MB/s, broker CPU seconds
per GB moved (produce + consume, psutil cpu_times of the broker pid), peak RSS, and time from launch to its
first Metadata answer. Each broker is started fresh per run; a run does every case. Figures are the median
of the runs with (min-max); ratios are ours / Tansu (MB/s: higher is better; CPU-s/GB and RSS: lower is).

`--settings user` (issue 32's table): the clients as users set them, one fresh broker per workload, the brokers
interleaved within each repeat. Producer acks=1, linger.ms 5, batch.size 1 MiB, no compression, no idempotence,
as fast as it can; consumer assign() at offset 0, fetch.wait.max.ms 100, fetch.queue.backoff.ms 10; librdkafka's
defaults otherwise. Workloads: 200,000 x 100 B on 1 and on 8 partitions, 100,000 x 1 KB on 500, 20,000 x 10 KB on
1. Produce MB/s from the first produce() to the last acknowledgement, consume MB/s from the first record received
to the last, delivery p50/p99 (librdkafka's per-record latency, produce() to its report), and broker work CPU: the
broker process's CPU seconds from the first produce to the last record consumed.

    python -m bench.bench_broker [--runs 3] [--scale 1.0] [--only ours|tansu] [--compression none|lz4|...]
                                 [--settings user|tuned|both]
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.common import (
    BrokerProc,
    alternate_runs,
    compare_row,
    fmt_spread,
    print_table,
    send_all,
    spread,
    start_ours,
    start_tansu,
    write_results,
)

MB = 1_000_000
# (message size, partitions, MB per case at scale 1.0)
CASES: list[tuple[int, int, int]] = [(100, 1, 50), (100, 8, 50), (10_000, 1, 200), (10_000, 8, 200)]


@dataclass
class CaseResult:
    broker: str
    size: int
    partitions: int
    mbytes: float
    produce_mb_s: float
    consume_mb_s: float
    cpu_s_per_gb: float


@dataclass
class RunResult:
    broker: str
    ready_ms: float
    peak_rss_mb: float
    cases: list[CaseResult]


def create_topic(bootstrap: str, name: str, partitions: int, client: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **(client or {})})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(30)
    deadline = time.monotonic() + 30
    while True:
        t = admin.list_topics(topic=name, timeout=10).topics.get(name)
        if t and t.error is None and len(t.partitions) == partitions and all(
                p.leader >= 0 for p in t.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {name} has no leaders")
        time.sleep(0.05)


def payload_of(size: int, compression: str) -> bytes:
    """The record value: one repeated byte uncompressed (the historical figures); compressed, hex text of random
    bytes (about 2:1, as JSON or log lines compress), so that batches are not all zeros."""
    if compression == "none":
        return b"x" * size
    return os.urandom(size // 2 + 1).hex().encode()[:size]


def produce(bootstrap: str, topic: str, size: int, count: int, partitions: int, compression: str = "none",
            client: dict[str, str] | None = None) -> float:
    """Send count messages of size bytes round-robin over the partitions; return seconds until all acked.
    `client`: more client settings (security.protocol and its keys)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "batch.size": 1_000_000,
                         "queue.buffering.max.kbytes": 512 * 1024, "queue.buffering.max.messages": 1_000_000,
                         "compression.type": compression, **(client or {})})
    payload = payload_of(size, compression)
    return send_all(producer, topic, count, partitions, lambda _: payload)


# the tuned consumer: large fetches and a deep local queue
TUNED_CONSUMER = {"enable.auto.commit": False, "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760,
                  "fetch.wait.max.ms": 100, "queued.max.messages.kbytes": 262_144}


def consume(bootstrap: str, topic: str, count: int, partitions: int, client: dict[str, Any] | None = None,
            settings: dict[str, Any] | None = None) -> float:
    """Read count messages with assign() from the beginning of every partition; return seconds. `settings`: the
    consumer's (TUNED_CONSUMER unless given); `client`: more (security.protocol and its keys)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}",
                  **(TUNED_CONSUMER if settings is None else settings), **(client or {})})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    t0 = time.perf_counter()
    try:
        _, last, _ = read_all(c, count)
        return last - t0
    finally:
        c.close()


def read_all(c: Consumer, count: int, batch: int = 10_000) -> tuple[float, float, int]:
    """Poll an assigned consumer, `batch` records at most per call, until it has `count` records: perf_counter()
    when the first poll that returned records returned and when the last one did, and how many records that
    first poll returned (they arrived before its return, so a first-to-last rate leaves them out)."""
    got = 0
    first = 0.0
    first_batch = 0
    deadline = time.perf_counter() + 300
    while got < count:
        if time.perf_counter() > deadline:
            raise TimeoutError(f"consumed {got}/{count} in 300 s")
        messages = c.consume(batch, 1.0)
        for m in messages:
            if m.error() is not None:
                raise KafkaException(m.error())
        if messages and got == 0:
            first, first_batch = time.perf_counter(), len(messages)
        got += len(messages)
    return first, time.perf_counter(), first_batch


def run_case(b: BrokerProc, size: int, partitions: int, mbytes: float, compression: str) -> CaseResult:
    count = max(1, int(mbytes * MB / size))
    topic = f"bench-{size}-{partitions}-{time.time_ns()}"
    create_topic(b.bootstrap, topic, partitions)
    cpu0 = b.cpu_seconds()
    tp = produce(b.bootstrap, topic, size, count, partitions, compression)
    tc = consume(b.bootstrap, topic, count, partitions)
    cpu = b.cpu_seconds() - cpu0
    moved_gb = 2 * count * size / 1e9  # bytes in plus bytes out
    return CaseResult(b.name, size, partitions, count * size / MB, count * size / MB / tp, count * size / MB / tc,
                      cpu / moved_gb)


def run_once(which: str, scale: float, workdir: Path, compression: str) -> RunResult:
    start = start_ours if which == "ours" else start_tansu
    with start(workdir) as b:
        cases = [run_case(b, size, parts, mb * scale, compression) for size, parts, mb in CASES]
        return RunResult(which, b.ready_s * 1000, b.rss.peak / MB, cases)


# Clients as users configure them (issues 18 and 32), librdkafka's defaults otherwise. (record size, partitions,
# records), in the order of issue 32's table.
USER_CASES: list[tuple[int, int, int]] = [(100, 1, 200_000), (100, 8, 200_000), (1_000, 500, 100_000),
                                         (10_000, 1, 20_000)]
USER_PRODUCER = {"acks": 1, "linger.ms": 5, "batch.size": 1_048_576, "compression.type": "none",
                 "enable.idempotence": False}
# fetch.queue.backoff.ms 10: librdkafka's own 1 s backoff on a full local queue would otherwise set the pace
USER_CONSUMER = {"fetch.wait.max.ms": 100, "fetch.queue.backoff.ms": 10}
USER_POLL = 500  # records per consume() call of the timing loop


@dataclass
class UserCaseResult:
    broker: str
    size: int
    partitions: int
    records: int
    produce_mb_s: float
    consume_mb_s: float
    delivery_p50_ms: float
    delivery_p99_ms: float
    cpu_s: float  # the broker's, from the first produce to the last record consumed


def run_user_case(which: str, workdir: Path, size: int, partitions: int, records: int) -> UserCaseResult:
    """One workload on a fresh broker."""
    start = start_ours if which == "ours" else start_tansu
    with start(workdir) as b:
        topic = f"user-{size}-{partitions}"
        create_topic(b.bootstrap, topic, partitions)
        latencies: list[float] = []
        payload = payload_of(size, "none")
        producer = Producer({"bootstrap.servers": b.bootstrap, **USER_PRODUCER})
        cpu0 = b.cpu_seconds()
        tp = send_all(producer, topic, records, partitions, lambda _: payload, latencies)
        consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"bench-{topic}", **USER_CONSUMER})
        try:
            consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
            # small polls, so that the first one (left out of the rate) is a small share of the records
            first, last, first_batch = read_all(consumer, records, USER_POLL)
            cpu = b.cpu_seconds() - cpu0  # at the last record: the consumer's close is not the workload's
        finally:
            consumer.close()
    latencies.sort()
    mbytes = records * size / MB
    consumed_mb = (records - first_batch) * size / MB
    return UserCaseResult(which, size, partitions, records, mbytes / tp,
                          consumed_mb / (last - first) if last > first else float("nan"),
                          latencies[len(latencies) // 2] * 1000, latencies[int(len(latencies) * 0.99)] * 1000, cpu)


def run_user_cases(which: str, workdir: Path, scale: float) -> list[UserCaseResult]:
    results = []
    for size, partitions, records in USER_CASES:
        case_dir = workdir / f"{size}-{partitions}"
        case_dir.mkdir()
        results.append(run_user_case(which, case_dir, size, partitions, max(1, int(records * scale))))
    return results


USER_METRICS = (("produce_mb_s", "produce MB/s", 1), ("consume_mb_s", "consume MB/s", 1),
                ("delivery_p50_ms", "delivery p50 ms", 1), ("delivery_p99_ms", "delivery p99 ms", 1),
                ("cpu_s", "broker work CPU-s", 2))


def summarize_user(runs: list[list[UserCaseResult]], scale: float = 1.0) -> dict[str, Any]:
    """Two tables: every metric as median (min-max) for both brokers, and issue 32's shape, one row per workload
    with ours / Tansu of the medians and, in brackets, the min-max of the per-repeat ratios (ours and Tansu of
    the same repeat ran back to back)."""
    cases = [case for run in runs for case in run]

    def vals(broker: str, key: str, size: int, partitions: int) -> list[float]:
        return [float(getattr(c, key)) for c in cases
                if c.broker == broker and c.size == size and c.partitions == partitions]

    def name(size: int, partitions: int, records: int) -> str:
        return f"{max(1, int(records * scale)):,} x {size} B, {partitions}p"

    rows: list[list[str]] = []
    ratio_rows: list[list[str]] = []
    for size, partitions, records in USER_CASES:
        ratio_row = [name(size, partitions, records)]
        for key, label, digits in USER_METRICS:
            ours, tansu = vals("ours", key, size, partitions), vals("tansu", key, size, partitions)
            rows.append([name(size, partitions, records), *compare_row(label, ours, tansu, digits)])
            if key == "delivery_p50_ms":
                continue
            if ours and tansu and all(tansu) and spread(tansu)[0]:
                pairs = [o / t for o, t in zip(ours, tansu, strict=True)]
                ratio_row.append(f"{spread(ours)[0] / spread(tansu)[0]:.2f}x ({min(pairs):.2f}-{max(pairs):.2f}): "
                                 f"{spread(ours)[0]:.{digits}f} vs {spread(tansu)[0]:.{digits}f}")
            else:
                ratio_row.append("-")
        ratio_rows.append(ratio_row)
    header = ["workload", "metric", "ours", "tansu", "ours/tansu"]
    settings = ("producer acks=1, linger.ms 5, batch.size 1 MiB, no compression, no idempotence; consumer assign() "
                "at 0, fetch.wait.max.ms 100, fetch.queue.backoff.ms 10")
    print_table(f"bench_broker, clients as users set them ({settings}): median (min-max) of "
                f"{len(runs) // len({c.broker for c in cases})} repeats, fresh broker per workload", header, rows)
    ratio_header = ["workload", "produce", "consume", "delivery p99", "broker work CPU"]
    if any(r[1] != "-" for r in ratio_rows):
        print_table("ours / Tansu of the medians (min-max of the per-repeat ratios): ours vs Tansu "
                    "(MB/s, ms, CPU-s)", ratio_header, ratio_rows)
    return {"header": header, "rows": rows, "ratio_header": ratio_header, "ratio_rows": ratio_rows}


def summarize(runs: list[RunResult], compression: str = "none") -> dict[str, Any]:
    brokers = sorted({r.broker for r in runs}, key=lambda n: n != "ours")

    def vals(broker: str, key: str, size: int | None = None, parts: int | None = None) -> list[float]:
        if size is None:
            return [float(getattr(r, key)) for r in runs if r.broker == broker]
        return [float(getattr(c, key)) for r in runs if r.broker == broker for c in r.cases
                if c.size == size and c.partitions == parts]

    rows: list[list[str]] = []
    for size, parts, _ in CASES:
        for metric, label in (("produce_mb_s", "produce MB/s"), ("consume_mb_s", "consume MB/s"),
                              ("cpu_s_per_gb", "broker CPU-s/GB")):
            row = [f"{'100 B' if size == 100 else '10 KB'} x {parts}p", label]
            row += [fmt_spread(vals(b, metric, size, parts)) for b in brokers]
            if len(brokers) == 2:
                ours, theirs = (spread(vals(b, metric, size, parts))[0] for b in brokers)
                row.append(f"{ours / theirs:.2f}x")
            rows.append(row)
    for key, label, digits in (("peak_rss_mb", "peak RSS MB", 0), ("ready_ms", "launch to Metadata ms", 0)):
        row = ["all", label] + [fmt_spread(vals(b, key), digits) for b in brokers]
        if len(brokers) == 2:
            row.append(f"{spread(vals(brokers[0], key))[0] / spread(vals(brokers[1], key))[0]:.2f}x")
        rows.append(row)
    header = ["case", "metric", *brokers] + (["ours/tansu"] if len(brokers) == 2 else [])
    print_table(f"bench_broker: median (min-max) of {len(runs) // max(1, len(brokers))} runs, confluent-kafka "
                f"client, acks=1, compression {compression}; ours writes to disk, Tansu is in memory", header, rows)
    return {"header": header, "rows": rows}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_broker", description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the data size of every case")
    ap.add_argument("--only", choices=["ours", "tansu"], help="measure one broker only")
    ap.add_argument("--compression", choices=["none", "gzip", "snappy", "lz4", "zstd"], default="none",
                    help="the producer's compression.type (default none)")
    ap.add_argument("--settings", choices=["user", "tuned", "both"], default="both",
                    help="the clients as users set them (one fresh broker per workload), the tuned cases, or both")
    args = ap.parse_args(argv)
    if args.settings != "tuned":
        user_runs = alternate_runs("epoch-bench-user-", args.runs, args.only,
                                   lambda which, workdir: run_user_cases(which, workdir, args.scale),
                                   lambda r: ", ".join(f"{c.consume_mb_s:.1f}" for c in r) + " consume MB/s")
        table = summarize_user(user_runs, args.scale)
        path = write_results("bench_broker_user", {"scale": args.scale, "table": table,
                                                   "runs": [[asdict(c) for c in r] for r in user_runs]})
        print(f"results: {path}")
        if args.settings == "user":
            return
    runs = alternate_runs("epoch-bench-", args.runs, args.only,
                          lambda which, workdir: run_once(which, args.scale, workdir, args.compression),
                          lambda r: f"ready {r.ready_ms:.0f} ms, peak RSS {r.peak_rss_mb:.0f} MB")
    table = summarize(runs, args.compression)
    path = write_results("bench_broker", {"scale": args.scale, "compression": args.compression,
                                          "runs": [asdict(r) for r in runs], "table": table})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
