"""Spark benchmark: the `kafka-epoch` PySpark data source (spark/) reading from our broker, against its peers.

One broker of ours, one topic of N records (100-byte values, 4 partitions) produced by confluent-kafka as a
user's producer does (linger.ms=5, other settings at their defaults, compression none or lz4). In one run:
- (a) a Spark batch read, `spark.read.format("kafka-epoch")...load()` written to the `noop` sink (every column
  of every row reaches the JVM), 4 tasks (one per partition), and again with minPartitions=8;
- (b) the hand-written alternative: one Python process with a confluent-kafka Consumer, all 4 partitions
  assigned from the beginning, `consume(num_messages=10000)` in a loop touching each value, up to the high
  watermarks (consumer creation and close included, as planning and task ends are in (a)); and (b') the same
  loop with fetch.queue.backoff.ms=0: librdkafka's default (1000 ms) pauses fetching a partition for a second
  each time its local queue holds queued.min.messages (100,000), which a partition of more than 100,000
  records of 100 B reaches, so (b) at its defaults measures those pauses more than the client's speed;
- (c) Spark reading the same rows from a local Parquet file (written once from (a), untimed) to `noop`: no
  network and no Python, so the ceiling of Spark's own per-row cost on this machine;
- (d) streaming end-to-end latency: `readStream.format("kafka-epoch")` on a fresh topic, trigger every 100 ms, a
  `foreachBatch` sink taking now - the record's timestamp (the producer's create time) for each row, while a
  producer sends a steady rate; rows produced during the warm-up (until the first rows arrive, plus a few
  seconds) are left out;
- (e) peak RSS of Spark's Python worker processes (descendants of the Spark JVM running pyspark, sampled every
  50 ms) during a read of the first N/4 records (endingOffsets) and then of all N: a task decodes one fetch
  at a time (at most kafka.max.partition.fetch.bytes, 1 MiB by default) and yields it as one Arrow batch, so
  the workers must not grow with the topic. Measured after one untimed read (the Parquet write) has started
  the reused workers, before the timed reads;
- (f) writes: the N rows of the Parquet file (key, value) written through the `kafka-epoch` sink to a fresh
  topic of 4 partitions, at-least-once (the default: each task an idempotent producer) and with
  exactlyOnce=true (each task's rows and its commit-log record in one transaction, committed by the driver
  once every task succeeded), planning and commits included; the two alternate their order each run, after an
  untimed write of each.

The peers are fair: (a), (b), (b') and (c) read the same rows on the same 2 cores (Spark with master local[2], the
consumer with librdkafka's threads), every one of them touches every value, and the repeats alternate their
order so that drift on the machine hits them alike. The SparkSession start (5-10 s) is excluded; the untimed
Parquet write and the reads of (e) start Spark's reused Python workers before the timed ones. Every row's
ratios to (b), (b') and (c) are the ratio of medians with the min-max of the per-run ratios.

The driver JVM runs with "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC" by default: measured here on a 1M-record
read it does not slow the measured part but speeds it (G1 with tiered compilation: 145-220k rows/s and still
rising after 6 reads; these flags: 215-255k from the second read on). `--java-options ""` runs without them.

    python -m bench bench_spark -- [--records N] [--runs R] [--compression none|lz4] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from bench.bench_broker import create_topic
from bench.common import Sampler, fmt_spread, print_table, send_all, spread, start_ours, write_results

PARTITIONS = 4
VALUE_SIZE = 100
JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
MB = 1 << 20
# (d): the phases of a micro-batch reported (Spark's durationMs names: their labels in the table)
PHASES = {"triggerExecution": "whole", "latestOffset": "latestOffset", "queryPlanning": "planning",
          "addBatch": "addBatch", "walCommit": "walCommit", "commitOffsets": "commit"}


@dataclass
class Runs:
    """Rows/s of each batch measurement, one value per run."""

    kafka_epoch: list[float] = field(default_factory=list)
    kafka_epoch_min8: list[float] = field(default_factory=list)
    consumer: list[float] = field(default_factory=list)
    consumer_no_backoff: list[float] = field(default_factory=list)
    parquet: list[float] = field(default_factory=list)
    sink_at_least_once: list[float] = field(default_factory=list)
    sink_exactly_once: list[float] = field(default_factory=list)


@dataclass
class WorkerPeak:
    records: int
    largest_mb: float  # the largest single Python worker
    total_mb: float  # all of Spark's Python processes at one instant


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def values(count: int) -> list[bytes]:
    """Distinct values of hex text from random bytes (about 2:1 under lz4, as JSON or log lines compress);
    4096 of them, 400 KB, more than lz4's 64 KB window, so that batches do not compress as repeats."""
    return [os.urandom(VALUE_SIZE // 2).hex().encode() for _ in range(min(count, 4096))]


def produce(bootstrap: str, topic: str, count: int, compression: str) -> float:
    """Send count records round-robin over the partitions (equal ranges for endingOffsets); seconds to all acked."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": compression})
    pool = values(count)
    return send_all(producer, topic, count, PARTITIONS, lambda i: pool[i % len(pool)])


def spark_session(java_options: str) -> Any:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from epoch_broker.spark import register

    builder = (SparkSession.builder.master("local[2]").appName("epoch-broker-bench")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.streaming.numRecentProgressUpdates", "1000"))  # (d) reads every batch's timings
    if java_options:
        builder = builder.config("spark.driver.extraJavaOptions", java_options)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def kafka_epoch(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    reader = spark.read.format("kafka-epoch").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def noop_rate(count: int, frame: Callable[[], Any]) -> float:
    """Rows/s of building the DataFrame (planning included) and writing it to the noop sink."""
    started = time.perf_counter()
    frame().write.format("noop").mode("overwrite").save()
    return count / (time.perf_counter() - started)


def high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-spark-watermarks"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


def consumer_rate(bootstrap: str, topic: str, **config: Any) -> float:
    """Rows/s of the hand-written loop: assign every partition from the beginning, read to the high watermarks."""
    started = time.perf_counter()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-spark-consumer",
                         "enable.auto.commit": False, **config})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        waiting = {p for p, end in ends.items() if end > 0}
        count = value_bytes = 0
        while waiting:
            for message in consumer.consume(num_messages=10_000, timeout=1.0):
                if message.error() is not None:
                    raise KafkaException(message.error())
                value_bytes += len(message.value())
                count += 1
                if message.offset() == ends[message.partition()] - 1:
                    waiting.discard(message.partition())
            if time.perf_counter() - started > 600:
                raise TimeoutError(f"consumed {count} records in 600 s")
    finally:
        consumer.close()
    elapsed = time.perf_counter() - started
    if count != sum(ends.values()) or value_bytes != count * VALUE_SIZE:
        raise RuntimeError(f"consumed {count:,} records ({value_bytes:,} B of values) of {sum(ends.values()):,}")
    return count / elapsed


class WorkerRss(Sampler):
    """The RSS of every descendant of the Spark JVM that runs pyspark (the daemons, the task workers they fork,
    the planning workers): the largest process and the largest instant total."""

    def __init__(self, jvm_pid: int, interval: float = 0.05) -> None:
        super().__init__(interval)
        self.jvm = psutil.Process(jvm_pid)
        self.largest = self.total = 0
        self._pyspark: dict[int, bool] = {}  # pid: runs pyspark (read once per process)

    def sample(self) -> None:
        total = 0
        for proc in self.jvm.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if proc.pid not in self._pyspark:
                    self._pyspark[proc.pid] = "pyspark" in " ".join(proc.cmdline())
                if self._pyspark[proc.pid]:
                    rss = proc.memory_info().rss
                    total += rss
                    self.largest = max(self.largest, rss)
        self.total = max(self.total, total)


def worker_peaks(spark: Any, bootstrap: str, topic: str, records: int) -> list[WorkerPeak]:
    """(e): the first quarter of every partition, then the whole topic, each read to noop under the sampler."""
    jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    quarter = {topic: {str(p): end // 4 for p, end in high_watermarks(bootstrap, topic).items()}}
    peaks = []
    for count, options in ((sum(quarter[topic].values()), {"endingOffsets": json.dumps(quarter)}), (records, {})):
        with WorkerRss(jvm_pid) as rss:
            rate = noop_rate(count, lambda options=options: kafka_epoch(spark, bootstrap, topic, **options))
        peaks.append(WorkerPeak(count, rss.largest / MB, rss.total / MB))
        log(f"(e) read of {count:,} records ({rate:,.0f} rows/s): largest Python worker "
            f"{rss.largest / MB:.0f} MB, all Python workers {rss.total / MB:.0f} MB")
    return peaks


def batch_runs(spark: Any, bootstrap: str, topic: str, records: int, parquet: str, runs: int) -> Runs:
    """(a), (a) with minPartitions=8, (b), (b') and (c), `runs` times, the order rotated each run."""
    result = Runs()
    measurements: list[tuple[str, list[float], Callable[[], float]]] = [
        ("(a) kafka-epoch", result.kafka_epoch,
         lambda: noop_rate(records, lambda: kafka_epoch(spark, bootstrap, topic))),
        ("(a) kafka-epoch minPartitions=8", result.kafka_epoch_min8,
         lambda: noop_rate(records, lambda: kafka_epoch(spark, bootstrap, topic, minPartitions="8"))),
        ("(b) confluent-kafka Consumer", result.consumer, lambda: consumer_rate(bootstrap, topic)),
        ("(b') confluent-kafka Consumer fetch.queue.backoff.ms=0", result.consumer_no_backoff,
         lambda: consumer_rate(bootstrap, topic, **{"fetch.queue.backoff.ms": 0})),
        ("(c) Parquet", result.parquet, lambda: noop_rate(records, lambda: spark.read.parquet(parquet))),
    ]
    for run in range(runs):
        shift = run % len(measurements)
        for name, rates, measure in measurements[shift:] + measurements[:shift]:
            rates.append(measure())
            log(f"run {run + 1}/{runs} {name}: {rates[-1]:,.0f} rows/s")
    return result


def write_rate(spark: Any, bootstrap: str, parquet: str, records: int, topic: str, exactly_once: bool) -> float:
    """(f): rows/s of writing the Parquet file's rows to a fresh topic through the kafka-epoch sink."""
    create_topic(bootstrap, topic, PARTITIONS)
    started = time.perf_counter()
    (spark.read.parquet(parquet).select("key", "value").write.format("kafka-epoch").mode("append")
     .option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
     .option("exactlyOnce", str(exactly_once).lower()).save())
    elapsed = time.perf_counter() - started
    # exactly once: one commit marker per partition and task besides the records
    if (written := sum(high_watermarks(bootstrap, topic).values())) < records:
        raise RuntimeError(f"{topic}: {written:,} offsets written for {records:,} rows")
    return records / elapsed


def write_runs(spark: Any, bootstrap: str, parquet: str, records: int, runs: int, result: Runs) -> None:
    """(f), `runs` times each, alternating which goes first, after one untimed write of each (the first write of
    a session pays for warming the write path's Python workers; the first exactly-once one creates the commit log)."""
    measurements = [("at-least-once", False, result.sink_at_least_once),
                    ("exactlyOnce=true", True, result.sink_exactly_once)]
    for name, exactly_once, _ in measurements:
        warm = write_rate(spark, bootstrap, parquet, records, f"bench-spark-write-warm-{exactly_once}", exactly_once)
        log(f"(f) untimed first write, {name}: {warm:,.0f} rows/s")
    for run in range(runs):
        for name, exactly_once, rates in measurements[run % 2:] + measurements[:run % 2]:
            topic = f"bench-spark-write-{'eos' if exactly_once else 'alo'}-{run}"
            rates.append(write_rate(spark, bootstrap, parquet, records, topic, exactly_once))
            log(f"run {run + 1}/{runs} (f) kafka-epoch sink {name}: {rates[-1]:,.0f} rows/s")


def wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} in {timeout:.0f} s")
        time.sleep(0.05)


@dataclass
class Latency:
    rows: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    batches: int  # micro-batches with rows during the measurement
    batch_ms: dict[str, float]  # their median durations by phase (Spark's durationMs)


def stream_latency(spark: Any, bootstrap: str, workdir: Path, compression: str, rate: int, warmup_s: float,
                   measure_s: float) -> Latency:
    """(d): a streaming query on a fresh topic while a producer sends `rate` records/s."""
    topic = "bench-spark-stream"
    create_topic(bootstrap, topic, PARTITIONS)
    latencies: list[float] = []
    seen = [0]
    measured_from = [float("inf")]  # create time (ms) from which rows count: the end of the warm-up

    def sink(frame: Any, _batch_id: int) -> None:
        stamps = [row[0] for row in frame.selectExpr("unix_millis(timestamp)").collect()]
        now_ms = time.time() * 1000
        seen[0] += len(stamps)
        latencies.extend(now_ms - stamp for stamp in stamps if stamp >= measured_from[0])

    query = (spark.readStream.format("kafka-epoch").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest").load()
             .writeStream.foreachBatch(sink).option("checkpointLocation", str(workdir / "checkpoint"))
             .trigger(processingTime="100 milliseconds").start())
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": compression})
    pool = values(rate)
    sent = [0]
    stop = threading.Event()

    def send() -> None:
        started = time.perf_counter()
        while not stop.is_set():
            producer.produce(topic, pool[sent[0] % len(pool)])
            sent[0] += 1
            producer.poll(0)
            stop.wait(max(0.0, started + sent[0] / rate - time.perf_counter()))  # steady pace, no catch-up bursts
        producer.flush(30)

    sender = threading.Thread(target=send, daemon=True)
    try:
        sender.start()
        wait(lambda: seen[0] > 0, 120, "the streaming query's first rows")
        log(f"(d) first rows arrived; warming up {warmup_s:.0f} s more")
        time.sleep(warmup_s)
        measured_from[0] = time.time() * 1000
        first_batch = query.lastProgress["batchId"]
        log(f"(d) measuring for {measure_s:.0f} s at {rate} records/s")
        time.sleep(measure_s)
        stop.set()
        sender.join()
        wait(lambda: seen[0] >= sent[0], 60, "the streaming query to catch up")
        batches = [p.durationMs for p in query.recentProgress if p.batchId > first_batch and p.numInputRows]
    finally:
        stop.set()
        query.stop()
    if not latencies:
        raise RuntimeError("the streaming query delivered no measured rows")
    ordered = sorted(latencies)
    return Latency(len(ordered), statistics.median(ordered), ordered[int(0.99 * (len(ordered) - 1))], ordered[-1],
                   len(batches), {phase: statistics.median(b.get(phase, 0) for b in batches) for phase in PHASES})


def ratio(top: list[float], bottom: list[float]) -> str:
    """Ratio of the medians, with the min-max of the per-run ratios."""
    per_run = [t / b for t, b in zip(top, bottom, strict=True)]
    text = f"{spread(top)[0] / spread(bottom)[0]:.2f}x"
    return text if len(per_run) == 1 else f"{text} ({min(per_run):.2f}-{max(per_run):.2f})"


def table(runs: Runs, latency: Latency, peaks: list[WorkerPeak]) -> list[list[str]]:
    rows = [[label, fmt_spread([r / 1000 for r in rates]), ratio(rates, runs.consumer),
             ratio(rates, runs.consumer_no_backoff), ratio(rates, runs.parquet)]
            for label, rates in (("(a) kafka-epoch -> noop, k rows/s", runs.kafka_epoch),
                                 ("(a) kafka-epoch minPartitions=8 -> noop, k rows/s", runs.kafka_epoch_min8),
                                 ("(b) confluent-kafka Consumer loop, k rows/s", runs.consumer),
                                 ("(b') same, fetch.queue.backoff.ms=0, k rows/s", runs.consumer_no_backoff),
                                 ("(c) Parquet -> noop, k rows/s", runs.parquet))]
    rows.append([f"(d) streaming latency p50 / p99 / max ms ({latency.rows:,} rows)",
                 f"{latency.p50_ms:.0f} / {latency.p99_ms:.0f} / {latency.max_ms:.0f}", "", "", ""])
    rows.append([f"(d) micro-batch median ms ({latency.batches}): " + " / ".join(PHASES.values()),
                 " / ".join(f"{ms:.0f}" for ms in latency.batch_ms.values()), "", "", ""])
    rows += [[f"(e) peak RSS MB, read of {peak.records:,}: largest worker / all workers",
              f"{peak.largest_mb:.0f} / {peak.total_mb:.0f}", "", "", ""] for peak in peaks]
    rows += [[label, fmt_spread([r / 1000 for r in rates]), "", "", ""]
             for label, rates in (("(f) Parquet -> kafka-epoch sink, at-least-once, k rows/s", runs.sink_at_least_once),
                                  ("(f) same, exactlyOnce=true, k rows/s", runs.sink_exactly_once))]
    rows.append(["(f) exactlyOnce=true / at-least-once", ratio(runs.sink_exactly_once, runs.sink_at_least_once),
                 "", "", ""])
    return rows


@contextlib.contextmanager
def session(java_options: str) -> Iterator[Any]:
    started = time.perf_counter()
    spark = spark_session(java_options)
    log(f"SparkSession started in {time.perf_counter() - started:.1f} s (excluded), master local[2], "
        f"driver Java options {java_options or '(none)'!r}")
    try:
        yield spark
    finally:
        spark.stop()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_spark", description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--compression", choices=["none", "lz4"], default="none", help="the producer's compression.type")
    ap.add_argument("--quick", action="store_true", help="smoke test: 100,000 records, 1 run, 5 s of streaming")
    ap.add_argument("--rate", type=int, default=500, help="(d): records/s produced to the streaming query")
    ap.add_argument("--stream-seconds", type=float, default=20.0, help="(d): seconds measured after the warm-up")
    ap.add_argument("--java-options", default=JAVA_OPTIONS, help=f"driver JVM options (default {JAVA_OPTIONS!r})")
    args = ap.parse_args(argv)
    if args.quick:
        args.records, args.runs, args.stream_seconds = 100_000, 1, 5.0
    warmup_s = 2.0 if args.quick else 5.0
    started = time.perf_counter()
    with (tempfile.TemporaryDirectory(prefix="epoch-bench-spark-") as tmp,
          start_ours(Path(tmp), {"offsets.topic.num.partitions": "1"}) as broker,
          session(args.java_options) as spark):
        topic = "bench-spark"
        create_topic(broker.bootstrap, topic, PARTITIONS)
        log(f"producing {args.records:,} records of {VALUE_SIZE} B to {PARTITIONS} partitions, "
            f"compression {args.compression}")
        produce_s = produce(broker.bootstrap, topic, args.records, args.compression)
        log(f"produced in {produce_s:.1f} s ({args.records / produce_s:,.0f} records/s)")
        parquet = str(Path(tmp) / "rows.parquet")
        kafka_epoch(spark, broker.bootstrap, topic).write.parquet(parquet)
        if (written := spark.read.parquet(parquet).count()) != args.records:
            raise RuntimeError(f"kafka-epoch read {written:,} rows of {args.records:,}")
        log(f"wrote {written:,} rows to Parquet (untimed; also warms the Python workers)")
        peaks = worker_peaks(spark, broker.bootstrap, topic, args.records)
        runs = batch_runs(spark, broker.bootstrap, topic, args.records, parquet, args.runs)
        write_runs(spark, broker.bootstrap, parquet, args.records, args.runs, runs)
        latency = stream_latency(spark, broker.bootstrap, Path(tmp), args.compression, args.rate, warmup_s,
                                 args.stream_seconds)
        log(f"(d) {latency.rows:,} rows: p50 {latency.p50_ms:.0f} ms, p99 {latency.p99_ms:.0f} ms, "
            f"max {latency.max_ms:.0f} ms")
    rows = table(runs, latency, peaks)
    header = ["measurement", f"median (min-max) of {args.runs}", "vs (b)", "vs (b')", "vs (c)"]
    print_table(f"bench_spark: {args.records:,} records of {VALUE_SIZE} B in {PARTITIONS} partitions, compression "
                f"{args.compression}, master local[2]; (d) at {args.rate} records/s for {args.stream_seconds:.0f} s",
                header, rows)
    elapsed = time.perf_counter() - started
    path = write_results("bench_spark", {
        "records": args.records, "runs": args.runs, "compression": args.compression, "java_options": args.java_options,
        "produce_s": produce_s, "elapsed_s": elapsed, "rows_per_s": asdict(runs), "latency": asdict(latency),
        "worker_rss": [asdict(p) for p in peaks], "table": {"header": header, "rows": rows}})
    print(f"results: {path} ({elapsed:.0f} s in all)")


if __name__ == "__main__":
    main()
