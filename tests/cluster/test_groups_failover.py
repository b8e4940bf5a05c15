"""Consumer groups across a coordinator failover, on real processes: `__consumer_offsets` is replicated like any
topic, so when the broker coordinating a group is SIGKILLed, the new leader of the group's offsets partition
loads the group and its committed offsets (with their leader epochs, KIP-320) and the consumer carries on.
"""

from __future__ import annotations

import signal
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import offset_fetch
from tests.cluster.support import Cluster, coordinator_of, create_topic
from tests.helpers import not_yet, wait_for, wait_for_sync

pytestmark = pytest.mark.slow

TOPIC = "orders"
GROUP = "billing"
PARTITIONS = 3
RECORDS = 300


def produce_numbered(bootstrap: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for n in range(start, start + count):
        producer.produce(TOPIC, value=str(n).encode(), partition=n % PARTITIONS)
    assert producer.flush(30) == 0


def consume(consumer: Any, seen: list[int], until: int, timeout_s: float = 30.0) -> None:
    """Poll until `until` records were seen, committing each synchronously (at-least-once)."""
    def read() -> object:
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            seen.append(int(message.value()))
            consumer.commit(message=message, asynchronous=False)
        return len(seen) >= until or not_yet(f"consumed {len(seen)}")

    wait_for_sync(read, timeout_s, interval=0, what=f"{until} records consumed")


async def committed(cluster: Cluster, node: int) -> dict[int, tuple[int, int]]:
    """partition -> (committed offset, committed leader epoch), asked of the group's coordinator; waits while
    it is still loading the group (COORDINATOR_LOAD_IN_PROGRESS, which clients retry)."""
    return await wait_for(lambda: _committed_once(cluster, node), what=f"committed offsets from node {node}")


async def _committed_once(cluster: Cluster, node: int) -> dict[int, tuple[int, int]] | None:
    request = offset_fetch.REQUEST
    async with cluster.client(node) as client:
        answer = await client.request(offset_fetch.API, 8, request.cls(groups=[request.OffsetFetchRequestGroup(
            group_id=GROUP, topics=[request.OffsetFetchRequestTopics(
                name=TOPIC, partition_indexes=list(range(PARTITIONS)))])]))
    (group,) = answer.groups
    if group.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
        return None
    assert group.error_code == ErrorCode.NONE, group
    return {p.partition_index: (p.committed_offset, p.committed_leader_epoch)
            for t in group.topics for p in t.partitions}


async def test_a_group_keeps_its_committed_offsets_and_consumes_on_when_its_coordinator_is_sigkilled(
        cluster: Cluster) -> None:
    """The coordinator moves with the leadership of the group's `__consumer_offsets` partition; the group's
    committed offsets and their leader epochs survive the SIGKILL of the old coordinator."""
    await create_topic(cluster, TOPIC, partitions=PARTITIONS)
    produce_numbered(cluster.bootstrap, 0, RECORDS // 2)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 6000})
    seen: list[int] = []
    try:
        consumer.subscribe([TOPIC])
        consume(consumer, seen, RECORDS // 2)
        old = await coordinator_of(cluster, 0, GROUP)
        assert old >= 0
        before = await committed(cluster, old)
        assert sum(offset for offset, _ in before.values()) == RECORDS // 2
        assert all(epoch >= 0 for _, epoch in before.values())  # KIP-320: the epoch of the consumed record

        cluster.kill(old, signal.SIGKILL)
        survivor = next(n for n in range(3) if n != old)
        new = await wait_for(lambda: _moved(cluster, survivor, old), timeout=15,
                             what="a new coordinator for the group")
        assert await committed(cluster, new) == before

        produce_numbered(cluster.bootstrap, RECORDS // 2, RECORDS // 2)
        consume(consumer, seen, RECORDS)
    finally:
        consumer.close()
    assert set(seen) == set(range(RECORDS))  # at-least-once: a rebalance may redeliver, nothing is lost
    after = await committed(cluster, await coordinator_of(cluster, survivor, GROUP))
    assert sum(offset for offset, _ in after.values()) == RECORDS
    assert all(after[p][1] >= before[p][1] for p in range(PARTITIONS))


async def _moved(cluster: Cluster, asked: int, old: int) -> int | None:
    node = await coordinator_of(cluster, asked, GROUP)
    return node if node not in (-1, old) else None

