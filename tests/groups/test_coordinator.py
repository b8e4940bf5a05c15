"""The group coordinator's state machine and persistence, against an in-memory broker (no sockets).

The fake broker has the real MetadataCache and an in-memory `__consumer_offsets` that stores what
`append_internal` gets as decoded InternalRecords (with their producer id and transactional flag; `append_marker`
adds a transaction marker), so a "restart" is a new coordinator over the same fake log. Integration with real
clients and processes is in test_clients.py.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from epoch_broker.broker.config import BrokerConfig, ConfigError, Endpoint, build_config
from epoch_broker.broker.faults import BrokerFaults
from epoch_broker.broker.groups import records
from epoch_broker.broker.groups.classic_group import ClassicGroupState
from epoch_broker.broker.groups.coordinator import (
    OFFSETS_TOPIC,
    GroupCoordinator,
    OffsetToCommit,
    ShareOffsetsError,
    SharePartitionOffset,
    java_string_hash,
    partition_for,
)
from epoch_broker.broker.groups.share_group import ShareGroup
from epoch_broker.broker.groups.share_protocol import ShareHeartbeatRequest
from epoch_broker.broker.groups.share_state import NOT_WRITTEN, ShareState, StateBatch, delivery_complete_count
from epoch_broker.broker.metadata.image import MetadataCache
from epoch_broker.broker.metadata.records import PartitionRecord, RemoveTopicRecord, TopicRecord
from epoch_broker.broker.replica.replica_manager import InternalRecord
from epoch_broker.protocol.errors import ErrorCode, KafkaError
from epoch_broker.protocol.records import EndTxnMarker, iter_batches, iter_records
from tests.helpers import holds, wait_for

SESSION_MS = 6000


class FakeReplicaManager:
    def __init__(self, metadata: MetadataCache) -> None:
        self.metadata = metadata
        self.logs: dict[tuple[str, int], list[InternalRecord]] = {}
        self.fail_appends = False
        self.producer_epochs: dict[tuple[str, int, int], int] = {}  # as the partition's producer state checks them

    async def ensure_internal_topic(self, name: str, partitions: int, replication_factor: int,
                                    configs: dict[str, str]) -> None:
        if name not in self.metadata.topics_by_name:
            add_topic(self.metadata, name, partitions)

    async def append_internal(self, topic: str, partition: int, batch: bytearray) -> int:
        if self.fail_appends:
            raise KafkaError("injected", ErrorCode.NOT_ENOUGH_REPLICAS)
        log = self.logs.setdefault((topic, partition), [])
        base = len(log)
        for pos, header in iter_batches(batch):
            if header.producer_id >= 0:
                producer = (topic, partition, header.producer_id)
                if header.producer_epoch < self.producer_epochs.get(producer, -1):
                    raise KafkaError("stale producer epoch", ErrorCode.INVALID_PRODUCER_EPOCH)
                self.producer_epochs[producer] = header.producer_epoch
            for record in iter_records(batch, pos, header):
                log.append(InternalRecord(len(log), record.key, record.value, header.producer_id,
                                          header.is_transactional))
        return base

    def append_marker(self, topic: str, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker, as `read_internal` yields a control batch."""
        log = self.logs.setdefault((topic, partition), [])
        log.append(InternalRecord(len(log), None, None, producer_id, True, EndTxnMarker(commit, 0)))

    def read_internal(self, topic: str, partition: int, start_offset: int = 0) -> Any:
        return iter(self.logs.get((topic, partition), [])[start_offset:])

    def get(self, topic: str, index: int) -> None:
        return None  # no partition of a topic is led here: share-partition lags are unknown (-1)


class FakeBroker:
    def __init__(self, **config: Any) -> None:
        self.config = BrokerConfig(**{"offsets_topic_num_partitions": 3, "group_initial_rebalance_delay_ms": 0,
                                      "listeners": (Endpoint("PLAINTEXT", "127.0.0.1", 19092),), **config})
        self.node_id = 0
        self.metadata = MetadataCache()
        self.replica_manager = FakeReplicaManager(self.metadata)
        self.metadata_subscribers: list[Any] = []
        self.faults = BrokerFaults()
        self.metrics = None  # metrics off, as without metrics.listener


def add_topic(metadata: MetadataCache, name: str, partitions: int) -> bytes:
    topic_id = uuid.uuid4().bytes
    metadata.apply(TopicRecord(name, topic_id, {}))
    for p in range(partitions):
        metadata.apply(PartitionRecord(topic_id, p, (0,), (0,), 0))
    return topic_id


def delete_topic(broker: FakeBroker, name: str) -> None:
    record = RemoveTopicRecord(broker.metadata.topics_by_name[name].topic_id)
    broker.metadata.apply(record)
    for subscriber in broker.metadata_subscribers:
        subscriber([record])


