"""KIP-320 and KIP-232 on a real cluster (a controller and broker processes, tests/cluster/support.py).

- A zombie follower (SIGSTOP past the session timeout) is fenced by the controller, its fetches in the old
  leader epoch get FENCED_LEADER_EPOCH, it never counts for the high watermark, and it comes back into the ISR
  only after truncating its stale tail and catching up in the new epoch.
- The fencing matrix: Fetch, ListOffsets and OffsetForLeaderEpoch with current_leader_epoch -1, e-1, e, e+1
  on the leader and on a follower (the epoch check comes before the leadership check).
- KIP-232: the leader epochs every broker's Metadata answers never go backwards through elections, a SIGKILL
  and a restart.

Evidence comes from the wire (Metadata of each broker, exact requests with the internal KafkaClient), from
the processes' logs, and from the replicas' segment files on disk (pwrite: visible to readers at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from epoch_broker.broker.faults import REPLICATION_PAUSED
from epoch_broker.client.aio import KafkaClient
from epoch_broker.drill import admin
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import fetch, metadata
from epoch_broker.protocol.records import iter_batches
from tests.cluster.support import (
    METADATA_STORES,
    Cluster,
    create_topic,
    disk_batches,
    disk_log_end,
    fetch_request,
    list_offset,
    offset_for_leader_epoch_request,
    partition_state,
    produce,
    start_cluster,
    wait_for,
)

pytestmark = pytest.mark.slow

SESSION_TIMEOUT_MS = 1500  # the launcher's broker.session.timeout.ms
NONE, FENCED, UNKNOWN, NOT_LEADER = (ErrorCode.NONE, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
                                     ErrorCode.NOT_LEADER_OR_FOLLOWER)


# --- helpers ------------------------------------------------------------------------------------------------

async def produce_numbered(cluster: Cluster, node: int, topic: str, count: int, acks: int) -> Any:
    """`count` records ("<topic>-<i>") in one batch to `topic`-0 on `node` (Produce v9); the partition's answer."""
    return await produce(cluster, node, topic, *(f"{topic}-{i}".encode() for i in range(count)), acks=acks,
                         version=9)


async def high_watermark(cluster: Cluster, node: int, topic: str) -> int:
    """ListOffsets LATEST on `node` as a consumer: the leader's high watermark (-1 on an error)."""
    async with cluster.client(node) as client:
        answer = await list_offset(client, topic, 4)
    return answer.offset if answer.error_code == NONE else -1


# --- 5. the fencing matrix ----------------------------------------------------------------------------------

MATRIX_TOPIC = "fencing"
MATRIX_RECORDS = 3
FETCH_VERSION, LIST_OFFSETS_VERSION, OFFSET_FOR_LEADER_EPOCH_VERSION = 12, 4, 3


@dataclasses.dataclass(frozen=True)
class MatrixSetup:
    cluster: Cluster
    leader: int
    follower: int
    epoch: int


async def _prepare_matrix(cluster: Cluster) -> MatrixSetup:
    await create_topic(cluster, MATRIX_TOPIC, assignments=[[0, 1]], configs={"min.insync.replicas": "2"}, wait=False)
    await wait_for(lambda: partition_state(cluster, MATRIX_TOPIC, 0, lambda s: s.isr == (0, 1), node=0),
                   what="ISR [0, 1]")
    assert (await produce_numbered(cluster, 0, MATRIX_TOPIC, MATRIX_RECORDS, acks=-1)).error_code == NONE
    # An election round trip: the leader is broker 0 again, in epoch 2, and epoch 1 is a real past epoch.
    epoch = (await partition_state(cluster, MATRIX_TOPIC, node=0)).leader_epoch
    for target in (1, 0):
        assert await asyncio.to_thread(cluster.elect, MATRIX_TOPIC, 0, leader=target) == "elected"
        epoch += 1
        for node in (0, 1):  # both brokers' caches (and partitions) are in the new epoch
            await wait_for(lambda n=node, t=target, e=epoch: partition_state(
                cluster, MATRIX_TOPIC, 0, lambda s: (s.leader, s.leader_epoch, set(s.isr)) == (t, e, {0, 1}), node=n),
                what=f"leader {target} in epoch {epoch} on broker {node}")
    assert epoch >= 1
    # KIP-207: the leader serves offsets once its high watermark reached its log end at election.
    await wait_for(lambda: _latest_offset_is(cluster, 0, MATRIX_RECORDS), what="the leader's offsets available")
    return MatrixSetup(cluster, leader=0, follower=1, epoch=epoch)


