"""The spark-pipeline drill's Spark side (issue 31): a Structured Streaming query in a driver process of its own,
which the nemesis kills (the driver, or one executor JVM), and the read-back of what it wrote.

    python -m epoch_broker.drill.pipeline BOOTSTRAP INPUT OUTPUT COMMIT_LOG CHECKPOINT
        the driver: reads INPUT through `kafka-epoch` (read_committed, from the earliest offsets), maps each record
        to one row (TRANSFORM) and writes OUTPUT through the exactly-once sink (its commit log COMMIT_LOG), a
        micro-batch every TRIGGER, its checkpoint in CHECKPOINT; prints READY and the query's id once it runs, a
        line per micro-batch, and stops cleanly (query, then session) when its stdin closes.

- The query runs on MASTER, `local-cluster[2,1,1024]`: two executors, each a JVM of its own started by a worker
  inside the driver's JVM, so that one can be SIGKILLed (`executor-kill`): the worker starts a new one and Spark
  runs the lost tasks again (new attempts: the sink fences the old ones' transactions).
- `Pipeline` runs the driver in a session of its own, stdout and stderr appended to DIR/driver.log (a file, not a
  pipe, as the launcher's processes). `driver-kill` SIGKILLs the whole process group (the driver's Python, its
  JVM, the executors and their Python workers: what a lost driver host takes with it); the driver started again
  resumes from its checkpoint, with the same query id, so the sink's transactional ids and commit log carry over
  and a micro-batch run again writes only what had not committed. The fault is healed once the new driver's query
  completed a micro-batch, so that the next fault meets a query at work.
- The transform is stateless and maps back: key = the input value's stream ("p0" of "p0-17", the input partition
  the drill's producer wrote it to), value = "<partition>:<offset>:<VALUE>", the input's partition and offset and
  its value upper-cased. Keyed rows of one stream all land in one output partition, in the order written.
- `read_output` reads OUTPUT read_committed as the checker's reference of what the pipeline wrote: one `output`
  event per row (client OUTPUT_READER: topic, partition, offset, key, value and the input record it names:
  source_topic, source_partition, source_offset, source_value, null where the value does not parse). It reads
  until every record of the input's final log has a row (or CATCH_UP_S pass), then stops the driver cleanly and
  reads on to the output's high watermarks.
- A driver's life is recorded as `driver` events (client "pipeline": phase start, ready, batch (its first
  micro-batch completed, when awaited), exit with its status, stop), so the report shows when the query ran.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from epoch_broker.drill.history import HistoryWriter

MASTER = "local-cluster[2,1,1024]"
TRIGGER = "500 milliseconds"
READY = "pipeline: query running"
BATCH = "pipeline: batch "  # a micro-batch completed (the driver's progress line)
EXECUTOR_MAIN = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
OUTPUT_READER = "pipeline-reader"
START_TIMEOUT_S = 240.0  # a driver's start to its query running: a JVM and two executors on a loaded 2-core host
STOP_TIMEOUT_S = 60.0
EXECUTOR_TIMEOUT_S = 120.0  # a killed executor's successor registering
CATCH_UP_S = 240.0  # the output holding a row for every input record, after the producers stopped
READ_OUTPUT_S = 120.0  # the output read to its high watermarks (an open transaction holds it up to its timeout)


def missing_extra() -> str:
    """Why the driver cannot run here, or "" when it can: pyspark and pyarrow (the [spark] extra), and Java."""
    for module in ("pyspark", "pyarrow"):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            return f"the spark-pipeline drill needs the [spark] extra (pip install 'epoch-broker[spark]'): {exc}"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "the spark-pipeline drill needs Java for Spark: no java on PATH and no JAVA_HOME"
    return ""


def transform_value(partition: int, offset: int, value: str) -> str:
    """The output row's value for an input record (what the driver's query computes, in Python)."""
    return f"{partition}:{offset}:{value.upper()}"


def parse_output(value: str) -> tuple[int, int, str] | None:
    """(input partition, input offset, input value upper-cased) of an output row's value; None if it is not one."""
    partition, _, rest = value.partition(":")
    offset, _, upper = rest.partition(":")
    if not (partition.isdigit() and offset.isdigit() and upper):
        return None
    return int(partition), int(offset), upper


