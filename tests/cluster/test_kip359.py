"""KIP-359 in the cluster, on real processes: a Produce carrying the producer's idea of the leader epoch (the
project's tagged `current_leader_epoch`, tag 10000) is refused when the epochs disagree, and nothing is
appended; a broker that no longer leads points at the new leader (KIP-951, Produce v10).

A stale leader is made with `fault.metadata.paused`: the broker stops applying the controller's metadata, so
after an election elsewhere it still believes it leads in the old epoch, as one cut off from the controller.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from epoch_broker.broker.faults import METADATA_PAUSED
from epoch_broker.protocol.errors import ErrorCode
from tests.broker.conftest import batch, produce_request
from tests.cluster.support import Cluster, clear_fault, create_topic, disk_log_end, partition_state, produce, wait_for

TOPIC = "guarded"
OLD_LEADER, NEW_LEADER = 0, 1


@pytest.mark.cluster(brokers=3, overrides={"replica.lag.time.max.ms": 60000})
async def test_produce_with_a_stale_or_future_leader_epoch_is_refused_and_appends_nothing(cluster: Cluster) -> None:
    """KIP-359: the new leader answers FENCED_LEADER_EPOCH (74) to a producer still on the old epoch; a stale
    leader answers UNKNOWN_LEADER_EPOCH (75) to a producer already on the new one; neither appends. Once the stale
    broker catches up it answers NOT_LEADER_OR_FOLLOWER naming the new leader and its endpoint (KIP-951)."""
    await create_topic(cluster, TOPIC)  # partition 0 on [0, 1, 2], led by broker 0
    state = await partition_state(cluster, TOPIC, 0, lambda s: s.leader == OLD_LEADER)
    assert state is not None
    old_epoch = state.leader_epoch
    first = await produce(cluster, OLD_LEADER, TOPIC, b"before", acks=1, current_leader_epoch=old_epoch)
    assert first.error_code == ErrorCode.NONE

    assert await cluster.set_fault(OLD_LEADER, METADATA_PAUSED, "true") == "applied"
    assert await asyncio.to_thread(cluster.elect, TOPIC, 0, leader=NEW_LEADER) == "elected"
    new_epoch = old_epoch + 1
    await wait_for(lambda: _leads(cluster, NEW_LEADER, new_epoch), what="broker 1 leading in the next epoch")
    ends = {node: disk_log_end(cluster, node, TOPIC) for node in (OLD_LEADER, NEW_LEADER)}

    behind = await produce(cluster, NEW_LEADER, TOPIC, b"from the past", acks=1, current_leader_epoch=old_epoch)
    assert behind.error_code == ErrorCode.FENCED_LEADER_EPOCH
    ahead = await produce(cluster, OLD_LEADER, TOPIC, b"from the future", acks=1, current_leader_epoch=new_epoch)
    assert ahead.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert {node: disk_log_end(cluster, node, TOPIC) for node in ends} == ends  # nothing appended anywhere

    current = await produce(cluster, NEW_LEADER, TOPIC, b"now", acks=1, current_leader_epoch=new_epoch)
    assert current.error_code == ErrorCode.NONE
    assert current.base_offset == ends[NEW_LEADER]

    await clear_fault(cluster, OLD_LEADER, METADATA_PAUSED)
    redirected = await wait_for(lambda: _not_leader(cluster), what="broker 0 to learn it no longer leads")
    hint = redirected.responses[0].partition_responses[0].current_leader
    assert (hint.leader_id, hint.leader_epoch) == (NEW_LEADER, new_epoch)
    assert [(n.node_id, n.port) for n in redirected.node_endpoints] == [
        (NEW_LEADER, int(cluster.broker(NEW_LEADER).address.rpartition(":")[2]))]


async def _leads(cluster: Cluster, node: int, epoch: int) -> bool:
    """Whether `node` itself (not just any broker) knows it leads in `epoch`."""
    state = await partition_state(cluster, TOPIC, node=node)
    return state is not None and (state.leader, state.leader_epoch) == (node, epoch)


async def _not_leader(cluster: Cluster) -> Any:
    """The whole response (KIP-951's node endpoints are outside the partition's answer)."""
    async with cluster.client(OLD_LEADER) as client:
        response = await produce_request(client, TOPIC, batch(b"misdirected"), acks=1)
    error = response.responses[0].partition_responses[0].error_code
    return response if error == ErrorCode.NOT_LEADER_OR_FOLLOWER else None