async def _latest_offset_is(cluster: Cluster, node: int, offset: int) -> bool:
    return await high_watermark(cluster, node, MATRIX_TOPIC) == offset


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MatrixSetup]:
    """One two-broker cluster for the whole matrix: nothing in it changes after the setup (no writes, no
    elections; requests with wrong epochs change no state), so every case sees the same leader and epoch."""
    cluster = start_cluster(tmp_path_factory.mktemp("kip320-matrix"), brokers=2)
    try:
        setup = asyncio.run(_prepare_matrix(cluster))
        yield setup
    except BaseException:
        print(f"process logs:\n{cluster.log_tails()}")
        raise
    finally:
        cluster.stop()


# Kafka's answers by (role, the request's epoch relative to the partition's e); -1 skips the check.
EXPECTED = {
    ("leader", "-1"): NONE, ("leader", "e-1"): FENCED, ("leader", "e"): NONE, ("leader", "e+1"): UNKNOWN,
    ("follower", "-1"): NOT_LEADER, ("follower", "e-1"): FENCED, ("follower", "e"): NOT_LEADER,
    ("follower", "e+1"): UNKNOWN,
}
EPOCHS = {"-1": None, "e-1": -1, "e": 0, "e+1": 1}


@pytest.mark.parametrize("which", ["-1", "e-1", "e", "e+1"], ids=lambda w: f"epoch {w}")
@pytest.mark.parametrize("role", ["leader", "follower"])
@pytest.mark.parametrize("api", ["Fetch v12", "ListOffsets v4", "OffsetForLeaderEpoch v3"])
async def test_current_leader_epoch_is_checked_before_leadership_as_kafka_does(
        matrix: MatrixSetup, api: str, role: str, which: str) -> None:
    """KIP-320: current_leader_epoch -1 skips the check, a lower one is FENCED_LEADER_EPOCH, a higher one
    UNKNOWN_LEADER_EPOCH, on the leader and on a follower alike; only a matching (or absent) epoch reaches
    the leadership check, which a follower fails with NOT_LEADER_OR_FOLLOWER. A consumer's request
    (replica_id -1) on the leader with a good epoch is served."""
    e = matrix.epoch
    node = matrix.leader if role == "leader" else matrix.follower
    current = -1 if EPOCHS[which] is None else e + EPOCHS[which]
    expected = EXPECTED[(role, which)]
    async with matrix.cluster.client(node) as client:
        if api.startswith("Fetch"):
            answer = await fetch_request(client, MATRIX_TOPIC, version=FETCH_VERSION, current_leader_epoch=current)
            assert ErrorCode(answer.error_code) == expected, answer
            if expected == NONE:
                assert answer.high_watermark == MATRIX_RECORDS
                assert [b.last_offset_delta + b.base_offset for _, b in iter_batches(bytes(answer.records))] == [
                    MATRIX_RECORDS - 1]
            else:  # v12+: the answering broker's view of the leadership
                assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (matrix.leader, e)
                assert not answer.records
        elif api.startswith("ListOffsets"):
            answer = await list_offset(client, MATRIX_TOPIC, LIST_OFFSETS_VERSION, current_leader_epoch=current)
            assert ErrorCode(answer.error_code) == expected, answer
            if expected == NONE:
                assert (answer.offset, answer.leader_epoch) == (MATRIX_RECORDS, e)
            else:
                assert answer.offset == -1
        else:
            answer = await offset_for_leader_epoch_request(
                client, MATRIX_TOPIC, version=OFFSET_FOR_LEADER_EPOCH_VERSION, current_leader_epoch=current,
                leader_epoch=e)
            assert ErrorCode(answer.error_code) == expected, answer
            if expected == NONE:  # the current epoch ends at the log end
                assert (answer.leader_epoch, answer.end_offset) == (e, MATRIX_RECORDS)
            else:
                assert (answer.leader_epoch, answer.end_offset) == (-1, -1)


