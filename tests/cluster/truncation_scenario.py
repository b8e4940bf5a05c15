"""The unclean-truncation scenario of the KIP-320 tests (test_truncation.py, tests/spark/test_stream_cluster.py).

Two brokers of a cluster, topic `truncated` with replicas [A, B] (A leads) and
`unclean.leader.election.enable=true`. m1..m3 are written with acks=all (both replicas have them); B's replication
is paused and m4..m6 go to A alone (acks=1); once A drops B from the ISR (replica.lag.time.max.ms) the high
watermark reaches 6 and the consumers read m1..m6 (offsets 0..5, leader epoch e0). Then B is elected uncleanly: it
leads epoch e1 = e0 + 1 from its log end 3, A truncates to 3 (checked on A's disk and in its log), and x1..x5 are
written to B at offsets 3..7. A consumer whose position is 6 must notice that offsets 3..5 were replaced: carrying
on at 6 would silently skip x1..x3 (x4 and x5 sit at 6 and 7), and resetting to the start would read m1..m3 again.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

from epoch_broker.broker.faults import REPLICATION_PAUSED
from epoch_broker.protocol.errors import ErrorCode
from tests.cluster.support import (
    Cluster,
    DiskBatch,
    clear_fault,
    create_topic,
    disk_batches,
    fetch_request,
    offset_for_leader_epoch_request,
    produce_offset,
    wait_state,
)
from tests.helpers import not_yet, wait_for

A, B = 0, 1
TOPIC = "truncated"
OLD = [b"m1", b"m2", b"m3", b"m4", b"m5", b"m6"]  # offsets 0..5, epoch e0; B has only the first three
KEPT = 3  # B's log end when it is elected: the divergence point
NEW = [b"x1", b"x2", b"x3", b"x4", b"x5"]  # offsets 3..7, epoch e1, written after the election


@dataclass(frozen=True)
class Epochs:
    old: int  # e0: m1..m6
    new: int  # e1: B's epoch after the unclean election, x1..x5


# --- the scenario -----------------------------------------------------------------------------------------------

async def write_with_an_unreplicated_tail(cluster: Cluster) -> int:
    """m1..m3 on both replicas, m4..m6 on A alone, ISR [A] so that the high watermark is 6. Returns e0."""
    await create_topic(cluster, TOPIC, assignments=[[A, B]], configs={"unclean.leader.election.enable": "true"},
                       wait=False)
    state = await wait_state(cluster, TOPIC, lambda s: s.leader == A and s.isr == (A, B),
                             what="leader A with ISR [A, B]", timeout=15)
    assert await produce_offset(cluster, A, TOPIC, *OLD[:KEPT]) == 0  # acks=all: B has them
    assert await cluster.set_fault(B, REPLICATION_PAUSED, "true") == "applied"
    assert await produce_offset(cluster, A, TOPIC, *OLD[KEPT:], acks=1) == KEPT
    # B stops fetching: after replica.lag.time.max.ms (2 s) A shrinks the ISR to itself and its HW reaches 6.
    await wait_state(cluster, TOPIC, lambda s: s.isr == (A,), what="ISR [A]", timeout=15)
    return state.leader_epoch


async def elect_b_uncleanly(cluster: Cluster, old_epoch: int) -> Epochs:
    """B leads a new epoch from offset 3, A truncates m4..m6, x1..x5 land at 3..7; the broker's answers to the
    two ways a client can find the divergence (OffsetForLeaderEpoch, DivergingEpoch in Fetch) are checked."""
    assert await asyncio.to_thread(cluster.elect, TOPIC, 0, leader=B, unclean=True) == "elected"
    # ISR [B] at first; A (whose fetchers were never paused) may be back in it by the time this looks.
    state = await wait_state(cluster, TOPIC, lambda s: s.leader == B and s.leader_epoch == old_epoch + 1,
                             what="B leads in a new epoch", timeout=15)
    epochs = Epochs(old_epoch, state.leader_epoch)
    await clear_fault(cluster, B, REPLICATION_PAUSED)  # B leads now: nothing to fetch, the cluster is back to normal
    await wait_for_disk(cluster, A, [DiskBatch(0, KEPT - 1, old_epoch, OLD[:KEPT])], "A truncated to 3")
    assert re.findall(rf"{TOPIC}-0: truncating from (\d+) to (\d+)", cluster.log_text(A)) == [("6", "3")]
    assert await produce_offset(cluster, B, TOPIC, *NEW, acks=1) == KEPT

    async with cluster.client(B) as client:
        answer = await offset_for_leader_epoch_request(client, TOPIC, version=4, current_leader_epoch=epochs.new,
                                                       leader_epoch=epochs.old)
        assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (ErrorCode.NONE, epochs.old, KEPT)
        # Fetch v12 as kafka-python sends it (topic names, last_fetched_epoch).
        answer = await fetch_request(client, TOPIC, current_leader_epoch=epochs.new, fetch_offset=len(OLD),
                                     last_fetched_epoch=epochs.old)
        assert answer.error_code == ErrorCode.NONE
        assert (answer.diverging_epoch.epoch, answer.diverging_epoch.end_offset) == (epochs.old, KEPT)
    return epochs


async def wait_for_disk(cluster: Cluster, node: int, expected: list[DiskBatch], what: str) -> None:
    """Until `node`'s log of the topic holds exactly the batches `expected` (on disk)."""
    def found() -> object:
        batches = disk_batches(cluster, node, TOPIC)
        return batches == expected or not_yet(batches)

    await wait_for(found, 10, what=what)
