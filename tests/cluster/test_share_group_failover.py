"""A share group (KIP-932) across SIGKILLs of its partition's leader and of its coordinator, on real processes,
with confluent-kafka's ShareConsumer.

The share-partition's state (start offset, acknowledged and archived records, delivery counts) is durable at the
group's coordinator (broker/groups/share_state.py), written before a fetch or an acknowledgement is answered. So:
- after the leader is killed, the new leader reads it: no accepted record is delivered again, the records that
  were delivered but not acknowledged come again with their delivery count moved on (2), and a rejected one never;
- after the coordinator is killed, its successor replays the state from `__consumer_offsets`: the same holds;
- a killed broker restarted from its data directory rejoins, and later records are delivered once, at count 1.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from tests.cluster.support import Cluster, coordinator_of, create_topic, wait_for
from tests.helpers import wait_for_sync

pytestmark = [pytest.mark.slow, pytest.mark.cluster(overrides={
    "group.share.heartbeat.interval.ms": "500", "group.share.session.timeout.ms": "10000",
    "offsets.topic.replication.factor": "3"})]

TOPIC = "work-items"
GROUP = "workers"


def produce_numbered(bootstrap: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for n in range(start, start + count):
        producer.produce(TOPIC, value=str(n).encode())
        if (n + 1) % 10 == 0:
            producer.flush(30)  # log batches of ten
    assert producer.flush(60) == 0


@contextmanager
def share_consumer(bootstrap: str) -> Iterator[ShareConsumer]:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                              "share.acknowledgement.mode": "explicit", "max.poll.records": 25})
    consumer.subscribe([TOPIC])
    try:
        yield consumer
    finally:
        consumer.close()


def poll_until(consumer: ShareConsumer, wanted: int, accept: Any, what: str) -> dict[int, int]:
    """Poll (acknowledging each record with `accept(value)`'s type, committing each poll's acknowledgements) until
    `wanted` records came, or until a poll brought a record `accept` leaves unacknowledged (None: it is held, and
    an explicit-mode consumer polls no more); value -> delivery count."""
    got: dict[int, int] = {}
    holding = False

    def more() -> bool:
        nonlocal holding
        acknowledged = False
        for message in consumer.poll(0.3) or []:
            if message.error() is not None:
                continue
            value = int(bytes(message.value()))
            assert value not in got, f"{value} delivered twice to one member"
            got[value] = message.delivery_count()
            kind = accept(value)
            if kind is None:
                holding = True
            else:
                consumer.acknowledge(message, kind)
                acknowledged = True
        if acknowledged:
            consumer.commit_sync(30)
        return holding or len(got) >= wanted

    wait_for_sync(more, timeout=90, interval=0, what=what)
    return got


async def test_a_share_groups_state_survives_sigkills_of_the_leader_and_of_the_coordinator(cluster: Cluster) -> None:
    await create_topic(cluster, TOPIC, partitions=1, replication_factor=3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resource = ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("share.record.lock.duration.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    produce_numbered(cluster.bootstrap, 0, 100)

    # A first member accepts 0-59, rejects 60-64, and holds what else its last poll brought, unacknowledged.
    def first_kind(value: int) -> Any:
        return AcknowledgeType.ACCEPT if value < 60 else AcknowledgeType.REJECT if value < 65 else None

    with share_consumer(cluster.bootstrap) as first:
        delivered = poll_until(first, 100, first_kind, "the first member holding records")
        held = {value for value in delivered if value >= 65}
        assert set(delivered.values()) == {1} and set(range(65)) <= set(delivered) and held, delivered
        leader = cluster.leader(TOPIC, 0)
        cluster.kill(leader, signal.SIGKILL)
        new_leader = cluster.leader(TOPIC, 0, other_than=leader)
        assert new_leader != leader
    # The new leader read the durable state: the held records come again at their second delivery, the rest of
    # 65-99 at their first or second (the client may have acquired more than its polls returned); none below 65.
    with share_consumer(cluster.bootstrap) as second:
        again = poll_until(second, 35, lambda value: AcknowledgeType.ACCEPT, "the held records again")
        assert sorted(again) == list(range(65, 100)), again
        assert {again[value] for value in held} == {2} and set(again.values()) <= {1, 2}, again
        cluster.restart(leader, hard=True)  # SIGKILLed already: it starts from its data directory

        coordinator = await coordinator_of(cluster, new_leader, GROUP)
        assert coordinator >= 0
        cluster.kill(coordinator, signal.SIGKILL)
        survivor = next(n for n in range(3) if n != coordinator)
        await wait_for(lambda: _moved(cluster, survivor, coordinator), timeout=30, what="a new coordinator")
        produce_numbered(cluster.bootstrap, 100, 50)
        later = poll_until(second, 50, lambda value: AcknowledgeType.ACCEPT, "the records after the kills")
        assert later == {value: 1 for value in range(100, 150)}
    cluster.restart(coordinator, hard=True)
    # Nothing is left: every record was accepted or rejected once, and the state says so after both kills.
    produce_numbered(cluster.bootstrap, 150, 10)
    with share_consumer(cluster.bootstrap) as third:
        assert poll_until(third, 10, lambda value: AcknowledgeType.ACCEPT, "the last ten") == {
            value: 1 for value in range(150, 160)}


async def _moved(cluster: Cluster, node: int, old: int) -> bool:
    return await coordinator_of(cluster, node, GROUP) not in (-1, old)