async def started(broker: FakeBroker) -> GroupCoordinator:
    """A coordinator as a client finds it: started, `__consumer_offsets` created (by its FindCoordinator) and
    every partition loaded."""
    coordinator = GroupCoordinator(broker)
    await coordinator.start()
    await coordinator.ensure_offsets_topic()
    await coordinator.wait_loaded()
    return coordinator


@pytest.fixture
async def broker(request: pytest.FixtureRequest) -> FakeBroker:
    """The fake broker; parametrized indirectly, its config's overrides."""
    b = FakeBroker(**getattr(request, "param", {}))
    add_topic(b.metadata, "t", 6)
    return b


@pytest.fixture
async def coordinator(broker: FakeBroker) -> Any:
    c = await started(broker)
    yield c
    await c.stop()


def join(coordinator: GroupCoordinator, member_id: str = "", *, group: str = "g", protocols: Any = None,
         version: int = 5, instance: str | None = None, session_ms: int = SESSION_MS,
         rebalance_ms: int = 10_000, protocol_type: str = "consumer") -> asyncio.Task:
    return asyncio.ensure_future(coordinator.join_group(
        group_id=group, member_id=member_id, group_instance_id=instance, session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms, protocol_type=protocol_type,
        protocols=protocols or [("range", b"r")], client_id="c", client_host="/127.0.0.1",
        require_known_member_id=version >= 4, skip_assignment_supported=version >= 9,
    ))


async def join_member(coordinator: GroupCoordinator, **kwargs: Any) -> str:
    """A new member id through the MEMBER_ID_REQUIRED handshake (not waiting for the join phase)."""
    first = await join(coordinator, **kwargs)
    assert first.error == ErrorCode.MEMBER_ID_REQUIRED
    return first.member_id


def sync(coordinator: GroupCoordinator, member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
         group: str = "g") -> asyncio.Task:
    return asyncio.ensure_future(coordinator.sync_group(
        group_id=group, generation_id=generation, member_id=member_id, group_instance_id=None,
        protocol_type=None, protocol_name=None, assignments=assignments or {},
    ))


async def stable_group(coordinator: GroupCoordinator, size: int) -> tuple[list[str], int]:
    """`size` members joined and synced; returns (member ids, generation)."""
    ids = [await join_member(coordinator) for _ in range(size)]
    results = await asyncio.gather(*(join(coordinator, m) for m in ids))
    generation = results[0].generation_id
    leader = results[0].leader
    synced = await asyncio.gather(*(
        sync(coordinator, m, generation, {x: x.encode() for x in ids} if m == leader else None) for m in ids
    ))
    assert all(s.error == ErrorCode.NONE for s in synced)
    return ids, generation


def commit(coordinator: GroupCoordinator, generation: int = -1, member: str = "", *, group: str = "g",
           offset: int = 5, epoch: int = 3, topic: str = "t", partition: int = 0) -> Any:
    return coordinator.commit_offsets(group, generation, member, None,
                                      [OffsetToCommit(topic, partition, offset, epoch, "meta")])


# -- partitioning --------------------------------------------------------------------------------------------


def test_group_partition_matches_javas_string_hashcode() -> None:
    assert java_string_hash("test") == 3556498
    assert java_string_hash("polygenelubricants") == -2147483648  # Integer.MIN_VALUE: Utils.abs makes it 0
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("test", 50) == 3556498 % 50
    assert java_string_hash("\u00e9\U0001f600") == (0xE9 * 31 + 0xD83D) * 31 + 0xDE00  # UTF-16 surrogates


async def test_find_coordinator_names_this_broker_as_leader_of_the_offsets_partition(coordinator: Any) -> None:
    assert coordinator.find_coordinator("g", "PLAINTEXT") == (ErrorCode.NONE, 0, "127.0.0.1", 19092)


# -- joining -------------------------------------------------------------------------------------------------


async def test_member_id_required_only_from_join_group_v4(coordinator: Any) -> None:
    old = await join(coordinator, version=3)
    assert old.error == ErrorCode.NONE and old.member_id and old.generation_id == 1
    new = await join(coordinator, group="g2", version=4)
    assert new.error == ErrorCode.MEMBER_ID_REQUIRED and new.member_id


async def test_first_generation_is_one_and_the_leader_gets_the_members(coordinator: Any) -> None:
    member = await join_member(coordinator)
    result = await join(coordinator, member)
    assert (result.error, result.generation_id, result.leader, result.protocol_name) == (
        ErrorCode.NONE, 1, member, "range")
    assert result.members == [(member, None, b"r")]
    assert coordinator.groups["g"].state is ClassicGroupState.COMPLETING_REBALANCE


