"""Replacing a dead broker under load (issue 17.7; KIP-455): a replica of a partition is SIGKILLed for good,
`epoch-broker admin reassign` moves the partition to a new broker while an idempotent acks=all producer keeps
writing (min.insync.replicas 2), the new replica catches up and joins the ISR, the dead one leaves the replica
set, `admin remove-broker` unregisters it, and every acknowledged record is there once, in order."""

from __future__ import annotations

import asyncio

import pytest

from epoch_broker.drill import admin
from tests.cluster.support import (
    Cluster,
    NumberedProducer,
    consume_numbered,
    create_topic,
    disk_log_end,
    first_difference,
    list_offset,
    wait_for,
    wait_state,
)

pytestmark = pytest.mark.slow

TOPIC = "moved"
DEAD, NEW = 2, 3


@pytest.mark.cluster(brokers=4)
async def test_a_dead_broker_is_replaced_under_an_acks_all_load_with_nothing_lost(cluster: Cluster) -> None:
    await create_topic(cluster, TOPIC, assignments=[[0, 1, DEAD]], configs={"min.insync.replicas": "2"})
    writer = NumberedProducer(cluster.bootstrap, TOPIC, 1).start()
    controller = cluster.controller
    try:
        await wait_for(lambda: writer.acked_count() >= 200, what="the first acknowledgements", timeout=20)
        cluster.kill(DEAD)  # gone for good
        await wait_state(cluster, TOPIC, lambda s: DEAD not in s.isr, what=f"broker {DEAD} out of the ISR",
                         timeout=15)
        assert await admin.reassign(controller, TOPIC, 0, [0, 1, NEW]) == "started"
        done = await wait_state(cluster, TOPIC, lambda s: s.replicas == (0, 1, NEW) and sorted(s.isr) == [0, 1, NEW],
                                what="the partition on 0, 1 and the new broker, all in the ISR", timeout=30)
        assert await admin.reassignments(controller) == []
        acked = writer.acked_count()
        await wait_for(lambda: writer.acked_count() >= acked + 200, what="acknowledgements after the move",
                       timeout=20)
        assert await admin.remove_broker(controller, DEAD) == "removed"
        await wait_for(lambda: _unlisted(cluster, DEAD), what=f"broker {DEAD} no longer listed", timeout=15)
    finally:
        await writer.stop_sending()
    await writer.flush_and_check()

    async with cluster.client(done.leader) as client:
        end = (await list_offset(client, TOPIC, 7)).offset
    consumed = (await asyncio.to_thread(consume_numbered, cluster.bootstrap, TOPIC, {0: end}))[0]
    numbers = [number for number, _ in consumed]
    assert numbers == list(range(writer.sent[0])), first_difference(numbers, writer.sent[0])
    at_offset = {offset: number for number, offset in consumed}
    assert all(at_offset.get(offset) == number for number, offset in writer.acked[0])
    await wait_for(lambda: disk_log_end(cluster, NEW, TOPIC) == end, what="the new replica holding the whole log")


async def _unlisted(cluster: Cluster, node: int) -> bool:
    return node not in (await cluster.metadata_of(0)).brokers