# --- 9. KIP-232: Metadata leader epochs never go backwards ----------------------------------------------------

class EpochWatcher:
    """Polls Metadata v12 from one broker on its own connection, continuously, and records per (topic,
    partition) every leader epoch it answered, in order. A dead or restarting broker is retried."""

    def __init__(self, cluster: Cluster, node: int) -> None:
        self.address = cluster.broker(node).address
        self.node = node
        self.seen: dict[tuple[str, int], list[int]] = {}
        self.answers = 0
        self.stopping = False
        self.task = asyncio.create_task(self._run(), name=f"epoch-watcher-{node}")

    async def stop(self) -> None:
        """The flag as well as the cancel: asyncio.wait_for can swallow a cancellation that lands as its inner
        call completes (Python < 3.12), and the loop would then poll for ever."""
        self.stopping = True
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)

    async def _run(self) -> None:
        request = metadata.REQUEST.cls(topics=None, allow_auto_topic_creation=False)
        while not self.stopping:
            try:
                async with await KafkaClient.connect(self.address) as client:
                    while not self.stopping:
                        response = await asyncio.wait_for(client.request(metadata.API, 12, request), 3.0)
                        for topic in response.topics:
                            for p in topic.partitions:
                                self.seen.setdefault((topic.name, p.partition_index), []).append(p.leader_epoch)
                        self.answers += 1
                        await asyncio.sleep(0.01)  # paces the watcher, which waits for nothing: it records
            except (OSError, ConnectionError, TimeoutError):
                # killed, or not listening yet after a restart: the watcher retries until stopped, paced
                await asyncio.sleep(0.05)

    def last(self, topic: str, partition: int) -> int:
        return (self.seen.get((topic, partition)) or [-1])[-1]


MONOTONIC_TOPIC = "rotating"


async def _elect_and_wait(cluster: Cluster, partition: int, target: int | None = None) -> admin.PartitionState:
    before = (await cluster.metadata())[(MONOTONIC_TOPIC, partition)]
    assert await asyncio.to_thread(cluster.elect, MONOTONIC_TOPIC, partition, leader=target) == "elected"
    return await wait_for(lambda: partition_state(cluster, MONOTONIC_TOPIC, partition, lambda s: s.leader_epoch >
                                                  before.leader_epoch and s.leader != before.leader),
                          what=f"{MONOTONIC_TOPIC}-{partition} elected away from {before.leader}")