async def test_join_completes_as_soon_as_every_known_member_rejoined(coordinator: Any) -> None:
    ids, generation = await stable_group(coordinator, 2)
    loop = asyncio.get_running_loop()
    start = loop.time()
    rejoin = [join(coordinator, m, protocols=[("range", b"new")]) for m in ids]
    results = await asyncio.gather(*rejoin)
    assert loop.time() - start < 1.0  # the rebalance timeout is 10 s: nothing waited for it
    assert {r.generation_id for r in results} == {generation + 1}
    assert sum(1 for r in results if r.members) == 1


async def test_initial_rebalance_delay_gathers_members_into_one_generation(broker: FakeBroker) -> None:
    broker.config = BrokerConfig(offsets_topic_num_partitions=3, group_initial_rebalance_delay_ms=200)
    coordinator = await started(broker)
    a, b = await join_member(coordinator), await join_member(coordinator)
    first = join(coordinator, a)
    # b arriving halfway through the 200 ms delay, not with a, is the scenario: a's join stays pending meanwhile
    await holds(lambda: not first.done(), 0.1, what="the initial rebalance delay holding a's join")
    second = join(coordinator, b)
    results = await asyncio.gather(first, second)
    assert [r.generation_id for r in results] == [1, 1]
    await coordinator.stop()


async def test_protocol_is_the_common_one_with_most_votes(coordinator: Any) -> None:
    a = await join_member(coordinator)
    b = await join_member(coordinator)
    c = await join_member(coordinator)
    results = await asyncio.gather(
        join(coordinator, a, protocols=[("range", b""), ("roundrobin", b""), ("sticky", b"")]),
        join(coordinator, b, protocols=[("roundrobin", b""), ("range", b"")]),
        join(coordinator, c, protocols=[("roundrobin", b""), ("sticky", b""), ("range", b"")]),
    )
    assert {r.protocol_name for r in results} == {"roundrobin"}


async def test_a_member_without_a_common_protocol_is_inconsistent(coordinator: Any) -> None:
    await stable_group(coordinator, 1)
    other = await join(coordinator, protocols=[("cooperative-sticky", b"")])
    assert other.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    wrong_type = await join(coordinator, protocol_type="connect")
    assert wrong_type.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


async def test_unknown_member_and_invalid_session_timeout(coordinator: Any) -> None:
    assert (await join(coordinator, "nobody")).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert (await join(coordinator, session_ms=10)).error == ErrorCode.INVALID_SESSION_TIMEOUT


# -- sync, heartbeat, leave, expiry ----------------------------------------------------------------------------


async def test_sync_distributes_the_leaders_assignment(coordinator: Any) -> None:
    ids, generation = await stable_group(coordinator, 3)
    assert coordinator.groups["g"].state is ClassicGroupState.STABLE
    for m in ids:
        again = await sync(coordinator, m, generation)
        assert again.assignment == m.encode() and again.protocol_name == "range"


async def test_stale_generation_and_unknown_members_are_refused(coordinator: Any) -> None:
    (member,), generation = await stable_group(coordinator, 1)
    assert coordinator.heartbeat("g", member, None, generation) == ErrorCode.NONE
    assert coordinator.heartbeat("g", member, None, generation - 1) == ErrorCode.ILLEGAL_GENERATION
    assert coordinator.heartbeat("g", "ghost", None, generation) == ErrorCode.UNKNOWN_MEMBER_ID
    assert (await sync(coordinator, member, generation + 1)).error == ErrorCode.ILLEGAL_GENERATION
    assert await commit(coordinator, generation + 1, member) == [ErrorCode.ILLEGAL_GENERATION]


