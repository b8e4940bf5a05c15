"""Durability across failovers on real processes: what an idempotent acks=all producer was told is written
is all there, once, in order, after leaders were SIGKILLed under load (docs/cluster.md: elections, acks=all
with min.insync.replicas; KIP-101 truncation keeps followers from diverging).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from epoch_broker.protocol.errors import ErrorCode

from tests.cluster.support import Cluster, create_topic, list_offset, partition_state, wait_for

pytestmark = pytest.mark.slow

TOPIC = "durable"
PARTITIONS = 3
FAILOVERS = 3


@dataclass
class NumberedProducer:
    """An idempotent acks=all confluent-kafka producer writing "<partition>:<n>" to each partition in turn,
    n counting up per partition, in a thread, until stopped; the delivery callbacks are kept."""

    bootstrap: str
    acked: dict[int, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))  # p: (n, offset)
    failed: list[tuple[int, int, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # fatal errors reported by the client
    sent: list[int] = field(default_factory=lambda: [0] * PARTITIONS)
    stop: threading.Event = field(default_factory=threading.Event)
    producer: Any = None

    def acked_count(self) -> int:
        return sum(len(records) for records in self.acked.values())

    def _delivered(self, error: KafkaError | None, message: Any) -> None:
        partition, number = (int(part) for part in message.value().decode().split(":"))
        if error is None:
            self.acked[partition].append((number, message.offset()))
        else:
            self.failed.append((partition, number, str(error)))

    def _error(self, error: KafkaError) -> None:
        if error.fatal():
            self.errors.append(str(error))

    def run(self) -> None:
        self.producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5, "message.timeout.ms": 60000,
                                  "topic.metadata.refresh.interval.ms": 1000, "error_cb": self._error})
        n = 0
        while not self.stop.is_set():
            partition = n % PARTITIONS
            value = f"{partition}:{self.sent[partition]}".encode()
            try:
                self.producer.produce(TOPIC, value, partition=partition, on_delivery=self._delivered)
            except BufferError:
                self.producer.poll(0.1)
                continue
            self.sent[partition] += 1
            n += 1
            self.producer.poll(0)
            time.sleep(0.002)  # a few hundred records a second: a steady load, not a flood on two cores


@pytest.mark.cluster(brokers=3)
async def test_every_acknowledged_record_survives_three_leader_sigkills_once_and_in_order(cluster: Cluster) -> None:
    """acks=all with min.insync.replicas=2 and an idempotent producer: after three SIGKILL failovers (kill the
    leader, new leader in Metadata, restart, back in the ISR), every acknowledged record is consumed exactly
    once, at the offset it was acknowledged with, in order per partition, with nothing in between."""
    await create_topic(cluster, TOPIC, partitions=PARTITIONS, configs={"min.insync.replicas": "2"})
    writer = NumberedProducer(cluster.bootstrap)
    thread = threading.Thread(target=writer.run, name="numbered-producer")
    thread.start()
    timings: list[tuple[int, int, float, float]] = []  # (partition, killed node, to new leader, to full ISR)
    try:
        await wait_for(lambda: writer.acked_count() >= 200, what="the first acknowledgements", timeout=20)
        for failover in range(FAILOVERS):
            partition = failover % PARTITIONS
            before = (await cluster.metadata())[(TOPIC, partition)]
            cluster.kill(before.leader)
            killed_at = time.monotonic()
            await wait_for(lambda p=partition, old=before: partition_state(
                cluster, TOPIC, p, lambda s: s.leader not in (old.leader, -1) and s.leader_epoch > old.leader_epoch),
                what=f"a new leader of {TOPIC}-{partition}", timeout=15)
            elected_at = time.monotonic()
            cluster.restart(before.leader)
            await wait_for(lambda: _all_isr_full(cluster), what="every ISR back to 3", timeout=20)
            timings.append((partition, before.leader, elected_at - killed_at, time.monotonic() - killed_at))
            acked = writer.acked_count()
            await wait_for(lambda a=acked: writer.acked_count() >= a + 100, what="acknowledgements after the failover",
                           timeout=20)
    finally:
        writer.stop.set()
        await asyncio.to_thread(thread.join, 10)
    assert writer.producer is not None
    assert await asyncio.to_thread(writer.producer.flush, 60) == 0
    assert writer.errors == [] and writer.failed == []

    ends = await _high_watermarks(cluster)
    consumed = await asyncio.to_thread(_consume_all, cluster.bootstrap, ends)
    for partition in range(PARTITIONS):
        numbers = [number for number, _ in consumed[partition]]
        # All were acknowledged (no failure above), so the log holds exactly 0..sent-1, each once, in order.
        assert numbers == list(range(writer.sent[partition])), _first_difference(numbers, writer.sent[partition])
        at_offset = {offset: number for number, offset in consumed[partition]}
        assert all(at_offset.get(offset) == number for number, offset in writer.acked[partition])
    print(f"acked {writer.acked_count()} records ({writer.sent}); failovers (partition, killed node, "
          "s to the new leader, s to the full ISR): " + ", ".join(f"({p}, {n}, {e:.2f}, {f:.2f})"
                                                                    for p, n, e, f in timings))


async def _high_watermarks(cluster: Cluster) -> dict[int, int]:
    """LATEST of every partition, asked of its leader (the internal client: exact answers, no client retries)."""
    partitions = await cluster.metadata()
    ends = {}
    for p in range(PARTITIONS):
        async with cluster.client(partitions[(TOPIC, p)].leader) as client:
            answer = await list_offset(client, TOPIC, 7, partition=p)
        assert answer.error_code == ErrorCode.NONE, answer
        ends[p] = answer.offset
    return ends


async def _all_isr_full(cluster: Cluster) -> bool:
    partitions = await cluster.metadata()
    return all(len(partitions[(TOPIC, p)].isr) == 3 for p in range(PARTITIONS))


def _consume_all(bootstrap: str, ends: dict[int, int]) -> dict[int, list[tuple[int, int]]]:
    """Every record of every partition from the beginning up to its high watermark (`ends`): partition ->
    [(n, offset)]."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "durability-check",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        records: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}
        positions = dict.fromkeys(range(PARTITIONS), 0)
        deadline = time.monotonic() + 30
        while any(positions[p] < ends[p] for p in range(PARTITIONS)):
            assert time.monotonic() < deadline, f"consumed up to {positions}, high watermarks {ends}"
            for message in consumer.consume(num_messages=1000, timeout=1.0):
                assert message.error() is None, message.error()
                partition, number = (int(part) for part in message.value().decode().split(":"))
                assert partition == message.partition()
                records[partition].append((number, message.offset()))
                positions[partition] = message.offset() + 1
        return records
    finally:
        consumer.close()


def _first_difference(numbers: list[int], sent: int) -> str:
    for index, number in enumerate(numbers):
        if number != index:
            return f"at position {index}: {numbers[max(0, index - 3):index + 4]} (sent {sent}, consumed {len(numbers)})"
    return f"consumed {len(numbers)} of {sent}"