async def test_every_brokers_metadata_never_answers_an_older_leader_epoch_through_elections_and_a_restart(
        cluster: Cluster) -> None:
    """KIP-232: a broker's Metadata never answers a leader epoch older than one it answered before (epochs only
    move forward in its metadata cache, and a restarted broker serves only once it has caught up with the
    metadata log), through clean elections that rotate leadership, a SIGKILL of a leader and its restart."""
    partitions = 2
    await create_topic(cluster, MONOTONIC_TOPIC, assignments=[[0, 1, 2], [1, 2, 0]], wait=False)
    for p in range(partitions):
        await wait_for(lambda p=p: partition_state(cluster, MONOTONIC_TOPIC, p, lambda s: len(s.isr) == 3),
                       what=f"ISR of 3 ({p})")
    watchers = [EpochWatcher(cluster, node) for node in range(3)]
    # After each step: the epochs every running broker must have answered (each watcher is waited for).
    checkpoints: list[tuple[set[int], dict[int, int]]] = []

    async def settle(running: set[int]) -> None:
        current = {p: (await cluster.metadata())[(MONOTONIC_TOPIC, p)].leader_epoch for p in range(partitions)}
        await wait_for(lambda: all(watchers[n].last(MONOTONIC_TOPIC, p) == e for n in running
                                   for p, e in current.items()),
                       what=f"brokers {sorted(running)} answering the epochs {current}")
        checkpoints.append((set(running), current))

    try:
        await settle({0, 1, 2})
        for _ in range(2):  # clean elections: each rotates to the next ISR member
            for p in range(partitions):
                await _elect_and_wait(cluster, p)
                await settle({0, 1, 2})

        victim = (await cluster.metadata())[(MONOTONIC_TOPIC, 0)].leader
        cluster.kill(victim)
        for p in range(partitions):
            await wait_for(lambda p=p: partition_state(cluster, MONOTONIC_TOPIC, p, lambda s: s.leader not in
                                                       (victim, -1) and victim not in s.isr),
                           what=f"partition {p} led and in sync without broker {victim}")
        await settle({0, 1, 2} - {victim})
        cluster.restart(victim)
        for p in range(partitions):
            await wait_for(lambda p=p: partition_state(cluster, MONOTONIC_TOPIC, p, lambda s: victim in s.isr),
                           timeout=15, what=f"broker {victim} back in the ISR of partition {p}")
        await settle({0, 1, 2})
        for p in range(partitions):  # leadership back to the restarted broker, then on again
            await _elect_and_wait(cluster, p, victim)
            await settle({0, 1, 2})
            await _elect_and_wait(cluster, p)
            await settle({0, 1, 2})
    finally:
        await asyncio.gather(*(watcher.stop() for watcher in watchers))

    for watcher in watchers:
        for p in range(partitions):
            epochs = watcher.seen[(MONOTONIC_TOPIC, p)]
            assert epochs == sorted(epochs), f"broker {watcher.node} went back in epochs of partition {p}: {epochs}"
            expected = sorted({c[p] for running, c in checkpoints if watcher.node in running})
            assert set(expected) <= set(epochs), f"broker {watcher.node}, partition {p}: saw {set(epochs)}"
            assert len(expected) >= 5, expected  # several changes were observed by every broker


# --- 4. the zombie replica ----------------------------------------------------------------------------------

ZOMBIE_TOPIC = "zombie"


@dataclasses.dataclass(frozen=True)
class Snapshot:
    at: float  # time.monotonic() when the answer arrived
    node: int  # the broker that answered
    state: admin.PartitionState
    live: frozenset[int]  # the brokers its Metadata lists (fenced ones are left out)


class IsrWatcher:
    """Polls Metadata from each of `nodes` (each on its own) and keeps every answer about `topic`-0."""

    def __init__(self, cluster: Cluster, nodes: list[int], topic: str) -> None:
        self.snapshots: list[Snapshot] = []
        self.stopping = False
        self.tasks = [asyncio.create_task(self._run(cluster, node, topic)) for node in nodes]

    async def _run(self, cluster: Cluster, node: int, topic: str) -> None:
        while not self.stopping:  # see EpochWatcher.stop
            with contextlib.suppress(admin.AdminError):
                answer = await cluster.metadata_of(node)
                state = answer.partitions.get((topic, 0))
                if state is not None:
                    self.snapshots.append(Snapshot(time.monotonic(), node, state, frozenset(answer.brokers)))
            await asyncio.sleep(0.02)  # paces the watcher, which waits for nothing: it records every answer

    async def stop(self) -> None:
        self.stopping = True
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


