"""Compaction benchmark: the log cleaner's throughput, and what it costs producers while it runs.

- cleaner throughput (storage level, no broker): a log of --records records of 1 KB over --keys keys, in
  batches of 50 (as a linger.ms 5 producer makes them), uncompressed and lz4, 1 MiB segments; one cleaning
  (`storage.log_cleaner.clean`) of everything but the active segment: MB of log cleaned per second (Kafka's
  cleaner log line counts the same), and the records it removed.
- produce p99 while cleaning: our broker (`epoch-broker serve`), a compacted topic (1 MiB segments,
  min.cleanable.dirty.ratio 0.01, log.cleaner.backoff.ms 200) written by one producer at --churn-mb-s (the cleaner
  always has work, the broker is not saturated), while a second producer (confluent-kafka acks=all, linger.ms 5,
  one 1 KB record every ms) sends to a plain topic and measures its delivery latency. Once with
  log.cleaner.enable=true, once with false, fresh brokers, alternating, in the same run: the ratio of the p99s is
  the cleaner's cost to latency.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient

from bench.bench_broker import create_topic
from bench.common import fmt_spread, print_table, spread, start_ours, write_results
from epoch_broker.protocol.records import Compression, build_batch
from epoch_broker.storage.log import LogConfig, PartitionLog
from epoch_broker.storage.log_cleaner import clean

# random values, each record's its own (half of each random, half repeated text: compressible as logs and JSON are)
VALUES = [os.urandom(512) + b"x" * 512 for _ in range(997)]
VALUE = VALUES[0]
PER_BATCH = 50
SEGMENT_BYTES = 1 << 20


@dataclass
class CleanerRun:
    codec: str
    log_mb: float
    mb_per_s: float
    records_per_s: float
    records_removed: int


@dataclass
class LatencyRun:
    cleaner: bool
    p50_ms: float
    p99_ms: float
    table_mb: float  # the compacted topic's size on disk at the end (DescribeLogDirs): the cleaner did its work


def cleaner_throughput(records: int, keys: int, codec: Compression) -> CleanerRun:
    with tempfile.TemporaryDirectory(prefix="epoch-bench-cleaner-") as tmp:
        log = PartitionLog.open(str(Path(tmp) / "t-0"), LogConfig(segment_bytes=SEGMENT_BYTES,
                                                                 cleanup_policy=frozenset({"compact"})))
        for first in range(0, records, PER_BATCH):
            batch = build_batch([(b"key-%d" % (i % keys), VALUES[i % len(VALUES)], (), None)
                                 for i in range(first, min(first + PER_BATCH, records))], compression=codec)
            log.append_as_leader(batch, leader_epoch=0)
        log.roll()  # everything written is cleanable
        log.high_watermark = log.log_end_offset
        stats = clean(log)
        assert stats is not None
        log.close()
    return CleanerRun(codec.name.lower(), stats.log_bytes / (1 << 20), stats.mb_per_second,
                      stats.records_read / stats.seconds, stats.records_removed)


def produce_latency(which: bool, workdir: Path, seconds: float, churn_per_s: int) -> LatencyRun:
    overrides = {"log.cleaner.enable": str(which).lower(), "log.cleaner.backoff.ms": "200"}
    with start_ours(workdir, overrides) as broker:
        create_topic(broker.bootstrap, "plain", 1)
        topics = AdminClient({"bootstrap.servers": broker.bootstrap})
        topics.create_topics([NewTopic("table", 1, 1, config={
            "cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES),
            "min.cleanable.dirty.ratio": "0.01"})])["table"].result(30)
        stop = threading.Event()

        def churn() -> None:
            writer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
            started = time.perf_counter()
            i = 0
            while not stop.is_set():
                ahead = i / churn_per_s - (time.perf_counter() - started)
                if ahead > 0:
                    time.sleep(ahead)
                writer.produce("table", VALUES[i % len(VALUES)], key=b"key-%d" % (i % 1000))
                i += 1
                writer.poll(0)
            writer.flush(30)

        churner = threading.Thread(target=churn)
        churner.start()
        latencies: list[float] = []
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
        try:
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                sent = time.perf_counter()
                producer.produce("plain", VALUE, on_delivery=lambda e, _m, sent=sent: latencies.append(
                    (time.perf_counter() - sent) * 1000) if e is None else None)
                producer.poll(0)
                time.sleep(0.001)
            producer.flush(30)
        finally:
            stop.set()
            churner.join()
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            ((log_dir,),) = [answer["log_dirs"] for answer in admin.describe_log_dirs(topic_partitions=["table"])]
        finally:
            admin.close()
        table_mb = sum(p["partition_size"] for t in log_dir["topics"] for p in t["partitions"]) / (1 << 20)
    latencies.sort()
    return LatencyRun(which, latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99)], table_mb)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_compaction", description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=10.0, help="of latency sampling per broker run")
    ap.add_argument("--churn-mb-s", type=float, default=5.0, help="updates written to the compacted topic")
    args = ap.parse_args(argv)
    cleaner_runs = [cleaner_throughput(args.records, args.keys, codec)
                    for _ in range(args.runs) for codec in (Compression.NONE, Compression.LZ4)]
    for run in cleaner_runs:
        print(f"cleaner {run.codec}: {run.log_mb:.0f} MB at {run.mb_per_s:.1f} MB/s ({run.records_per_s:.0f} "
              f"records/s), {run.records_removed} removed", flush=True)
    latency_runs: list[LatencyRun] = []
    with tempfile.TemporaryDirectory(prefix="epoch-bench-compaction-") as tmp:
        for i in range(args.runs):
            for enabled in (True, False):
                workdir = Path(tmp) / f"{enabled}-{i}"
                workdir.mkdir()
                run = produce_latency(enabled, workdir, args.seconds, int(args.churn_mb_s * 1024))
                print(f"cleaner {'on' if enabled else 'off'}: p50 {run.p50_ms:.1f} ms, p99 {run.p99_ms:.1f} ms, "
                      f"compacted topic {run.table_mb:.0f} MB on disk", flush=True)
                latency_runs.append(run)
    rows = [[f"cleaner MB/s of log ({codec}, 1 KB records, {args.keys} keys)",
             fmt_spread([r.mb_per_s for r in cleaner_runs if r.codec == codec])] for codec in ("none", "lz4")]
    rows += [[f"cleaner records/s ({codec})",
              fmt_spread([r.records_per_s for r in cleaner_runs if r.codec == codec], 0)] for codec in ("none", "lz4")]
    on = [r.p99_ms for r in latency_runs if r.cleaner]
    off = [r.p99_ms for r in latency_runs if not r.cleaner]
    rows += [["produce p99 ms, cleaner on", fmt_spread(on)], ["produce p99 ms, cleaner off", fmt_spread(off)],
             ["p99 on / off", fmt_spread([a / b for a, b in zip(on, off, strict=True)], 2)
              + f" (medians {spread(on)[0] / spread(off)[0]:.2f}x)"]]
    print_table(f"compaction, median (min-max) of {args.runs} runs", ["metric", "value"], rows)
    path = write_results("bench_compaction", {"cleaner": [asdict(r) for r in cleaner_runs],
                                              "latency": [asdict(r) for r in latency_runs], "table": rows})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
