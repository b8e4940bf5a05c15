"""Transactional offset commits (TxnOffsetCommit, KIP-98) in the group coordinator: pending until the producer's
marker, committed or dropped by it, live and when loading, against the fake broker of test_coordinator.py; and the
TxnOffsetCommit handler over the wire against an in-process broker.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from epoch_broker import testing
from epoch_broker.broker.groups.classic_group import ClassicGroupState
from epoch_broker.broker.groups.coordinator import OFFSETS_TOPIC, GroupCoordinator, OffsetToCommit, partition_for
from epoch_broker.broker.handlers import txn_offset_commit as handler
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.client.aio import KafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import offset_fetch, txn_offset_commit, write_txn_markers
from epoch_broker.protocol.records import iter_batches
from tests.broker.conftest import create_topic
from tests.groups import test_coordinator
from tests.groups.test_coordinator import FakeBroker, commit, join, stable_group, started

broker, coordinator = test_coordinator.broker, test_coordinator.coordinator  # the fake broker's fixtures

PID, EPOCH = 7, 0
PARTITION = partition_for("g", 3)  # of __consumer_offsets, in the fake broker's 3


def txn_commit(coordinator: GroupCoordinator, offset: int = 5, *, producer_id: int = PID, epoch: int = EPOCH,
               group: str = "g", generation: int = -1, member: str = "", instance: str | None = None,
               partition: int = 0) -> Any:
    return coordinator.commit_txn_offsets(group, producer_id, epoch, generation, member, instance,
                                          [OffsetToCommit("t", partition, offset, 2, "txn")])


def committed(coordinator: GroupCoordinator, partition: int = 0, *, require_stable: bool = False,
              group: str = "g") -> tuple[int, ErrorCode]:
    (fetched,) = coordinator.fetch_offsets(group, [("t", [partition])], require_stable)[1]
    return fetched.offset, fetched.error


def pending(coordinator: GroupCoordinator, group: str) -> dict[int, dict[tuple[str, int], Any]]:
    """The group's transactional offsets pending per producer id (kept by its shard's offset manager)."""
    shard = coordinator.shard_of(group)
    assert shard is not None
    offsets = shard.offsets.offsets_of(group)
    return {} if offsets is None else offsets.pending_txn_offsets


def marker(broker: FakeBroker, commit: bool) -> None:
    """The transaction coordinator's marker of PID, as it lands in the group's `__consumer_offsets` partition."""
    broker.replica_manager.append_marker(OFFSETS_TOPIC, PARTITION, PID, commit)


async def restarted(broker: FakeBroker, coordinator: GroupCoordinator) -> GroupCoordinator:
    await coordinator.stop()
    return await started(broker)


# -- live ------------------------------------------------------------------------------------------------------


async def test_a_txn_commit_is_one_transactional_batch_pending_until_the_commit_marker(
        broker: FakeBroker, coordinator: Any) -> None:
    assert await commit(coordinator, offset=1) == [ErrorCode.NONE]
    offsets = [OffsetToCommit("t", p, 10 + p, 2, "txn") for p in (0, 1)]
    assert await coordinator.commit_txn_offsets("g", PID, EPOCH, -1, "", None, offsets) == [ErrorCode.NONE] * 2
    plain, *txn = broker.replica_manager.logs[(OFFSETS_TOPIC, PARTITION)]
    assert (plain.producer_id, plain.transactional) == (-1, False)
    assert [(r.offset, r.producer_id, r.transactional) for r in txn] == [(1, PID, True), (2, PID, True)]
    assert committed(coordinator) == (1, ErrorCode.NONE)  # the last committed one, not the pending one
    assert committed(coordinator, 1) == (-1, ErrorCode.NONE)
    coordinator.complete_txn(PID, PARTITION + 1, True)  # another partition's marker
    coordinator.complete_txn(PID + 1, PARTITION, True)  # another producer's marker
    assert committed(coordinator) == (1, ErrorCode.NONE)
    coordinator.complete_txn(PID, PARTITION, True)
    assert [committed(coordinator, p) for p in (0, 1)] == [(10, ErrorCode.NONE), (11, ErrorCode.NONE)]
    (fetched, _) = coordinator.fetch_offsets("g", None)[1]
    assert (fetched.leader_epoch, fetched.metadata) == (2, "txn")
    assert pending(coordinator, "g") == {}


async def test_an_abort_marker_drops_the_pending_offsets(coordinator: Any) -> None:
    await commit(coordinator, offset=1)
    await txn_commit(coordinator, 5)
    coordinator.complete_txn(PID, PARTITION, False)
    assert committed(coordinator, require_stable=True) == (1, ErrorCode.NONE)
    coordinator.complete_txn(PID, PARTITION, True)  # the producer's next transaction does not bring them back
    assert committed(coordinator) == (1, ErrorCode.NONE)


async def test_require_stable_answers_unstable_offset_commit_for_a_pending_partition(coordinator: Any) -> None:
    await commit(coordinator, offset=1)
    await commit(coordinator, offset=3, partition=1)
    await txn_commit(coordinator, 5)
    assert committed(coordinator, require_stable=True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    assert committed(coordinator, 1, require_stable=True) == (3, ErrorCode.NONE)
    every = coordinator.fetch_offsets("g", None, True)[1]
    assert [(o.partition, o.error) for o in every] == [(0, ErrorCode.UNSTABLE_OFFSET_COMMIT), (1, ErrorCode.NONE)]
    coordinator.complete_txn(PID, PARTITION, True)
    assert committed(coordinator, require_stable=True) == (5, ErrorCode.NONE)


@pytest.mark.parametrize("txn_first", [True, False])
async def test_a_txn_offset_never_overwrites_a_plain_commit_appended_after_it(coordinator: Any,
                                                                             txn_first: bool) -> None:
    """Kafka's CommitRecordMetadataAndOffset order: the record appended later wins, whenever the marker comes."""
    if txn_first:
        await txn_commit(coordinator, 5)
        await commit(coordinator, offset=9)
    else:
        await commit(coordinator, offset=9)
        await txn_commit(coordinator, 5)
    coordinator.complete_txn(PID, PARTITION, True)
    assert committed(coordinator) == ((9, ErrorCode.NONE) if txn_first else (5, ErrorCode.NONE))