async def test_heartbeat_says_rebalance_in_progress_when_a_member_joins(coordinator: Any) -> None:
    (member,), generation = await stable_group(coordinator, 1)
    newcomer = join(coordinator, await join_member(coordinator))
    await asyncio.sleep(0)
    assert coordinator.heartbeat("g", member, None, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    assert await commit(coordinator, generation, member) == [ErrorCode.NONE]  # allowed while preparing
    rejoined = await join(coordinator, member)
    assert rejoined.generation_id == generation + 1 and (await newcomer).generation_id == generation + 1


async def test_leave_rebalances_the_rest(coordinator: Any) -> None:
    (a, b), generation = await stable_group(coordinator, 2)
    error, results = coordinator.leave_group("g", [(b, None), ("ghost", None)])
    assert error == ErrorCode.NONE
    assert [r[2] for r in results] == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
    assert coordinator.heartbeat("g", a, None, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    result = await join(coordinator, a)
    assert result.generation_id == generation + 1 and [m[0] for m in result.members] == [a]


async def test_the_last_member_leaving_empties_the_group(coordinator: Any) -> None:
    (a,), generation = await stable_group(coordinator, 1)
    coordinator.leave_group("g", [(a, None)])
    group = coordinator.groups["g"]
    assert group.state is ClassicGroupState.EMPTY and group.generation_id == generation + 1


@pytest.mark.parametrize("broker", [{"group_min_session_timeout_ms": 100}], indirect=True)
async def test_session_timeout_expires_a_silent_member(broker: FakeBroker, coordinator: Any) -> None:
    a = await join_member(coordinator, session_ms=300)
    b = await join_member(coordinator, session_ms=300)
    results = await asyncio.gather(join(coordinator, a, session_ms=300), join(coordinator, b, session_ms=300))
    generation = results[0].generation_id
    await asyncio.gather(sync(coordinator, a, generation), sync(coordinator, b, generation))

    def b_expired() -> bool:
        coordinator.heartbeat("g", a, None, generation)  # a keeps heartbeating, b is silent
        return b not in coordinator.groups["g"].members

    await wait_for(b_expired, timeout=5, interval=0.1, what="the silent member expired")
    assert coordinator.heartbeat("g", a, None, generation) == ErrorCode.REBALANCE_IN_PROGRESS


@pytest.mark.parametrize("broker", [{"group_min_session_timeout_ms": 1_000, "group_max_session_timeout_ms": 20_000}],
                         indirect=True)
async def test_a_session_timeout_outside_the_configured_bounds_is_refused(coordinator: Any) -> None:
    """group.min.session.timeout.ms and group.max.session.timeout.ms, as Kafka's: INVALID_SESSION_TIMEOUT outside."""
    for session_ms, expected in ((999, ErrorCode.INVALID_SESSION_TIMEOUT), (20_001, ErrorCode.INVALID_SESSION_TIMEOUT),
                                 (1_000, ErrorCode.MEMBER_ID_REQUIRED), (20_000, ErrorCode.MEMBER_ID_REQUIRED)):
        assert (await join(coordinator, session_ms=session_ms)).error == expected, session_ms


@pytest.mark.parametrize("broker", [{"group_min_session_timeout_ms": 100}], indirect=True)
async def test_a_pending_member_that_never_returns_stops_blocking_the_join(coordinator: Any) -> None:
    (a,), generation = await stable_group(coordinator, 1)
    await join_member(coordinator, session_ms=200)  # gets an id, never comes back
    result = await asyncio.wait_for(join(coordinator, a, protocols=[("range", b"x")]), 2)
    assert result.generation_id == generation + 1


async def test_rebalance_timeout_removes_members_that_did_not_rejoin(coordinator: Any) -> None:
    a = await join_member(coordinator, rebalance_ms=300)
    b = await join_member(coordinator, rebalance_ms=300)
    results = await asyncio.gather(join(coordinator, a, rebalance_ms=300), join(coordinator, b, rebalance_ms=300))
    generation = results[0].generation_id
    await asyncio.gather(sync(coordinator, a, generation), sync(coordinator, b, generation))
    result = await asyncio.wait_for(join(coordinator, a, rebalance_ms=300, protocols=[("range", b"x")]), 2)
    assert [m[0] for m in result.members] == [a]


async def test_static_member_rejoining_fences_its_old_id_and_keeps_its_assignment(coordinator: Any) -> None:
    first = await join(coordinator, instance="i1")
    assert first.error == ErrorCode.NONE  # static members skip MEMBER_ID_REQUIRED
    await sync(coordinator, first.member_id, first.generation_id, {first.member_id: b"A"})
    second = join(coordinator, instance="i2")
    await asyncio.sleep(0)
    leader, follower = await asyncio.gather(join(coordinator, first.member_id, instance="i1"), second)
    generation = leader.generation_id
    assert leader.leader == first.member_id and follower.generation_id == generation
    await asyncio.gather(sync(coordinator, first.member_id, generation, {first.member_id: b"A",
                                                                          follower.member_id: b"B"}),
                         sync(coordinator, follower.member_id, generation))
    restarted = await join(coordinator, instance="i2")  # same instance, new process: no rebalance
    assert restarted.error == ErrorCode.NONE and restarted.generation_id == generation
    assert coordinator.heartbeat("g", follower.member_id, "i2", generation) == ErrorCode.FENCED_INSTANCE_ID
    assert (await sync(coordinator, restarted.member_id, generation)).assignment == b"B"


async def static_pair(coordinator: Any) -> tuple[str, str, int]:
    """A Stable group of static members i1 (the leader, assigned b"A") and i2 (b"B"): (leader, follower, gen)."""
    first = await join(coordinator, instance="i1")
    await sync(coordinator, first.member_id, first.generation_id, {first.member_id: b"A"})
    second = join(coordinator, instance="i2")
    await asyncio.sleep(0)
    leader, follower = await asyncio.gather(join(coordinator, first.member_id, instance="i1"), second)
    generation = leader.generation_id
    await asyncio.gather(sync(coordinator, first.member_id, generation, {first.member_id: b"A",
                                                                          follower.member_id: b"B"}),
                         sync(coordinator, follower.member_id, generation))
    return first.member_id, follower.member_id, generation


async def test_a_restarted_static_leader_keeps_the_assignment_without_a_rebalance_from_join_group_v9(
        coordinator: Any) -> None:
    """KIP-814: the leader learns the members but is told not to assign again; the follower never rebalances."""
    old_leader, follower, generation = await static_pair(coordinator)
    restarted = await join(coordinator, instance="i1", version=9)
    assert (restarted.error, restarted.generation_id, restarted.skip_assignment) == (ErrorCode.NONE, generation, True)
    assert restarted.leader == restarted.member_id != old_leader
    assert sorted(m[1] for m in restarted.members) == ["i1", "i2"]
    assert coordinator.heartbeat("g", follower, "i2", generation) == ErrorCode.NONE
    assert coordinator.heartbeat("g", old_leader, "i1", generation) == ErrorCode.FENCED_INSTANCE_ID
    assert (await sync(coordinator, restarted.member_id, generation)).assignment == b"A"
    assert coordinator.describe_group("g")[1].generation_id == generation


async def test_a_restarted_static_leader_rebalances_the_group_below_join_group_v9(coordinator: Any) -> None:
    """As Kafka: a client that cannot skip the assignment must compute it again, so the group rebalances."""
    _, follower, generation = await static_pair(coordinator)
    restarted = join(coordinator, instance="i1", version=7)
    await asyncio.sleep(0)
    assert coordinator.heartbeat("g", follower, "i2", generation) == ErrorCode.REBALANCE_IN_PROGRESS
    rejoined = await asyncio.gather(restarted, join(coordinator, follower, instance="i2", version=7))
    assert {r.generation_id for r in rejoined} == {generation + 1}
    assert not any(r.skip_assignment for r in rejoined)


# -- offsets ---------------------------------------------------------------------------------------------------


async def test_simple_commit_and_fetch_carry_the_leader_epoch(coordinator: Any) -> None:
    assert await commit(coordinator, offset=42, epoch=7) == [ErrorCode.NONE]
    error, offsets = coordinator.fetch_offsets("g", [("t", [0, 1])])
    assert error == ErrorCode.NONE
    assert [(o.partition, o.offset, o.leader_epoch, o.metadata) for o in offsets] == [
        (0, 42, 7, "meta"), (1, -1, -1, "")]


async def test_commits_to_unknown_partitions_and_of_non_members_are_refused(coordinator: Any) -> None:
    assert await commit(coordinator, topic="nope") == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert await commit(coordinator, partition=99) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    await stable_group(coordinator, 1)
    assert await commit(coordinator) == [ErrorCode.UNKNOWN_MEMBER_ID]  # generation -1 while it has members


async def test_commit_during_completing_rebalance_must_wait(coordinator: Any) -> None:
    member = await join_member(coordinator)
    result = await join(coordinator, member)
    assert await commit(coordinator, result.generation_id, member) == [ErrorCode.REBALANCE_IN_PROGRESS]


async def test_offsets_and_groups_survive_a_restart(broker: FakeBroker, coordinator: Any) -> None:
    (member,), generation = await stable_group(coordinator, 1)
    assert await commit(coordinator, generation, member, offset=10, epoch=2) == [ErrorCode.NONE]
    assert await commit(coordinator, group="simple", offset=3, epoch=1, partition=5) == [ErrorCode.NONE]
    await coordinator.stop()
    reloaded = await started(broker)
    group = reloaded.groups["g"]
    assert (group.state, group.generation_id, list(group.members)) == (ClassicGroupState.STABLE, generation, [member])
    assert reloaded.heartbeat("g", member, None, generation) == ErrorCode.NONE
    assert [(o.offset, o.leader_epoch) for o in reloaded.fetch_offsets("g", [("t", [0])])[1]] == [(10, 2)]
    assert [(o.offset, o.leader_epoch) for o in reloaded.fetch_offsets("simple", None)[1]] == [(3, 1)]
    await reloaded.stop()


async def test_the_offsets_topic_is_created_lazily_by_the_first_group_request(broker: FakeBroker) -> None:
    coordinator = GroupCoordinator(broker)
    await coordinator.start()
    assert OFFSETS_TOPIC not in broker.metadata.topics_by_name  # broker start creates nothing
    assert coordinator.coordinator_error("g") == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert coordinator.fetch_offsets("g", None)[0] == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert await commit(coordinator, offset=4) == [ErrorCode.NONE]  # a group write creates it
    assert OFFSETS_TOPIC in broker.metadata.topics_by_name
    assert [o.offset for o in coordinator.fetch_offsets("g", [("t", [0])])[1]] == [4]
    await coordinator.stop()


async def test_loading_after_a_restart_runs_in_the_background(broker: FakeBroker, coordinator: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("epoch_broker.broker.groups.coordinator.LOAD_YIELD_RECORDS", 2)
    for partition in range(3):
        assert await commit(coordinator, partition=partition, offset=10 + partition) == [ErrorCode.NONE]
    await coordinator.stop()
    reloaded = GroupCoordinator(broker)
    await reloaded.start()  # returns before the partitions are replayed
    assert reloaded.coordinator_error("g") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert reloaded.fetch_offsets("g", None)[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert (await join(reloaded, group="g")).error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    await reloaded.wait_loaded()
    assert reloaded.coordinator_error("g") == ErrorCode.NONE
    assert [o.offset for o in reloaded.fetch_offsets("g", None)[1]] == [10, 11, 12]
    await reloaded.stop()


async def test_the_log_uses_kafkas_record_formats(broker: FakeBroker, coordinator: Any) -> None:
    await commit(coordinator, offset=10, epoch=2)
    partition = partition_for("g", 3)
    (record,) = broker.replica_manager.logs[(OFFSETS_TOPIC, partition)]
    key, value = record.key, record.value
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x00"  # OffsetCommitKey v1
    assert value[:2] == b"\x00\x03"  # OffsetCommitValue v3: offset, leader epoch, metadata, commit time
    decoded = records.decode_offset_value(value)
    assert (decoded.offset, decoded.leader_epoch, decoded.metadata) == (10, 2, "meta")


async def test_a_deleted_and_recreated_topic_does_not_resurrect_offsets(broker: FakeBroker, coordinator: Any) -> None:
    await commit(coordinator, offset=10)
    delete_topic(broker, "t")
    await asyncio.sleep(0)  # the tombstones are written by a task
    await asyncio.sleep(0)
    add_topic(broker.metadata, "t", 6)
    assert [o.offset for o in coordinator.fetch_offsets("g", [("t", [0])])[1]] == [-1]
    await coordinator.stop()
    reloaded = await started(broker)
    assert [o.offset for o in reloaded.fetch_offsets("g", [("t", [0])])[1]] == [-1]
    await reloaded.stop()


async def test_delete_groups_removes_offsets_durably(broker: FakeBroker, coordinator: Any) -> None:
    (member,), generation = await stable_group(coordinator, 1)
    await commit(coordinator, generation, member)
    assert await coordinator.delete_group("g") == ErrorCode.NON_EMPTY_GROUP
    coordinator.leave_group("g", [(member, None)])
    assert await coordinator.delete_group("g") == ErrorCode.NONE
    assert await coordinator.delete_group("g") == ErrorCode.GROUP_ID_NOT_FOUND
    assert coordinator.fetch_offsets("g", [("t", [0])])[1][0].offset == -1
    await coordinator.stop()
    reloaded = await started(broker)
    assert "g" not in reloaded.groups
    await reloaded.stop()


async def test_offset_delete_refuses_subscribed_topics(coordinator: Any) -> None:
    subscription = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"
    member = await join_member(coordinator, protocols=[("range", subscription)])
    result = await join(coordinator, member, protocols=[("range", subscription)])
    await sync(coordinator, member, result.generation_id)
    add_topic(coordinator.broker.metadata, "u", 1)
    await commit(coordinator, result.generation_id, member, topic="t")
    await commit(coordinator, result.generation_id, member, topic="u")
    error, errors = await coordinator.delete_offsets("g", [("t", 0), ("u", 0)])
    assert (error, errors) == (ErrorCode.NONE, [ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ErrorCode.NONE])
    assert [o.topic for o in coordinator.fetch_offsets("g", None)[1]] == ["t"]
    assert (await coordinator.delete_offsets("nope", [("t", 0)]))[0] == ErrorCode.GROUP_ID_NOT_FOUND


async def test_offsets_expire_after_retention_in_an_empty_group(broker: FakeBroker, coordinator: Any) -> None:
    await commit(coordinator, group="simple")
    coordinator.retention_ms = 0
    await coordinator.expire_offsets()
    assert "simple" not in coordinator.groups
    assert coordinator.fetch_offsets("simple", [("t", [0])])[1][0].offset == -1


async def test_a_failed_append_fails_the_commit_and_keeps_the_old_offset(broker: FakeBroker, coordinator: Any) -> None:
    await commit(coordinator, offset=1)
    broker.replica_manager.fail_appends = True
    assert await commit(coordinator, offset=2) == [ErrorCode.NOT_ENOUGH_REPLICAS]
    assert coordinator.fetch_offsets("g", [("t", [0])])[1][0].offset == 1


async def test_list_and_describe(coordinator: Any) -> None:
    (member,), _ = await stable_group(coordinator, 1)
    await commit(coordinator, group="simple")
    listed = {g.group_id: g.state.value for g in coordinator.list_groups(set())}
    assert listed == {"g": "Stable", "simple": "Empty"}
    assert [g.group_id for g in coordinator.list_groups({"stable"})] == ["g"]
    error, group = coordinator.describe_group("g")
    assert error == ErrorCode.NONE and group.members[member].assignment == member.encode()


def test_session_timeout_bounds_are_configs_and_must_be_in_order() -> None:
    config = build_config([("group.min.session.timeout.ms", "1000"), ("group.max.session.timeout.ms", "20000")])
    assert (config.group_min_session_timeout_ms, config.group_max_session_timeout_ms) == (1000, 20000)
    with pytest.raises(ConfigError, match="is above group"):
        build_config([("group.min.session.timeout.ms", "30000"), ("group.max.session.timeout.ms", "20000")])


# -- share-partition state (KIP-932, share_state.py) ----------------------------------------------------------


async def test_share_state_is_fenced_by_leader_epoch_and_state_epoch_and_survives_a_restart(
        broker: FakeBroker, coordinator: Any) -> None:
    key = records.ShareSnapshotKey("workers", uuid.uuid4().bytes, 2)
    assert await coordinator.read_share_state(key, 4) == (ErrorCode.NONE, NOT_WRITTEN)  # uninitialized: start -1
    state = ShareState(0, 4, 10, (StateBatch(10, 14, 2, 1), StateBatch(15, 19, 0, 3)))
    assert await coordinator.write_share_state(key, state) == ErrorCode.NONE
    assert await coordinator.write_share_state(key, state._replace(state_epoch=1)) == ErrorCode.FENCED_STATE_EPOCH

    # A new leader reads at epoch 5: the stored epoch moves on, so the leader of epoch 4 is fenced from then on.
    error, read = await coordinator.read_share_state(key, 5)
    assert (error, read.leader_epoch, read.start_offset, read.state_batches) == (
        ErrorCode.NONE, 5, 10, state.state_batches)
    assert await coordinator.write_share_state(key, state._replace(start_offset=20)) == ErrorCode.FENCED_LEADER_EPOCH
    assert (await coordinator.read_share_state(key, 4))[0] == ErrorCode.FENCED_LEADER_EPOCH
    newer = ShareState(0, 5, 15, (StateBatch(15, 19, 4, 3),))
    assert await coordinator.write_share_state(key, newer) == ErrorCode.NONE

    # Another broker coordinating the group later replays the same state from the log, with the fencing.
    await coordinator.stop()
    successor = await started(broker)
    try:
        assert (await successor.write_share_state(key, state)) == ErrorCode.FENCED_LEADER_EPOCH
        error, replayed = await successor.read_share_state(key, 5)
        assert (error, replayed[:4]) == (ErrorCode.NONE, newer[:4])
    finally:
        await successor.stop()


async def test_a_share_groups_tombstones_cover_its_share_state(broker: FakeBroker, coordinator: Any) -> None:
    key = records.ShareSnapshotKey("g", uuid.uuid4().bytes, 0)
    assert await coordinator.write_share_state(key, ShareState(0, 0, 3, ())) == ErrorCode.NONE
    shard = coordinator.shard_of("g")
    assert shard.share_states.tombstones("g") == [(records.share_snapshot_key(key), None)]
    shard.share_states.forget("g")
    assert await coordinator.read_share_state(key, 0) == (ErrorCode.NONE, NOT_WRITTEN)


# -- share group offsets (KIP-932): Describe/Alter/DeleteShareGroupOffsets ------------------------------------


def test_the_lag_leaves_out_the_records_past_the_start_delivered_for_good() -> None:
    # start 4: 4-5 available, 6-9 acknowledged, 10 archived, 11-12 acquired (available in the state)
    state = ShareState(0, 0, 4, (StateBatch(4, 5, 0, 2), StateBatch(6, 9, 2, 1), StateBatch(10, 10, 4, 3),
                                 StateBatch(11, 12, 0, 1)))
    assert delivery_complete_count(state) == 5
    assert delivery_complete_count(state._replace(start_offset=8)) == 3  # a batch straddling the start counts from it


async def test_alter_makes_an_empty_share_group_and_fences_the_leaders_of_the_old_state(
        broker: FakeBroker, coordinator: Any) -> None:
    topic_id = broker.metadata.topics_by_name["t"].topic_id
    key = records.ShareSnapshotKey("queue", topic_id, 1)
    assert await coordinator.write_share_state(key, ShareState(0, 3, 10, (StateBatch(10, 12, 0, 1),))) == ErrorCode.NONE

    answer = await coordinator.alter_share_group_offsets("queue", [("t", [(1, 2), (6, 0)]), ("missing", [(0, 0)])])
    assert answer == [("t", topic_id, [(1, ErrorCode.NONE), (6, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]),
                      ("missing", bytes(16), [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])]
    assert isinstance(coordinator.groups["queue"], ShareGroup) and coordinator.groups["queue"].is_empty()
    # The leader still holding state epoch 0 is fenced and reads the new state: start 2, nothing in flight.
    assert await coordinator.write_share_state(key, ShareState(0, 3, 13, ())) == ErrorCode.FENCED_STATE_EPOCH
    error, read = await coordinator.read_share_state(key, 3)
    assert (error, read.state_epoch, read.start_offset, read.state_batches) == (ErrorCode.NONE, 1, 2, ())
    assert coordinator.describe_share_group_offsets("queue", None) == (
        ErrorCode.NONE, [("t", topic_id, [SharePartitionOffset(1, 2, 3, -1)])])

    # The group and its offsets are in the log: the coordinator's successor has them.
    await coordinator.stop()
    successor = await started(broker)
    try:
        assert isinstance(successor.groups["queue"], ShareGroup)
        assert successor.describe_share_group_offsets("queue", [("t", [1, 0]), ("missing", [0])]) == (
            ErrorCode.NONE, [("t", topic_id, [SharePartitionOffset(1, 2, 3, -1), SharePartitionOffset(0)]),
                             ("missing", bytes(16), [SharePartitionOffset(0)])])
    finally:
        await successor.stop()


async def test_alter_and_delete_refuse_other_group_types_and_share_groups_with_members(coordinator: Any) -> None:
    assert await commit(coordinator, group="classic") == [ErrorCode.NONE]
    assert await coordinator.alter_share_group_offsets("classic", [("t", [(0, 0)])]) == ShareOffsetsError(
        ErrorCode.GROUP_ID_NOT_FOUND, "Group classic is not a share group.")
    assert await coordinator.delete_share_group_offsets("classic", ["t"]) == ShareOffsetsError(
        ErrorCode.GROUP_ID_NOT_FOUND, "Group classic is not a share group.")
    assert await coordinator.delete_share_group_offsets("nobody", ["t"]) == ShareOffsetsError(
        ErrorCode.GROUP_ID_NOT_FOUND, "Group nobody not found.")
    assert "nobody" not in coordinator.groups  # unlike an alter, a delete makes no group

    await coordinator.share_group_heartbeat(ShareHeartbeatRequest("busy", uuid.uuid4().hex, 0, None, ["t"]))
    assert await coordinator.alter_share_group_offsets("busy", [("t", [(0, 0)])]) == ShareOffsetsError(
        ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")
    assert await coordinator.delete_share_group_offsets("busy", ["t"]) == ShareOffsetsError(
        ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")


async def test_delete_leaves_an_unset_start_at_a_newer_state_epoch_not_a_tombstone(
        broker: FakeBroker, coordinator: Any) -> None:
    topic_id = broker.metadata.topics_by_name["t"].topic_id
    add_topic(broker.metadata, "other", 1)
    assert await coordinator.alter_share_group_offsets("queue", [("t", [(0, 5), (1, 7)])]) == [
        ("t", topic_id, [(0, ErrorCode.NONE), (1, ErrorCode.NONE)])]

    assert await coordinator.delete_share_group_offsets("queue", ["t", "other", "missing", "t"]) == [
        ("t", topic_id, ErrorCode.NONE, None),
        ("other", broker.metadata.topics_by_name["other"].topic_id, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
         "There is no offset information to delete."),
        ("missing", bytes(16), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")]
    assert coordinator.describe_share_group_offsets("queue", None) == (ErrorCode.NONE, [])
    # A leader that read the state at epoch 1 (the alter's) is fenced: a tombstone would have let it write.
    key = records.ShareSnapshotKey("queue", topic_id, 0)
    assert await coordinator.write_share_state(key, ShareState(1, 0, 9, ())) == ErrorCode.FENCED_STATE_EPOCH
    error, read = await coordinator.read_share_state(key, 0)
    assert (error, read.state_epoch, read.start_offset) == (ErrorCode.NONE, 2, -1)  # the leader starts afresh
    assert (await coordinator.delete_share_group_offsets("queue", ["t"]))[0][2] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_an_alter_that_cannot_be_written_leaves_neither_the_group_nor_the_offsets(
        broker: FakeBroker, coordinator: Any) -> None:
    broker.replica_manager.fail_appends = True
    assert await coordinator.alter_share_group_offsets("queue", [("t", [(0, 5)])]) == ShareOffsetsError(
        ErrorCode.NOT_ENOUGH_REPLICAS)
    assert "queue" not in coordinator.groups
    key = records.ShareSnapshotKey("queue", broker.metadata.topics_by_name["t"].topic_id, 0)
    broker.replica_manager.fail_appends = False
    assert await coordinator.read_share_state(key, 0) == (ErrorCode.NONE, NOT_WRITTEN)
