"""KIP-359 in the cluster, on real processes: a Produce carrying the producer's idea of the leader epoch (the
project's tagged `current_leader_epoch`, tag 10000) is refused when the epochs disagree, and nothing is
appended; a broker that no longer leads points at the new leader (KIP-951, Produce v10).

A stale leader is made with `fault.metadata.paused`: the broker stops applying the controller's metadata, so
after an election elsewhere it still believes it leads in the old epoch, as one cut off from the controller.
"""

from __future__ import annotations

from typing import Any

import pytest

from broker.faults import METADATA_PAUSED
from protocol.errors import ErrorCode
from protocol.messages import produce
from tests.broker.conftest import batch
from tests.cluster.support import Cluster, wait_for
from tests.cluster.test_kip207 import clear_fault, create_topic, partition_state
from tests.cluster.test_kip320 import disk_log_end, metadata_of

TOPIC = "guarded"
OLD_LEADER, NEW_LEADER = 0, 1


async def produce_with_epoch(cluster: Cluster, node: int, value: bytes, current_leader_epoch: int,
                             version: int = 10) -> Any:
    """One acks=1 Produce of one record to `node`, carrying `current_leader_epoch`; the whole response."""
    request = produce.REQUEST
    body = request.cls(acks=1, timeout_ms=5000, topic_data=[request.TopicProduceData(name=TOPIC, partition_data=[
        request.PartitionProduceData(index=0, records=batch(value), current_leader_epoch=current_leader_epoch)])])
    async with cluster.client(node) as client:
        return await client.request(produce.API, version, body)


@pytest.mark.cluster(brokers=3, overrides={"replica.lag.time.max.ms": 60000})
async def test_produce_with_a_stale_or_future_leader_epoch_is_refused_and_appends_nothing(cluster: Cluster) -> None:
    """KIP-359: the new leader answers FENCED_LEADER_EPOCH (74) to a producer still on the old epoch; a stale
    leader answers UNKNOWN_LEADER_EPOCH (75) to a producer already on the new one; neither appends. Once the stale
    broker catches up it answers NOT_LEADER_OR_FOLLOWER naming the new leader and its endpoint (KIP-951)."""
    await create_topic(cluster, TOPIC)  # partition 0 on [0, 1, 2], led by broker 0
    state = await partition_state(cluster, TOPIC, 0, lambda s: s.leader == OLD_LEADER)
    assert state is not None
    old_epoch = state.leader_epoch
    first = await produce_with_epoch(cluster, OLD_LEADER, b"before", old_epoch)
    assert first.responses[0].partition_responses[0].error_code == ErrorCode.NONE

    assert await cluster.set_fault(OLD_LEADER, METADATA_PAUSED, "true") == "applied"
    assert await cluster.elect(TOPIC, 0, leader=NEW_LEADER) == "elected"
    new_epoch = old_epoch + 1
    await wait_for(lambda: _leads(cluster, NEW_LEADER, new_epoch), what="broker 1 leading in the next epoch")
    ends = {node: disk_log_end(cluster, node, TOPIC) for node in (OLD_LEADER, NEW_LEADER)}

    behind = (await produce_with_epoch(cluster, NEW_LEADER, b"from the past", old_epoch)).responses[0]
    assert behind.partition_responses[0].error_code == ErrorCode.FENCED_LEADER_EPOCH
    ahead = (await produce_with_epoch(cluster, OLD_LEADER, b"from the future", new_epoch)).responses[0]
    assert ahead.partition_responses[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert {node: disk_log_end(cluster, node, TOPIC) for node in ends} == ends  # nothing appended anywhere

    current = (await produce_with_epoch(cluster, NEW_LEADER, b"now", new_epoch)).responses[0]
    assert current.partition_responses[0].error_code == ErrorCode.NONE
    assert current.partition_responses[0].base_offset == ends[NEW_LEADER]

    await clear_fault(cluster, OLD_LEADER, METADATA_PAUSED)
    redirected = await wait_for(lambda: _not_leader(cluster), what="broker 0 to learn it no longer leads")
    hint = redirected.responses[0].partition_responses[0].current_leader
    assert (hint.leader_id, hint.leader_epoch) == (NEW_LEADER, new_epoch)
    assert [(n.node_id, n.port) for n in redirected.node_endpoints] == [
        (NEW_LEADER, int(cluster.broker(NEW_LEADER).address.rpartition(":")[2]))]


async def _leads(cluster: Cluster, node: int, epoch: int) -> bool:
    """Whether `node` itself (not just any broker) knows it leads in `epoch`."""
    state = (await metadata_of(cluster, node)).partitions.get((TOPIC, 0))
    return state is not None and (state.leader, state.leader_epoch) == (node, epoch)


async def _not_leader(cluster: Cluster) -> Any:
    response = await produce_with_epoch(cluster, OLD_LEADER, b"misdirected", -1)
    error = response.responses[0].partition_responses[0].error_code
    return response if error == ErrorCode.NOT_LEADER_OR_FOLLOWER else None