async def test_an_abort_during_the_append_drops_the_offsets(broker: FakeBroker, coordinator: Any,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Pending from the start of the append (as Kafka): an abort marker that completes before the append does
    (a transaction timed out) is not followed by offsets that stay pending for the producer's next transaction."""
    replicated = asyncio.Event()
    append = broker.replica_manager.append_internal

    async def slow_replication(*args: Any) -> int:
        base = await append(*args)
        await replicated.wait()
        return base

    monkeypatch.setattr(broker.replica_manager, "append_internal", slow_replication)
    answer = asyncio.ensure_future(txn_commit(coordinator, 5))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert committed(coordinator, require_stable=True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    coordinator.complete_txn(PID, PARTITION, False)
    replicated.set()
    assert await answer == [ErrorCode.NONE]
    assert pending(coordinator, "g") == {}
    coordinator.complete_txn(PID, PARTITION, True)
    assert committed(coordinator) == (-1, ErrorCode.NONE)


async def test_a_stale_producer_epoch_or_a_failed_append_keeps_what_was_pending(broker: FakeBroker,
                                                                               coordinator: Any) -> None:
    assert await txn_commit(coordinator, 5, epoch=3) == [ErrorCode.NONE]
    # A zombie of the producer (older epoch) is refused by the partition and does not replace the pending offset.
    assert await txn_commit(coordinator, 6, epoch=2) == [ErrorCode.INVALID_PRODUCER_EPOCH]
    broker.replica_manager.fail_appends = True
    assert await txn_commit(coordinator, 7, epoch=3) == [ErrorCode.NOT_ENOUGH_REPLICAS]
    assert committed(coordinator, require_stable=True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    coordinator.complete_txn(PID, PARTITION, True)
    assert committed(coordinator, require_stable=True) == (5, ErrorCode.NONE)
    assert await txn_commit(coordinator, 8, group="other", epoch=3) == [ErrorCode.NOT_ENOUGH_REPLICAS]
    assert "other" in coordinator.groups and pending(coordinator, "other") == {}


async def test_per_partition_errors_and_a_new_group_created_empty(coordinator: Any) -> None:
    offsets = [OffsetToCommit("t", 0, 5, -1, "m"), OffsetToCommit("t", 99, 5, -1, None),
               OffsetToCommit("nope", 0, 5, -1, None), OffsetToCommit("t", 1, 5, -1, "x" * 4097)]
    assert await coordinator.commit_txn_offsets("new", PID, EPOCH, -1, "", None, offsets) == [
        ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.OFFSET_METADATA_TOO_LARGE]
    group = coordinator.groups["new"]
    assert group.state is ClassicGroupState.EMPTY and list(pending(coordinator, "new")[PID]) == [("t", 0)]
    assert await txn_commit(coordinator, group="") == [ErrorCode.INVALID_GROUP_ID]


async def test_generation_and_member_are_checked_when_given(coordinator: Any) -> None:
    (member,), generation = await stable_group(coordinator, 1)
    assert await txn_commit(coordinator, generation=generation + 1, member=member) == [ErrorCode.ILLEGAL_GENERATION]
    assert await txn_commit(coordinator, generation=generation, member="ghost") == [ErrorCode.UNKNOWN_MEMBER_ID]
    assert await txn_commit(coordinator, group="fresh", generation=1, member="m") == [ErrorCode.UNKNOWN_MEMBER_ID]
    assert await txn_commit(coordinator, generation=generation, member=member) == [ErrorCode.NONE]
    # Before v3 a TxnOffsetCommit names no member: accepted while the group has members, unlike an OffsetCommit.
    assert await txn_commit(coordinator) == [ErrorCode.NONE]
    assert await commit(coordinator) == [ErrorCode.UNKNOWN_MEMBER_ID]


async def test_a_fenced_static_member_and_a_rebalance(coordinator: Any) -> None:
    first = await join(coordinator, instance="i1")
    replaced = await join(coordinator, instance="i1")  # the same instance restarted: the old member id is fenced
    assert replaced.error == ErrorCode.NONE and replaced.member_id != first.member_id
    generation = replaced.generation_id
    assert await txn_commit(coordinator, generation=generation, member=first.member_id, instance="i1") == [
        ErrorCode.FENCED_INSTANCE_ID]
    # CompletingRebalance: an OffsetCommit must wait for the assignment, a TxnOffsetCommit is taken, as in Kafka.
    assert coordinator.groups["g"].state is ClassicGroupState.COMPLETING_REBALANCE
    assert await commit(coordinator, generation, replaced.member_id) == [ErrorCode.REBALANCE_IN_PROGRESS]
    assert await txn_commit(coordinator, generation=generation, member=replaced.member_id, instance="i1") == [
        ErrorCode.NONE]


# -- deletion and expiry ---------------------------------------------------------------------------------------


async def test_a_group_with_only_pending_offsets_is_neither_expired_nor_removed(coordinator: Any) -> None:
    await commit(coordinator, offset=1)  # becomes expired, but a pending offset may still replace it
    await commit(coordinator, offset=2, partition=1)
    await txn_commit(coordinator, 5)
    await txn_commit(coordinator, 6, group="only-pending")
    coordinator.retention_ms = 0
    await coordinator.expire_offsets()
    assert [o.partition for o in coordinator.fetch_offsets("g", None)[1]] == [0]
    assert "only-pending" in coordinator.groups
    coordinator.complete_txn(PID, partition_for("only-pending", 3), True)
    assert committed(coordinator, group="only-pending") == (6, ErrorCode.NONE)
    coordinator.complete_txn(PID, PARTITION, False)
    await coordinator.expire_offsets()
    assert "g" not in coordinator.groups


async def test_deleted_offsets_take_pending_ones_along_live_and_after_a_restart(broker: FakeBroker,
                                                                                coordinator: Any) -> None:
    await txn_commit(coordinator, 5)
    await txn_commit(coordinator, 6, partition=1)
    assert await coordinator.delete_offsets("g", [("t", 0)]) == (ErrorCode.NONE, [ErrorCode.NONE])
    assert committed(coordinator, require_stable=True) == (-1, ErrorCode.NONE)
    marker(broker, True)
    coordinator.complete_txn(PID, PARTITION, True)
    assert [committed(coordinator, p) for p in (0, 1)] == [(-1, ErrorCode.NONE), (6, ErrorCode.NONE)]
    reloaded = await restarted(broker, coordinator)
    assert [committed(reloaded, p) for p in (0, 1)] == [(-1, ErrorCode.NONE), (6, ErrorCode.NONE)]
    await reloaded.stop()


async def test_delete_groups_takes_pending_offsets_along_and_they_do_not_come_back(broker: FakeBroker,
                                                                                   coordinator: Any) -> None:
    await txn_commit(coordinator, 5)
    assert await coordinator.delete_group("g") == ErrorCode.NONE
    marker(broker, True)
    coordinator.complete_txn(PID, PARTITION, True)
    assert "g" not in coordinator.groups
    reloaded = await restarted(broker, coordinator)
    assert "g" not in reloaded.groups
    await reloaded.stop()


# -- loading ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("commit_marker", [True, False])
async def test_loading_applies_the_marker_in_the_log(broker: FakeBroker, coordinator: Any,
                                                     commit_marker: bool) -> None:
    await commit(coordinator, offset=1)
    await txn_commit(coordinator, 5)
    await txn_commit(coordinator, 8, producer_id=PID + 1)  # another producer's: its marker is not in the log
    marker(broker, commit_marker)
    reloaded = await restarted(broker, coordinator)
    assert committed(reloaded) == ((5, ErrorCode.NONE) if commit_marker else (1, ErrorCode.NONE))
    assert list(pending(reloaded, "g")) == [PID + 1]
    reloaded.complete_txn(PID + 1, PARTITION, True)
    assert committed(reloaded) == (8, ErrorCode.NONE)
    await reloaded.stop()


async def test_offsets_still_pending_at_the_end_of_the_log_wait_for_complete_txn(broker: FakeBroker,
                                                                                 coordinator: Any) -> None:
    await txn_commit(coordinator, 5, group="txn-only")
    reloaded = await restarted(broker, coordinator)
    assert reloaded.groups["txn-only"].state is ClassicGroupState.EMPTY  # a group without metadata record, kept
    assert committed(reloaded, require_stable=True, group="txn-only") == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    reloaded.complete_txn(PID, partition_for("txn-only", 3), True)
    assert committed(reloaded, require_stable=True, group="txn-only") == (5, ErrorCode.NONE)
    await reloaded.stop()


@pytest.mark.parametrize("txn_first", [True, False])
async def test_loading_orders_txn_and_plain_commits_by_their_place_in_the_log(broker: FakeBroker, coordinator: Any,
                                                                              txn_first: bool) -> None:
    if txn_first:
        await txn_commit(coordinator, 5)
        await commit(coordinator, offset=9)
    else:
        await commit(coordinator, offset=9)
        await txn_commit(coordinator, 5)
    marker(broker, True)
    reloaded = await restarted(broker, coordinator)
    assert committed(reloaded) == ((9, ErrorCode.NONE) if txn_first else (5, ErrorCode.NONE))
    await reloaded.stop()


# -- the handler ------------------------------------------------------------------------------------------------


class StubContext:
    """What the handler uses of a RequestContext: the ACL decisions (all allowed but `denied`), the version and
    the group coordinator."""

    def __init__(self, coordinator: GroupCoordinator, api_version: int = 3,
                 denied: frozenset[tuple[ResourceType, str]] = frozenset()) -> None:
        self.api_version = api_version
        self.services = SimpleNamespace(group_coordinator=coordinator)
        self.denied = denied

    def authorized(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        return (resource_type, name) not in self.denied


def txn_request(topics: dict[str, list[int]]) -> Any:
    R = txn_offset_commit.REQUEST
    return R.cls(transactional_id="tx", group_id="g", producer_id=PID, producer_epoch=EPOCH, topics=[
        R.TxnOffsetCommitRequestTopic(name=name, partitions=[R.TxnOffsetCommitRequestPartition(
            partition_index=index, committed_offset=42, committed_leader_epoch=-1, committed_metadata=None)
            for index in partitions])
        for name, partitions in topics.items()])


async def handled(context: StubContext, topics: dict[str, list[int]]) -> list[tuple[str, int, int]]:
    response = await handler.handle(context, txn_request(topics))
    return [(t.name, p.partition_index, p.error_code) for t in response.topics for p in t.partitions]


@pytest.mark.parametrize(("denied", "error"), [
    ((ResourceType.TRANSACTIONAL_ID, "tx"), ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ((ResourceType.GROUP, "g"), ErrorCode.GROUP_AUTHORIZATION_FAILED),
])
async def test_the_handler_needs_the_transactional_id_and_the_group(coordinator: Any, denied: Any,
                                                                    error: ErrorCode) -> None:
    context = StubContext(coordinator, denied=frozenset({denied}))
    assert await handled(context, {"t": [0, 1]}) == [("t", 0, error), ("t", 1, error)]
    assert "g" not in coordinator.groups  # nothing committed, no group made


async def test_the_handler_commits_the_readable_topics_only(coordinator: Any) -> None:
    test_coordinator.add_topic(coordinator.broker.metadata, "u", 1)
    context = StubContext(coordinator, denied=frozenset({(ResourceType.TOPIC, "u")}))
    assert await handled(context, {"t": [0], "u": [0]}) == [
        ("t", 0, ErrorCode.NONE), ("u", 0, ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
    assert list(pending(coordinator, "g")[PID]) == [("t", 0)]


async def test_the_handler_tells_v0_1_clients_coordinator_not_available_while_loading(
        coordinator: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(coordinator, "coordinator_error", lambda group_id: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    assert await handled(StubContext(coordinator, 1), {"t": [0]}) == [("t", 0, ErrorCode.COORDINATOR_NOT_AVAILABLE)]
    assert await handled(StubContext(coordinator, 2), {"t": [0]}) == [
        ("t", 0, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)]


# -- the handler, over the wire ----------------------------------------------------------------------------------


async def wire_txn_commit(client: KafkaClient, version: int, epoch: int, partitions: list[tuple[str, int]],
                          **fields: Any) -> list[tuple[str, int, int]]:
    R = txn_offset_commit.REQUEST
    request = R.cls(transactional_id="tx", group_id="wg", producer_id=1000, producer_epoch=epoch, **fields, topics=[
        R.TxnOffsetCommitRequestTopic(name=topic, partitions=[R.TxnOffsetCommitRequestPartition(
            partition_index=index, committed_offset=42, committed_leader_epoch=-1, committed_metadata="")])
        for topic, index in partitions])
    response = await client.request(txn_offset_commit.API, version, request)
    return [(t.name, p.partition_index, p.error_code) for t in response.topics for p in t.partitions]


async def wire_fetch(client: KafkaClient, version: int) -> tuple[int, int]:
    R = offset_fetch.REQUEST
    if version >= 8:
        request = R.cls(groups=[R.OffsetFetchRequestGroup(group_id="wg", topics=[
            R.OffsetFetchRequestTopics(name="wt", partition_indexes=[0])])], require_stable=True)
        (partition,) = (await client.request(offset_fetch.API, version, request)).groups[0].topics[0].partitions
    else:
        request = R.cls(group_id="wg", topics=[R.OffsetFetchRequestTopic(name="wt", partition_indexes=[0])],
                        require_stable=version >= 7)
        (partition,) = (await client.request(offset_fetch.API, version, request)).topics[0].partitions
    return partition.committed_offset, partition.error_code


async def test_the_handler_commits_with_the_marker_written_by_write_txn_markers(tmp_path: Path) -> None:
    async with testing.broker(data_dir=tmp_path) as started:
        server = started.server
        async with await KafkaClient.connect(f"127.0.0.1:{server.advertised.port}") as client:
            await client.negotiate()
            await check_the_handler(server, client)


async def check_the_handler(server: Any, client: KafkaClient) -> None:
    await create_topic(client, "wt")
    assert await wire_txn_commit(client, 3, 1, [("wt", 0), ("wt", 7), ("gone", 0)]) == [
        ("wt", 0, ErrorCode.NONE), ("wt", 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("gone", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert await wire_txn_commit(client, 0, 0, [("wt", 0)]) == [("wt", 0, ErrorCode.INVALID_PRODUCER_EPOCH)]
    assert await wire_txn_commit(client, 3, 1, [("wt", 0)], generation_id=1, member_id="m") == [
        ("wt", 0, ErrorCode.UNKNOWN_MEMBER_ID)]
    assert await wire_fetch(client, 7) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    assert await wire_fetch(client, 8) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    assert await wire_fetch(client, 6) == (-1, ErrorCode.NONE)  # no require_stable before v7
    W = write_txn_markers.REQUEST
    offsets_partition = partition_for("wg", server.group_coordinator.num_partitions)
    answer = await client.request(write_txn_markers.API, 1, W.cls(markers=[W.WritableTxnMarker(
        producer_id=1000, producer_epoch=1, transaction_result=True, coordinator_epoch=0, topics=[
            W.WritableTxnMarkerTopic(name=OFFSETS_TOPIC, partition_indexes=[offsets_partition])])]))
    assert answer.markers[0].topics[0].partitions[0].error_code == ErrorCode.NONE
    assert await wire_fetch(client, 7) == (42, ErrorCode.NONE)
    data = server.replica_manager.get(OFFSETS_TOPIC, offsets_partition).log.read_bytes(0, 1 << 20)
    headers = [header for _, header in iter_batches(data)]
    assert [(h.producer_id, h.producer_epoch, h.is_transactional, h.is_control) for h in headers] == [
        (1000, 1, True, False), (1000, 1, True, True)]
