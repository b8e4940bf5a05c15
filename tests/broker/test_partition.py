"""Partition's rules, table-driven and socket-free (Kafka's PartitionTest): KIP-320 for every API, KIP-359,
KIP-207, min.insync.replicas, DivergingEpoch, the idempotence verdict, the read bound and truncation.

A partition here is node 0's replica of t-0 with replicas (0, 1, 2), on a real log in tmp_path. Epoch E is the
partition's leader epoch in every table.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from epoch_broker.broker.config import build_config, topic_config
from epoch_broker.broker.faults import BrokerFaults
from epoch_broker.broker.groups.records import ShareSnapshotKey
from epoch_broker.broker.groups.share_state import NOT_WRITTEN, ShareState, StateBatch
from epoch_broker.broker.replica.partition import CONSUMER, DEBUGGING, EARLIEST, LATEST, Partition, ShareSettings
from epoch_broker.broker.replica.replica_manager import log_config_for
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.records import build_batch
from epoch_broker.storage.log import PartitionLog

E = 5
LEADER, FOLLOWER = 0, 1  # node 0 leads, or node 1 does
NOW_MS = 1_000_000.0
NONE, FENCED, UNKNOWN = ErrorCode.NONE, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH
NOT_LEADER = ErrorCode.NOT_LEADER_OR_FOLLOWER


def make_partition(tmp_path: Path, leader: int = LEADER, isr: tuple[int, ...] = (0, 1, 2), **overrides: str
                   ) -> Partition:
    config = build_config([])
    configs = topic_config(config, {k.replace("_", "."): v for k, v in overrides.items()})
    log = PartitionLog.open(str(tmp_path / "t-0"), log_config_for(config, configs))
    partition = Partition("t", 0, b"\x01" * 16, log, 0, configs, BrokerFaults())
    partition.update(leader, E, 1, (0, 1, 2), isr, NOW_MS)
    return partition


def records(*values: bytes, **kwargs: Any) -> bytearray:
    return build_batch([(None, value, [], None) for value in values], **kwargs)


def fetch(partition: Partition, current_leader_epoch: int = -1, *, offset: int = 0, replica_id: int = CONSUMER,
          last_fetched_epoch: int = -1) -> Any:
    return partition.fetch_records(offset, current_leader_epoch, last_fetched_epoch, replica_id, 1 << 20, True,
                                   True, NOW_MS)


# -- KIP-320 and KIP-359: the epoch check, then NOT_LEADER_OR_FOLLOWER, for every API -------------------

def produce_error(partition: Partition, epoch: int) -> ErrorCode:
    return partition.append_records_to_leader(records(b"v"), epoch).error


def fetch_error(partition: Partition, epoch: int) -> ErrorCode:
    return fetch(partition, epoch).error


def list_offsets_error(partition: Partition, epoch: int) -> ErrorCode:
    return partition.fetch_offset_for_timestamp(LATEST, epoch, 1).error


def offsets_for_leader_epoch_error(partition: Partition, epoch: int) -> ErrorCode:
    return partition.last_offset_for_leader_epoch(epoch, E)[0]


APIS = {"Produce (KIP-359)": produce_error, "Fetch": fetch_error, "ListOffsets": list_offsets_error,
        "OffsetsForLeaderEpoch": offsets_for_leader_epoch_error}
EPOCH_TABLE = [  # (role, current leader epoch, expected)
    (LEADER, -1, NONE), (LEADER, E - 1, FENCED), (LEADER, E, NONE), (LEADER, E + 1, UNKNOWN),
    (FOLLOWER, -1, NOT_LEADER), (FOLLOWER, E - 1, FENCED), (FOLLOWER, E, NOT_LEADER), (FOLLOWER, E + 1, UNKNOWN),
]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(("role", "epoch", "expected"), EPOCH_TABLE)
def test_every_api_checks_the_leader_epoch_before_leadership(tmp_path: Path, api: str, role: int, epoch: int,
                                                             expected: ErrorCode) -> None:
    partition = make_partition(tmp_path, leader=role)
    assert APIS[api](partition, epoch) == expected


def test_a_refused_produce_appends_nothing(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    assert partition.append_records_to_leader(records(b"v"), E - 1).error == FENCED
    assert partition.log.log_end_offset == 0


@pytest.mark.parametrize(("epoch", "expected"), [(-1, NONE), (E - 1, FENCED), (E, NONE), (E + 1, UNKNOWN)])
def test_a_debugging_list_offsets_is_answered_by_a_follower_after_the_epoch_check(
        tmp_path: Path, epoch: int, expected: ErrorCode) -> None:
    partition = make_partition(tmp_path, leader=FOLLOWER)
    assert partition.fetch_offset_for_timestamp(EARLIEST, epoch, DEBUGGING).error == expected


# -- min.insync.replicas -------------------------------------------------------------------------------

@pytest.mark.parametrize(("isr", "acks_all", "expected"), [
    ((0,), True, ErrorCode.NOT_ENOUGH_REPLICAS), ((0,), False, NONE), ((0, 1), True, NONE), ((0, 1, 2), True, NONE),
])
def test_acks_all_needs_min_insync_replicas_before_the_append(tmp_path: Path, isr: tuple[int, ...], acks_all: bool,
                                                              expected: ErrorCode) -> None:
    partition = make_partition(tmp_path, isr=isr, min_insync_replicas="2")
    result = partition.append_records_to_leader(records(b"v"), acks_all=acks_all)
    assert result.error == expected
    assert partition.log.log_end_offset == (0 if expected != NONE else 1)


# -- the idempotence verdict ---------------------------------------------------------------------------

def test_a_duplicate_batch_is_answered_with_the_original_offsets_and_not_appended(tmp_path: Path) -> None:
    partition = make_partition(tmp_path, leader=LEADER, isr=(0,))
    idempotent = {"producer_id": 7, "producer_epoch": 0}
    first = partition.append_records_to_leader(records(b"a", b"b", base_sequence=0, **idempotent))
    partition.append_records_to_leader(records(b"c", base_sequence=2, **idempotent))
    again = partition.append_records_to_leader(records(b"a", b"b", base_sequence=0, **idempotent))
    assert (again.error, again.base_offset, again.last_offset) == (NONE, first.base_offset, first.last_offset)
    assert partition.log.log_end_offset == 3
    gap = partition.append_records_to_leader(records(b"e", base_sequence=9, **idempotent))
    assert gap.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    fenced = partition.append_records_to_leader(records(b"f", base_sequence=3, producer_id=7, producer_epoch=-1))
    assert fenced.error != NONE and partition.log.log_end_offset == 3


# -- the read bound, KIP-207 and DivergingEpoch ------------------------------------------------------------

def test_consumers_read_to_the_high_watermark_and_followers_to_the_log_end(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    partition.append_records_to_leader(records(b"a", b"b", b"c"))
    assert partition.log.high_watermark == 0  # no follower has it yet
    assert len(fetch(partition).records) == 0
    follower = fetch(partition, E, replica_id=1)
    assert len(follower.records) > 0 and follower.follower_fetch_recorded


def test_the_high_watermark_is_the_lowest_log_end_of_the_isr(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    partition.append_records_to_leader(records(b"a", b"b", b"c"))
    fetch(partition, E, offset=3, replica_id=1)
    assert partition.log.high_watermark == 0  # replica 2 has not fetched in this epoch
    fetch(partition, E, offset=2, replica_id=2)
    assert partition.log.high_watermark == 2
    fetch(partition, E, offset=3, replica_id=2)
    assert partition.log.high_watermark == 3


async def test_acks_all_is_never_answered_for_a_batch_appended_before_leadership_was_lost_and_regained(
        tmp_path: Path) -> None:
    """Leader in E, appends; follower in E+1 (it may truncate the batch away), leader again in E+2, all before the
    waiter looks: the batch is answered NOT_LEADER_OR_FOLLOWER, never acknowledged by a high watermark that
    later records pass (the idempotent producer resends it; a waiter that stayed would also hold the producer
    up until the request's timeout). A leader that stays leader through a new epoch still acknowledges."""
    partition = make_partition(tmp_path)
    lost = partition.append_records_to_leader(records(b"a"), acks_all=True)
    waiting = asyncio.create_task(partition.wait_for_replication(lost.last_offset, lost.leader_epoch, 10))
    partition.update(FOLLOWER, E + 1, 2, (0, 1, 2), (0, 1, 2), NOW_MS)
    partition.update(LEADER, E + 2, 3, (0, 1, 2), (0, 1, 2), NOW_MS)
    partition.append_records_to_leader(records(b"b", b"c"), acks_all=True)
    for replica in (1, 2):
        fetch(partition, E + 2, offset=3, replica_id=replica)
    assert partition.log.high_watermark == 3
    assert await waiting == NOT_LEADER

    kept = partition.append_records_to_leader(records(b"d"), acks_all=True)
    waiting = asyncio.create_task(partition.wait_for_replication(kept.last_offset, kept.leader_epoch, 10))
    partition.update(LEADER, E + 3, 4, (0, 1, 2), (0, 1, 2), NOW_MS)  # a new epoch, leading throughout
    for replica in (1, 2):
        fetch(partition, E + 3, offset=4, replica_id=replica)
    assert await waiting == NONE


@pytest.mark.parametrize(("replica_id", "unclean", "expected"), [
    (CONSUMER, "false", ErrorCode.OFFSET_NOT_AVAILABLE), (1, "false", NONE), (DEBUGGING, "false", NONE),
    (CONSUMER, "true", NONE),
])
def test_kip_207_a_new_leader_refuses_consumer_offsets_until_its_high_watermark_catches_up(
        tmp_path: Path, replica_id: int, unclean: str, expected: ErrorCode) -> None:
    partition = make_partition(tmp_path, leader=FOLLOWER, unclean_leader_election_enable=unclean)
    partition.append_as_follower(records(b"a", b"b", partition_leader_epoch=E), 0, 0)
    partition.update(LEADER, E + 1, 2, (0, 1, 2), (0, 1, 2), NOW_MS)  # elected with log end 2, high watermark 0
    assert partition.fetch_offset_for_timestamp(LATEST, -1, replica_id).error == expected
    for follower in (1, 2):
        fetch(partition, E + 1, offset=2, replica_id=follower)
    answer = partition.fetch_offset_for_timestamp(LATEST, -1, CONSUMER)
    assert (answer.error, answer.offset, answer.leader_epoch) == (NONE, 2, E + 1)


def epochs_log(tmp_path: Path) -> Partition:
    """A leader whose log holds epoch 1 at 0-2 and epoch 3 at 3-4; it leads in epoch E from offset 5."""
    partition = make_partition(tmp_path, leader=FOLLOWER)
    partition.append_as_follower(records(b"a", b"b", b"c", partition_leader_epoch=1), 0, 0)
    partition.append_as_follower(records(b"d", b"e", base_offset=3, partition_leader_epoch=3), 0, 0)
    partition.update(LEADER, E + 1, 2, (0, 1, 2), (0, 1, 2), NOW_MS)
    return partition


@pytest.mark.parametrize(("last_fetched_epoch", "fetch_offset", "diverging"), [
    (1, 3, None),  # the follower has all of epoch 1: it goes on
    (1, 4, (1, 3)),  # it has more of epoch 1 than we do: cut to 3
    (2, 3, (1, 3)),  # it has epoch 2, which we never had: our largest below is 1, ending at 3
    (3, 5, None),
    (3, 6, (3, 5)),
])
def test_diverging_epoch_tells_a_fetcher_where_our_history_of_its_epoch_ends(
        tmp_path: Path, last_fetched_epoch: int, fetch_offset: int, diverging: tuple[int, int] | None) -> None:
    partition = epochs_log(tmp_path)
    result = fetch(partition, E + 1, offset=fetch_offset, replica_id=1, last_fetched_epoch=last_fetched_epoch)
    assert (result.error, result.diverging_epoch) == (NONE, diverging)
    assert (len(result.records) == 0) == (diverging is not None or fetch_offset == 5)


def test_a_diverging_fetch_is_not_taken_as_the_followers_log_end(tmp_path: Path) -> None:
    partition = epochs_log(tmp_path)
    fetch(partition, E + 1, offset=6, replica_id=1, last_fetched_epoch=3)
    assert partition.followers[1].log_end == -1


# -- truncation (the follower side of KIP-101 and KIP-279) ----------------------------------------------

@pytest.mark.parametrize(("epoch", "end_offset", "log_end", "done"), [
    (3, 5, 5, True),  # the leader has our epoch 3 to its end: nothing to cut
    (3, 4, 4, True),  # it has less of it: cut to its end
    (2, 3, 3, False),  # it answers epoch 2, which we never had: cut to the end of our epoch 1, then ask again
    (-1, -1, 5, True),  # it knows nothing of our epochs: keep the log (never truncate to the high watermark)
    (0, 1, 0, True),  # an epoch older than any of ours: our history of it ends where our log begins
])
def test_a_follower_truncates_by_the_leaders_epoch_end(tmp_path: Path, epoch: int, end_offset: int, log_end: int,
                                                      done: bool) -> None:
    partition = make_partition(tmp_path, leader=FOLLOWER)
    for offset, epoch_of_batch in enumerate((1, 1, 1, 3, 3)):  # one record a batch: any offset is a boundary
        partition.append_as_follower(records(b"v", base_offset=offset, partition_leader_epoch=epoch_of_batch), 0, 0)
    assert partition.truncate_to_epoch_end(epoch, end_offset) == done
    assert partition.log.log_end_offset == log_end


def test_an_isr_change_counts_only_in_the_leader_epoch_that_asked(tmp_path: Path) -> None:
    partition = make_partition(tmp_path, isr=(0, 1))
    asked = (0, 1, 2)
    assert partition.begin_isr_change(asked) == (E, 1)
    partition.update(LEADER, E + 1, 2, (0, 1, 2), (0, 1), NOW_MS)  # a new epoch voids the request in flight
    partition.complete_isr_change(asked, (E, 2, asked))
    assert partition.isr == (0, 1) and partition.pending_isr is None
    assert partition.begin_isr_change(asked) == (E + 1, 2)
    partition.complete_isr_change(asked, (E + 1, 3, asked))
    assert (partition.isr, partition.partition_epoch) == (asked, 3)


def test_a_replica_that_led_for_a_moment_and_wrote_nothing_forgets_that_epoch_when_it_follows(
        tmp_path: Path) -> None:
    """KIP-279's livelock: leader for a few ms in epoch E + 1 at log end 3 (nothing appended), then a follower
    again. The leader answers its latest epoch below, ending at our log end: nothing is cut, but the entry
    (E + 1, 3) must go, or the follower asks about E + 1 (or is told DivergingEpoch) forever."""
    partition = make_partition(tmp_path, leader=FOLLOWER)
    partition.append_as_follower(records(b"a", b"b", b"c", partition_leader_epoch=E), 0, 0)
    partition.update(LEADER, E + 1, 2, (0, 1, 2), (0, 1, 2), NOW_MS)  # leads: (E + 1, 3) assigned
    partition.update(FOLLOWER, E + 2, 3, (0, 1, 2), (0, 1, 2), NOW_MS)
    assert partition.log.latest_epoch == E + 1
    assert partition.truncate_to_epoch_end(E, 3)  # the leader never saw E + 1: its answer for it is (E, 3)
    assert (partition.log.log_end_offset, partition.log.latest_epoch) == (3, E)


# -- share-partitions and their durable state (KIP-932) ------------------------------------------------------


class StoredShareState:
    """The share group's coordinator as the leader sees it (share_state.py's rules, in a dict): fences older
    leader epochs and other state epochs; `fail_writes` makes every write fail as an unreachable coordinator."""

    def __init__(self) -> None:
        self.states: dict[Any, ShareState] = {}
        self.leader_epochs: dict[Any, int] = {}
        self.fail_writes = False

    async def read(self, key: Any, leader_epoch: int) -> tuple[ErrorCode, ShareState]:
        if leader_epoch < self.leader_epochs.get(key, -1):
            return FENCED, NOT_WRITTEN
        self.leader_epochs[key] = leader_epoch
        return NONE, self.states.get(key, NOT_WRITTEN)

    async def write(self, key: Any, state: ShareState) -> ErrorCode:
        if self.fail_writes:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if state.leader_epoch < self.leader_epochs.get(key, -1):
            return FENCED
        if state.state_epoch != self.states.get(key, NOT_WRITTEN).state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        self.states[key] = state
        return NONE


SHARE = ShareSettings(record_lock_duration_ms=30_000, delivery_count_limit=5, max_record_locks=200,
                      start_timestamp=-2)  # earliest


def share_fetch(partition: Partition, stored: StoredShareState, member: str = "m") -> Any:
    return asyncio.run(partition.share_fetch("g", member, SHARE, stored, 500, 500, 1 << 20))


def test_a_share_fetch_answers_only_once_the_delivery_counts_are_durable(tmp_path: Path) -> None:
    partition, stored = make_partition(tmp_path, isr=(0,)), StoredShareState()
    partition.append_records_to_leader(records(b"a", b"b", b"c"))
    got = share_fetch(partition, stored)
    assert [tuple(a) for a in got.acquired] == [(0, 2, 1)]
    (state,) = stored.states.values()
    assert (state.leader_epoch, state.start_offset, state.state_batches) == (E, 0, ((0, 2, 0, 1),))  # AVAILABLE, 1
    assert asyncio.run(partition.share_acknowledge("g", "m", [(0, 1, [1])])) == NONE  # ACCEPT 0-1
    assert stored.states[next(iter(stored.states))].start_offset == 2


def test_a_new_leader_starts_from_the_durable_state_and_forgets_what_is_past_its_log_end(tmp_path: Path) -> None:
    """0-1 accepted, 2 delivered once, and 3-5 (past this log's end: written by a leader whose records were
    truncated) in flight: only 2 comes, at its second delivery."""
    partition, stored = make_partition(tmp_path, isr=(0,)), StoredShareState()
    partition.append_records_to_leader(records(b"a", b"b", b"c"))
    key = ShareSnapshotKey("g", partition.topic_id, 0)
    stored.states[key] = ShareState(0, E - 1, 2, (StateBatch(2, 2, 0, 1), StateBatch(3, 5, 2, 1)))
    got = share_fetch(partition, stored)
    assert [tuple(a) for a in got.acquired] == [(2, 2, 2)]
    assert stored.states[key].state_batches == ((2, 2, 0, 2),)  # 3-5 forgotten
    assert stored.leader_epochs[key] == E


def test_a_failed_write_drops_the_share_partition_and_the_next_fetch_reads_the_state_again(tmp_path: Path) -> None:
    partition, stored = make_partition(tmp_path, isr=(0,)), StoredShareState()
    partition.append_records_to_leader(records(b"a", b"b"))
    assert [tuple(a) for a in share_fetch(partition, stored, "m1").acquired] == [(0, 1, 1)]
    stored.fail_writes = True
    assert asyncio.run(partition.share_acknowledge("g", "m1", [(0, 1, [1])])) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert "g" not in partition.share_partitions  # the acceptance was never durable: it did not happen
    stored.fail_writes = False
    assert [tuple(a) for a in share_fetch(partition, stored, "m2").acquired] == [(0, 1, 2)]


def test_a_deposed_leaders_share_writes_are_fenced(tmp_path: Path) -> None:
    partition, stored = make_partition(tmp_path, isr=(0,)), StoredShareState()
    partition.append_records_to_leader(records(b"a"))
    assert share_fetch(partition, stored).acquired
    stored.leader_epochs[ShareSnapshotKey("g", partition.topic_id, 0)] = E + 1  # a newer leader read the state
    assert asyncio.run(partition.share_acknowledge("g", "m", [(0, 0, [1])])) == NOT_LEADER
    assert share_fetch(partition, stored).error == NOT_LEADER