class Pipeline:
    """The driver process: started, killed, started again, stopped; and its executors, one of which is killed."""

    def __init__(self, bootstrap: str, input_topic: str, output_topic: str, commit_log: str, directory: Path,
                 history: HistoryWriter) -> None:
        self.argv = [sys.executable, "-m", "epoch_broker.drill.pipeline", bootstrap, input_topic, output_topic,
                     commit_log, str(directory / "checkpoint")]
        self.log = directory / "driver.log"
        self.history = history
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        directory.mkdir(parents=True, exist_ok=True)

    def start(self, first_batch: bool = False) -> None:
        """Start the driver and wait for its query to run (and, with `first_batch`, to complete a micro-batch:
        a driver started again has resumed its work); RuntimeError (with the log's tail) if it does not."""
        before = self._log_text()
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        self.starts += 1
        self.history.record("driver", phase="start", pid=self.process.pid, detail=f"start {self.starts}")
        deadline = time.monotonic() + START_TIMEOUT_S
        self._wait_for(READY, before.count(READY), "its query ran", deadline)
        self.history.record("driver", phase="ready", pid=self.process.pid, detail="its query runs")
        if first_batch:
            self._wait_for(BATCH, before.count(BATCH), "its query completed a micro-batch", deadline)
            self.history.record("driver", phase="batch", pid=self.process.pid,
                                detail="its query completed a micro-batch")

    def _wait_for(self, line: str, seen: int, what: str, deadline: float) -> None:
        """Until the log holds more than `seen` lines starting `line`; RuntimeError if the driver exits first or
        the deadline passes."""
        assert self.process is not None
        while self._log_text().count(line) <= seen:
            if self.process.poll() is not None:
                self._exited()
                raise RuntimeError(f"the pipeline's driver exited with status {self.process.returncode} before "
                                   f"{what}:\n{self._tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the pipeline's driver started {START_TIMEOUT_S:.0f} s ago and not yet {what}:"
                                   f"\n{self._tail()}")
            time.sleep(0.2)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill_driver(self) -> int:
        """SIGKILL the driver's process group (its JVM, the executors, their Python workers); its pid."""
        process = self._running()
        self._kill_group(process)
        self.history.record("driver", phase="exit", pid=process.pid, status=process.returncode, detail="SIGKILL")
        return process.pid

    def executors(self) -> list[int]:
        """The pids of the driver's executor JVMs now, lowest first."""
        group = self._running().pid
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                if os.getpgid(int(entry.name)) == group and EXECUTOR_MAIN.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
        return sorted(found)

    def kill_executor(self) -> int:
        """SIGKILL one executor JVM (the lowest pid); its pid. RuntimeError if none runs."""
        running = self.executors()
        if not running:
            raise RuntimeError("the pipeline's driver has no executor running")
        os.kill(running[0], signal.SIGKILL)
        return running[0]

    def wait_executors(self, killed: int, count: int = 2) -> list[int]:
        """`count` executors running again, `killed` not among them; RuntimeError after EXECUTOR_TIMEOUT_S."""
        deadline = time.monotonic() + EXECUTOR_TIMEOUT_S
        while len(running := [pid for pid in self.executors() if pid != killed]) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(running)} executors running {EXECUTOR_TIMEOUT_S:.0f} s after one was killed")
            time.sleep(0.2)
        return running

    def stop(self) -> None:
        """Stop the driver cleanly (its stdin closed: the query stops, then the session); SIGKILL past
        STOP_TIMEOUT_S. Nothing of it is left running."""
        process = self.process
        if process is None or process.returncode is not None:
            return  # never started, or its end recorded already
        if process.poll() is not None:  # it ended on its own: its status and last lines say why
            self._exited()
            return
        with contextlib.suppress(OSError):
            assert process.stdin is not None
            process.stdin.close()
        try:
            process.wait(STOP_TIMEOUT_S)
            detail = "stopped"
        except subprocess.TimeoutExpired:
            detail = f"SIGKILL: not stopped within {STOP_TIMEOUT_S:.0f} s"
        self._kill_group(process)  # what it started and left (an executor's worker) goes with it
        self.history.record("driver", phase="stop", pid=process.pid, status=process.returncode, detail=detail)

    def _running(self) -> subprocess.Popen[bytes]:
        if self.process is None or self.process.poll() is not None:
            if self.process is not None:
                self._exited()
            raise RuntimeError("the pipeline's driver is not running")
        return self.process

    def _exited(self) -> None:
        assert self.process is not None
        self.history.record("driver", phase="exit", pid=self.process.pid, status=self.process.returncode,
                            detail=self._tail(3))

    @staticmethod
    def _kill_group(process: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()

    def _log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _tail(self, lines: int = 20) -> str:
        return "\n".join(self._log_text().splitlines()[-lines:])


def read_output(bootstrap: str, input_topic: str, topic: str, partitions: int, wanted: set[tuple[int, int]],
                pipeline: Pipeline, history: HistoryWriter, logger: logging.Logger) -> tuple[int, bool]:
    """`output` events for every row of the output (read_committed) once `wanted` (the input's final log:
    (partition, offset)) all have one, CATCH_UP_S passed or the driver ended on its own; the driver stopped, then
    on to the output's high watermarks. (rows read, whether the pipeline caught up)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "drill-pipeline-reader",
                         "enable.auto.commit": False, "isolation.level": "read_committed", "logger": logger})
    assigned = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
    consumer.assign(assigned)
    seen: set[tuple[int, int]] = set()
    rows = 0

    def consume() -> None:
        nonlocal rows
        for message in consumer.consume(num_messages=1000, timeout=0.5):
            if message.error() is not None:
                continue
            value = (message.value() or b"").decode()  # the sink writes every row with a value
            key = message.key()
            source = parse_output(value)
            history.record("output", topic=topic, partition=message.partition(), offset=message.offset(),
                           key=None if key is None else key.decode(), value=value, source_topic=input_topic,
                           source_partition=None if source is None else source[0],
                           source_offset=None if source is None else source[1],
                           source_value=None if source is None else source[2])
            rows += 1
            if source is not None:
                seen.add(source[:2])

    try:
        deadline = time.monotonic() + CATCH_UP_S
        while not wanted <= seen and time.monotonic() < deadline and pipeline.running():
            consume()
        caught_up = wanted <= seen
        pipeline.stop()
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
        deadline = time.monotonic() + READ_OUTPUT_S
        while True:
            positions = {tp.partition: tp.offset for tp in consumer.position(assigned)}
            if all(positions[p] >= end for p, end in ends.items() if end > 0):
                return rows, caught_up
            if time.monotonic() > deadline:
                raise TimeoutError(f"read the pipeline's output up to {positions} of high watermarks {ends} in "
                                   f"{READ_OUTPUT_S:.0f} s")
            consume()
    finally:
        consumer.close()


def driver(bootstrap: str, input_topic: str, output_topic: str, commit_log: str, checkpoint: str) -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import threading

    import pyspark
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.streaming import StreamingQueryListener

    from epoch_broker.spark import register

    os.environ.setdefault("SPARK_HOME", os.path.dirname(pyspark.__file__))  # local-cluster starts executors there
    spark = (SparkSession.builder.master(MASTER).appName("epoch-broker-drill-pipeline")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             # an executor SIGKILLed fails its tasks; they run again on the next one (Spark's default allows 4)
             .config("spark.task.maxFailures", "16")
             .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
             .config("spark.executor.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC").getOrCreate())
    register(spark)

    class Progress(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:  # PySpark's names
            pass

        def onQueryProgress(self, event: Any) -> None:
            print(f"{BATCH}{event.progress.batchId}: {event.progress.numInputRows} rows", flush=True)

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            print(f"pipeline: query terminated: {event.exception}", flush=True)

    spark.streams.addListener(Progress())
    value = F.col("value").cast("string")
    rows = (spark.readStream.format("kafka-epoch").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", input_topic).option("startingOffsets", "earliest")
            .option("kafka.isolation.level", "read_committed").load()
            .select(F.substring_index(value, "-", 1).alias("key"),
                    F.concat_ws(":", F.col("partition").cast("string"), F.col("offset").cast("string"),
                                F.upper(value)).alias("value")))
    query = (rows.writeStream.format("kafka-epoch").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", output_topic).option("exactlyOnce", "true").option("commitLogTopic", commit_log)
             .option("checkpointLocation", checkpoint).trigger(processingTime=TRIGGER).start())
    print(f"{READY} {query.id}", flush=True)

    def stop_at_eof() -> None:
        sys.stdin.read()
        query.stop()

    threading.Thread(target=stop_at_eof, daemon=True).start()
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    driver(*sys.argv[1:])
