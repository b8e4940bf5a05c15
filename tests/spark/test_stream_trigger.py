"""minOffsetsPerTrigger and maxTriggerDelay of the `kafka-epoch` stream (issue 31 item 4), in real Spark streaming
queries against a broker process: a trigger with too few offsets waiting runs no batch, until enough arrive (then
one batch reads them all) or maxTriggerDelay passes; maxOffsetsPerTrigger caps what runs; Trigger.AvailableNow
reads everything without waiting for the minimum. The options' parsing and the skip decision, clock by clock:
test_planning.py."""

from __future__ import annotations

import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import BrokerProcess, holds_sync
from tests.spark.support import create, produce, stream, wait_until

pytestmark = pytest.mark.slow

TRIGGER = "200 milliseconds"  # a trigger every 0.2 s: a skipped one shows as no batch over many triggers
QUIET = 3.0  # how long no batch may run while fewer offsets than the minimum wait (about 15 triggers)


class Batches:
    """A foreachBatch sink: each micro-batch's rows (partition, offset, value), in the order they ran."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[int, int, bytes]]] = []
        self.lock = threading.Lock()

    def __call__(self, frame: Any, batch_id: int) -> None:
        rows = sorted((r.partition, r.offset, bytes(r.value)) for r in frame.collect())
        if rows:  # a batch Spark runs with no rows (none here) would not be one the minimum let through
            with self.lock:
                self.batches.append(rows)

    def sizes(self) -> list[int]:
        with self.lock:
            return [len(rows) for rows in self.batches]

    def rows(self) -> list[tuple[int, int, bytes]]:
        with self.lock:
            return sorted(row for rows in self.batches for row in rows)


def start(spark: Any, broker: BrokerProcess, topic: str, checkpoint: Path, batches: Batches, **options: str) -> Any:
    return (stream(spark, broker.bootstrap, subscribe=topic, **options).writeStream.foreachBatch(batches)
            .option("checkpointLocation", str(checkpoint)).trigger(processingTime=TRIGGER).start())


def values(prefix: str, count: int) -> list[bytes]:
    return [b"%s%d" % (prefix.encode(), i) for i in range(count)]


def test_a_micro_batch_waits_for_min_offsets_per_trigger_then_reads_them_all_at_once(
        spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    topic = "trigger-min"
    create(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, values("a", 10), 2)
    batches = Batches()
    query = start(spark, broker, topic, tmp_path / "checkpoint", batches, minOffsetsPerTrigger="10",
                  maxTriggerDelay="10m")
    try:
        wait_until(lambda: batches.sizes() == [10], what="the first batch (the first trigger always runs)")
        produce(broker.bootstrap, topic, values("b", 6), 2)  # 3 in each partition: 6 in all, fewer than 10
        holds_sync(lambda: batches.sizes() == [10], QUIET, what="no batch while 6 offsets wait")
        produce(broker.bootstrap, topic, values("c", 4), 2)  # 10 in all, across the two partitions
        wait_until(lambda: batches.sizes() == [10, 10], what="one batch with the 10 waiting records")
        assert query.exception() is None
    finally:
        query.stop()
    assert sorted(value for _, _, value in batches.batches[1]) == sorted(values("b", 6) + values("c", 4))
    assert [(p, o) for p, o, _ in batches.rows()] == [(p, o) for p in range(2) for o in range(10)]


def trigger_times(query: Any) -> list[float]:
    """When each trigger that read rows started (its progress report's timestamp), in seconds."""
    return [datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
            for p in query.recentProgress if p["numInputRows"]]


def test_after_max_trigger_delay_a_smaller_batch_runs(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    topic, delay = "trigger-delay", 4.0
    create(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, values("a", 5), 2)
    batches = Batches()
    query = start(spark, broker, topic, tmp_path / "checkpoint", batches, minOffsetsPerTrigger="1000",
                  maxTriggerDelay=f"{int(delay * 1000)}ms")
    try:
        wait_until(lambda: batches.sizes() == [5], what="the first batch")
        produce(broker.bootstrap, topic, values("b", 3), 2)
        wait_until(lambda: batches.sizes() == [5, 3], timeout=60, what="a batch of 3 once the delay passed")
        assert query.exception() is None
        # the progress report of a micro-batch is posted after its sink saw the rows: wait for it too
        wait_until(lambda: len(trigger_times(query)) == 2, what="both batches' progress reports")
        first, second = trigger_times(query)
    finally:
        query.stop()
    # The clock restarts when a trigger is let through, just after its start: the next may start a little
    # before `delay` has passed by the progress timestamps, never much before.
    assert second - first >= delay - 0.5, (first, second)


def test_min_offsets_per_trigger_with_max_offsets_per_trigger_waits_for_the_min_and_caps_at_the_max(
        spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    topic = "trigger-min-max"
    create(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, values("a", 4), 2)
    batches = Batches()
    query = start(spark, broker, topic, tmp_path / "checkpoint", batches, minOffsetsPerTrigger="10",
                  maxOffsetsPerTrigger="16", maxTriggerDelay="10m")
    try:
        wait_until(lambda: batches.sizes() == [4], what="the first batch")
        produce(broker.bootstrap, topic, values("b", 8), 2)
        holds_sync(lambda: batches.sizes() == [4], QUIET, what="no batch while 8 offsets wait")
        produce(broker.bootstrap, topic, values("c", 24), 2)  # 32 waiting (16 a partition): two batches of 16
        wait_until(lambda: batches.sizes() == [4, 16, 16], what="the 32 waiting records in two batches of 16")
        produce(broker.bootstrap, topic, values("d", 5), 2)
        holds_sync(lambda: batches.sizes() == [4, 16, 16], QUIET, what="no batch while 5 offsets wait")
        assert query.exception() is None
    finally:
        query.stop()
    assert [(p, o) for p, o, _ in batches.rows()] == [(p, o) for p in range(2) for o in range(18)]


def test_trigger_available_now_reads_everything_without_waiting_for_the_minimum(
        spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    topic = "trigger-available-now"
    create(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, values("a", 24), 2)
    batches = Batches()
    query = (stream(spark, broker.bootstrap, subscribe=topic, minOffsetsPerTrigger="10", maxOffsetsPerTrigger="10")
             .writeStream.foreachBatch(batches).option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    # capped by the max; the last 4 are read although fewer than the minimum (the query would end without them)
    assert batches.sizes() == [10, 10, 4]
    assert [(p, o) for p, o, _ in batches.rows()] == [(p, o) for p in range(2) for o in range(12)]