@pytest.mark.parametrize("metadata_store", METADATA_STORES)
@pytest.mark.cluster(brokers=3, overrides={"replica.lag.time.max.ms": 30000})
async def test_a_paused_follower_is_fenced_truncated_and_let_back_into_the_isr_only_once_caught_up(
        cluster: Cluster) -> None:
    """KIP-320's zombie replica: a follower paused past the session timeout is fenced by the controller (out of
    the ISR and of the live brokers); a new leader is elected and writes meanwhile, its high watermark moved by
    the ISR members alone. The zombie, resumed, fetches in its old leader epoch and is answered
    FENCED_LEADER_EPOCH; it then truncates its stale tail (records of the old epoch the new leader never had,
    KIP-101) and catches up, and it is never in the ISR while fenced nor before its log equals the leader's.
    (replica.lag.time.max.ms is long so that the lag rule never removes anyone: only fencing does.)"""
    old_leader, new_leader, zombie = 0, 1, 2
    await create_topic(cluster, ZOMBIE_TOPIC, assignments=[[old_leader, new_leader, zombie]],
                       configs={"min.insync.replicas": "2"}, wait=False)
    start = await wait_for(lambda: partition_state(cluster, ZOMBIE_TOPIC, 0, lambda s: len(s.isr) == 3,
                                                   node=old_leader), what="ISR of 3")
    old_epoch = start.leader_epoch
    assert (await produce_numbered(cluster, old_leader, ZOMBIE_TOPIC, 5, acks=-1)).error_code == NONE  # 0-4

    # A tail only the old leader and the zombie have: the new leader's replication is paused meanwhile.
    assert await cluster.set_fault(new_leader, REPLICATION_PAUSED, "true") == "applied"
    tail = await produce_numbered(cluster, old_leader, ZOMBIE_TOPIC, 3, acks=1)  # offsets 5-7, uncommitted
    assert (tail.error_code, tail.base_offset) == (NONE, 5)
    await wait_for(lambda: disk_log_end(cluster, zombie, ZOMBIE_TOPIC) == 8, what="the zombie has the tail")
    assert disk_log_end(cluster, new_leader, ZOMBIE_TOPIC) == 5
    assert await high_watermark(cluster, old_leader, ZOMBIE_TOPIC) == 5

    watcher = IsrWatcher(cluster, [old_leader, new_leader], ZOMBIE_TOPIC)
    try:
        cluster.pause(zombie)
        paused_at = time.monotonic()
        fenced = await wait_for(lambda: _fenced_on_both(cluster, zombie), timeout=10,
                                what=f"broker {zombie} fenced: out of the ISR and of the live brokers")
        fenced_at = time.monotonic()
        # The controller fenced it for its silence, one session after its last heartbeat, not earlier.
        assert fenced_at - paused_at >= SESSION_TIMEOUT_MS / 1000 - 0.5
        silence = re.search(rf"fencing broker {zombie} \(no heartbeat for (\d+) ms \(broker.session.timeout.ms "
                            rf"{SESSION_TIMEOUT_MS}\)\)", cluster.log_text(cluster.file.controller.node_id))
        assert silence is not None and int(silence.group(1)) >= SESSION_TIMEOUT_MS  # the real silence, in whole ms
        assert fenced.leader == old_leader and fenced.leader_epoch == old_epoch  # a follower: no new epoch

        assert await asyncio.to_thread(cluster.elect, ZOMBIE_TOPIC, 0, leader=new_leader) == "elected"
        new_epoch = old_epoch + 1
        for node in (old_leader, new_leader):
            await wait_for(lambda n=node: partition_state(cluster, ZOMBIE_TOPIC, 0, lambda s: (
                s.leader, s.leader_epoch, set(s.isr)) == (new_leader, new_epoch, {old_leader, new_leader}), node=n),
                           what=f"broker {node} knows leader {new_leader} in epoch {new_epoch}")
        assert await cluster.set_fault(new_leader, REPLICATION_PAUSED, "false") == "applied"

        # Writes in the new epoch, committed by the ISR (new leader and old leader) while the zombie sleeps.
        written = await produce_numbered(cluster, new_leader, ZOMBIE_TOPIC, 6, acks=-1)
        assert (written.error_code, written.base_offset) == (NONE, 5)  # the old tail was never committed
        assert await high_watermark(cluster, new_leader, ZOMBIE_TOPIC) == 11
        assert disk_log_end(cluster, zombie, ZOMBIE_TOPIC) == 8  # still the stale tail, of the old epoch
        stale = disk_batches(cluster, zombie, ZOMBIE_TOPIC)[-1]
        assert (stale.base_offset, stale.last_offset, stale.leader_epoch) == (5, 7, old_epoch)

        # The fetch the zombie would send the new leader (its old epoch, from its stale log end) is fenced and
        # moves neither the high watermark nor the ISR (sent as a broker sends it: logged in with the secret).
        async with cluster.internal_client(new_leader) as client:
            request = fetch.REQUEST.cls(
                replica_id=zombie, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, session_id=0, session_epoch=-1,
                forgotten_topics_data=[], topics=[fetch.REQUEST.FetchTopic(topic=ZOMBIE_TOPIC, partitions=[
                    fetch.REQUEST.FetchPartition(partition=0, current_leader_epoch=old_epoch, fetch_offset=8,
                                                 last_fetched_epoch=old_epoch, log_start_offset=0,
                                                 partition_max_bytes=1 << 20)])])
            answer = (await client.request(fetch.API, 12, request)).responses[0].partitions[0]
        assert ErrorCode(answer.error_code) == FENCED and not answer.records
        assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (new_leader, new_epoch)
        assert await high_watermark(cluster, new_leader, ZOMBIE_TOPIC) == 11
        leader_batches = disk_batches(cluster, new_leader, ZOMBIE_TOPIC)
        written_batch = leader_batches[-1]
        assert (written_batch.base_offset, written_batch.last_offset, written_batch.leader_epoch) == (5, 10, new_epoch)

        resumed_at = time.monotonic()
        cluster.resume(zombie)

        async def back_in_sync() -> bool:
            state = await partition_state(cluster, ZOMBIE_TOPIC, node=new_leader)
            if state is None or zombie not in state.isr:
                return False
            # Read after the Metadata answer: had it joined earlier than this, its log could only be shorter.
            assert disk_batches(cluster, zombie, ZOMBIE_TOPIC) == leader_batches, "in the ISR before caught up"
            return True

        await wait_for(back_in_sync, timeout=15, what=f"broker {zombie} back in the ISR")
        rejoined_at = time.monotonic()
        await wait_for(lambda: partition_state(cluster, ZOMBIE_TOPIC, 0, lambda s: zombie in s.isr, node=old_leader),
                       what="ISR on broker 0")
    finally:
        await watcher.stop()

    assert await high_watermark(cluster, new_leader, ZOMBIE_TOPIC) == 11
    snapshots = watcher.snapshots
    assert any(s.at > resumed_at for s in snapshots) and any(fenced_at <= s.at < resumed_at for s in snapshots)
    for snapshot in snapshots:
        # KIP-320: a fenced replica is never in the ISR (no leader may add it back while the controller has it
        # fenced), and nobody counted it while it slept.
        if zombie in snapshot.state.isr:
            assert zombie in snapshot.live, snapshot
        if fenced_at <= snapshot.at < resumed_at:
            assert zombie not in snapshot.live and zombie not in snapshot.state.isr, snapshot
    assert rejoined_at > resumed_at

    # Its fetch in the old epoch reached the old leader (a follower in the new epoch since the election, so only
    # the resumed zombie can have sent it) and was fenced; the zombie then cut its log back to where the old
    # epoch ends on the new leader. (Its own log says "fenced" only when it reads the answer before the
    # metadata hands the partition over, a race; the answering broker logs every fenced replica fetch.)
    fenced_fetch = (f"{ZOMBIE_TOPIC}-0: Fetch from replica {zombie} in leader epoch {old_epoch} fenced "
                    f"(the partition is in epoch {new_epoch})")
    assert fenced_fetch in cluster.log_text(old_leader), cluster.log_text(old_leader)[-3000:]
    zombie_log = cluster.log_text(zombie)
    truncation = f"{ZOMBIE_TOPIC}-0: truncating from 8 to 5 (leader epoch {old_epoch} ends at 5)"
    assert truncation in zombie_log, zombie_log[-3000:]


async def _fenced_on_both(cluster: Cluster, zombie: int) -> admin.PartitionState | None:
    """The partition's state once both running brokers list the zombie neither as live nor in the ISR."""
    states = []
    for node in (0, 1):
        answer = await cluster.metadata_of(node)
        state = answer.partitions[(ZOMBIE_TOPIC, 0)]
        if zombie in answer.brokers or zombie in state.isr:
            return None
        states.append(state)
    return states[0]

