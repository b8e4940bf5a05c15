"""Streaming reads through `kafka-epoch` on a three-broker cluster of real processes (issue 11): an unclean
election that truncates records a query already read, and a leader SIGKILLed while a query reads.

The truncation is tests/cluster/test_truncation.py's scenario: m1..m6 read at offsets 0..5 in epoch e0, then B,
which has only m1..m3, is elected uncleanly (epoch e1) and x1..x5 land at 3..7. The query's stored position,
offset 6, is then still inside the log (log start 0, high watermark 8): a check of offsets alone finds nothing
wrong and would go on at 6, skipping x1..x3. Only the epoch check (epoch e0 now ends at 3) sees the truncation.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException

from tests.cluster.support import (
    NumberedProducer,
    create_topic,
    list_offset,
    partition_state,
    start_cluster,
    wait_for,
)
from tests.cluster.truncation_scenario import KEPT, NEW, OLD, TOPIC, elect_b_uncleanly, write_with_an_unreplicated_tail
from tests.spark.support import Collected, stream, wait_until

pytestmark = pytest.mark.slow


def read_available(spark: Any, bootstrap: str, topic: str, checkpoint: Path, fail_on_data_loss: bool
                   ) -> tuple[Collected, Exception | None]:
    """One Trigger.AvailableNow run from `checkpoint`: the rows it read and how it ended."""
    collected = Collected()
    query = (stream(spark, bootstrap, subscribe=topic, failOnDataLoss=str(fail_on_data_loss).lower())
             .writeStream.foreachBatch(collected).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination(120)
    except StreamingQueryException as exc:
        return collected, exc
    return collected, None


def test_an_unclean_election_below_the_stored_offset_is_caught_by_the_epoch_check(spark: Any,
                                                                                   tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path, brokers=3)
    try:
        old_epoch = asyncio.run(write_with_an_unreplicated_tail(cluster))
        checkpoint = tmp_path / "checkpoint"
        collected, error = read_available(spark, cluster.bootstrap, TOPIC, checkpoint, fail_on_data_loss=True)
        assert error is None
        assert collected.snapshot() == [(TOPIC, 0, offset, value) for offset, value in enumerate(OLD)]

        epochs = asyncio.run(elect_b_uncleanly(cluster, old_epoch))

        async def offsets_on_the_new_leader() -> tuple[int, int]:
            async with cluster.client(1) as client:
                return ((await list_offset(client, TOPIC, 7, timestamp=-2)).offset,
                        (await list_offset(client, TOPIC, 7)).offset)

        log_start, high_watermark = asyncio.run(offsets_on_the_new_leader())
        assert log_start <= len(OLD) <= high_watermark == KEPT + len(NEW)  # offsets alone: nothing looks wrong

        collected, error = read_available(spark, cluster.bootstrap, TOPIC, checkpoint, fail_on_data_loss=True)
        assert error is not None and collected.snapshot() == []
        assert (f"{TOPIC}-0: the stored offset {len(OLD)} (leader epoch {epochs.old}) is past the end of that "
                f"epoch in the leader's log: the log diverged at offset {KEPT}") in str(error)

        collected, error = read_available(spark, cluster.bootstrap, TOPIC, checkpoint, fail_on_data_loss=False)
        assert error is None
        assert collected.snapshot() == [(TOPIC, 0, KEPT + i, value) for i, value in enumerate(NEW)]
    finally:
        cluster.stop()


def test_a_leader_sigkilled_mid_stream_loses_and_repeats_nothing(spark: Any, tmp_path: Path) -> None:
    topic, partitions = "stream-failover", 2
    cluster = start_cluster(tmp_path, brokers=3)
    writer = NumberedProducer(cluster.bootstrap, topic, partitions)
    collected = Collected()
    try:
        asyncio.run(create_topic(cluster, topic, partitions=partitions, configs={"min.insync.replicas": "2"}))
        writer.start()
        query = (stream(spark, cluster.bootstrap, subscribe=topic).writeStream.foreachBatch(collected)
                 .option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(processingTime="200 milliseconds").start())
        try:
            wait_until(lambda: len(collected.snapshot()) >= 200, what="rows before the failover")
            before = asyncio.run(cluster.metadata())[(topic, 0)]
            cluster.kill(before.leader)
            asyncio.run(wait_for(lambda: partition_state(
                cluster, topic, 0, lambda s: s.leader not in (before.leader, -1)), what="a new leader", timeout=20))
            acked = writer.acked_count()
            wait_until(lambda: writer.acked_count() >= acked + 200, what="acknowledgements after the failover")
            asyncio.run(writer.stop_sending())
            asyncio.run(writer.flush_and_check())
            total = sum(writer.sent)
            wait_until(lambda: len(collected.snapshot()) >= total, what=f"all {total} records read", timeout=90)
            assert query.exception() is None
        finally:
            query.stop()
    finally:
        asyncio.run(writer.stop_sending())
        cluster.stop()
    for partition in range(partitions):
        read = sorted((offset, value.decode()) for t, p, offset, value in collected.snapshot() if p == partition)
        # every record the idempotent producer wrote, each once, at the offset it was acknowledged with
        assert [value for _, value in read] == [f"{partition}:{n}" for n in range(writer.sent[partition])]
        assert sorted(writer.acked[partition]) == [(int(v.split(":")[1]), o) for o, v in read]
