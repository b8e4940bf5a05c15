"""A KIP-848 consumer group (`group.protocol=consumer`) across a SIGKILL of its coordinator, on real processes.

The group's records (member metadata, target and current assignments, epochs) are in `__consumer_offsets`,
replicated three times; when the broker coordinating the group is killed, the new leader of the group's offsets
partition replays them and the members carry on: every record is read at least once, no partition is held by two
members at once (intervals from on_assign to on_revoke/on_lost, on one clock: the consumers are threads of this
process), and the committed offsets with their leader epochs (KIP-320) are the ones the consumers continue from.
A member joining afterwards is then assigned by the new coordinator from the state it replayed.
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.cluster.support import Cluster, coordinator_of, create_topic, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.cluster(overrides={"group.consumer.session.timeout.ms": "10000"})]

TOPIC = "payments"
GROUP = "ledger"
PARTITIONS = 6
BATCH = 300  # records before the kill, as many after it, and as many after a fourth member joined


class Member:
    """A consumer-protocol consumer polled by its own thread, committing each record synchronously before it counts
    it (a record whose commit fails is read again by whoever owns the partition next)."""

    def __init__(self, bootstrap: str, name: str) -> None:
        self.name = name
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "group.protocol": "consumer",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
        self.lock = threading.Lock()
        self.read: list[tuple[float, int, int]] = []  # (when, partition, value)
        self.callbacks: list[tuple[float, str, int]] = []  # (when, "assign" | "revoke", partition)
        self.owned: set[int] = set()
        self._stop = threading.Event()
        self._closed = threading.Event()
        self.consumer.subscribe([TOPIC], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked)
        threading.Thread(target=self._run, daemon=True).start()

    def _assigned(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        with self.lock:
            for tp in partitions:
                self.owned.add(tp.partition)
                self.callbacks.append((time.monotonic(), "assign", tp.partition))

    def _revoked(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        with self.lock:
            for tp in partitions:
                self.owned.discard(tp.partition)
                self.callbacks.append((time.monotonic(), "revoke", tp.partition))

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                message = self.consumer.poll(0.1)
                if message is None or message.error() is not None:
                    continue
                try:
                    self.consumer.commit(message=message, asynchronous=False)
                except KafkaException:
                    continue  # the coordinator moved, or the partition did: read again later
                with self.lock:
                    self.read.append((time.monotonic(), int(message.partition() or 0),
                                      int(bytes(message.value() or b"0"))))
        finally:
            self.consumer.close()
            closed_at = time.monotonic()
            with self.lock:  # what it still held ends with the close
                self.callbacks += [(closed_at, "revoke", p) for p in sorted(self.owned)]
                self.owned.clear()
            self._closed.set()

    def close(self) -> None:
        self._stop.set()
        assert self._closed.wait(30), f"{self.name} did not close"

    def values(self, since: float = 0.0) -> set[int]:
        with self.lock:
            return {value for when, _, value in self.read if when >= since}

    def owns(self) -> frozenset[int]:
        with self.lock:
            return frozenset(self.owned)


def produce_numbered(bootstrap: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for n in range(start, start + count):
        producer.produce(TOPIC, value=str(n).encode(), partition=n % PARTITIONS)
    assert producer.flush(60) == 0


def committed(admin: AdminClient) -> dict[int, tuple[int, int]]:
    """partition -> (committed offset, its leader epoch or -1), as AdminClient's list_consumer_group_offsets
    answers."""
    (future,) = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)]).values()
    return {tp.partition: (tp.offset, -1 if tp.leader_epoch is None else tp.leader_epoch)
            for tp in future.result(15).topic_partitions if tp.topic == TOPIC}


def overlaps(members: list[Member]) -> list[str]:
    """Each time one partition was held by two members at once (their assign..revoke intervals intersect)."""
    intervals: dict[int, list[tuple[float, float, str]]] = {}
    for member in members:
        opened: dict[int, float] = {}
        for when, what, partition in sorted(member.callbacks):
            if what == "assign":
                opened[partition] = when
            elif partition in opened:
                intervals.setdefault(partition, []).append((opened.pop(partition), when, member.name))
    return [f"partition {partition}: {later} got it {end - start:.3f} s before {earlier} let it go"
            for partition, spans in sorted(intervals.items())
            for i, (_, end, earlier) in enumerate(sorted(spans))
            for start, _, later in sorted(spans)[i + 1:] if start < end]


async def test_a_consumer_group_reads_everything_and_keeps_its_offsets_when_its_coordinator_is_sigkilled(
        cluster: Cluster) -> None:
    await create_topic(cluster, TOPIC, partitions=PARTITIONS, replication_factor=3)
    produce_numbered(cluster.bootstrap, 0, BATCH)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    members = [Member(cluster.bootstrap, f"member-{i}") for i in range(3)]
    try:
        def everyone_reads(values: set[int]) -> bool:
            return values <= set().union(*(m.values() for m in members))

        await wait_for(lambda: everyone_reads(set(range(BATCH))), timeout=60, what="the first batch read")
        await wait_for(lambda: sorted(p for m in members for p in m.owns()) == list(range(PARTITIONS))
                       and all(len(m.owns()) == 2 for m in members), timeout=30, what="two partitions each")
        assignments = [m.owns() for m in members]
        before = committed(admin)
        assert sum(offset for offset, _ in before.values()) == BATCH, before
        assert all(epoch >= 0 for _, epoch in before.values()), before

        old = await coordinator_of(cluster, 0, GROUP)
        assert old >= 0
        cluster.kill(old, signal.SIGKILL)
        killed_at = time.monotonic()
        survivor = next(n for n in range(3) if n != old)

        async def moved() -> bool:
            return await coordinator_of(cluster, survivor, GROUP) not in (-1, old)

        await wait_for(moved, timeout=20, what="a new coordinator for the group")
        # The new coordinator answers with the offsets and leader epochs committed before the kill.
        assert await wait_for(lambda: _or_none(committed, admin), timeout=30, what="committed offsets") == before

        produce_numbered(cluster.bootstrap, BATCH, BATCH)
        await wait_for(lambda: everyone_reads(set(range(2 * BATCH))), timeout=60, what="the second batch read")
        # The members continued from the committed offsets, with the partitions they held.
        assert not set().union(*(m.values(since=killed_at) for m in members)) & set(range(BATCH))
        assert [m.owns() for m in members] == assignments

        def all_committed() -> dict[int, tuple[int, int]] | None:
            offsets = committed(admin)
            return offsets if sum(offset for offset, _ in offsets.values()) == 2 * BATCH else None

        after = await wait_for(all_committed, timeout=30, what="every record committed")
        assert after is not None
        assert all(after[p][1] >= before[p][1] for p in range(PARTITIONS)), after

        # The new coordinator rebalances from the replayed state: a fourth member gets partitions only once
        # their owners let them go, and reads what follows.
        members.append(Member(cluster.bootstrap, "member-3"))
        await wait_for(lambda: sorted(p for m in members for p in m.owns()) == list(range(PARTITIONS))
                       and all(m.owns() for m in members), timeout=30, what="four members sharing the partitions")
        produce_numbered(cluster.bootstrap, 2 * BATCH, BATCH)
        await wait_for(lambda: everyone_reads(set(range(3 * BATCH))), timeout=60, what="the third batch read")
    finally:
        for member in members:
            member.close()
    assert not overlaps(members), overlaps(members)


def _or_none(function: Any, *args: Any) -> Any:
    """`function(*args)`, or None while the coordinator is still loading (AdminClient raises)."""
    try:
        return function(*args)
    except KafkaException:
        return None
