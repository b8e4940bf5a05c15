"""SharePartition's rules (broker/replica/share_partition.py), table-driven and pure: acquisition, acknowledgement,
redelivery, delivery limits, locks, the in-flight limit, snapshots, the log start moving and truncation.

A partition's log is a list of (base, last) batches; `fetch` reads it from `next_fetch_offset()` as a share fetch
would and acquires for one member. Locks last LOCK_MS; the clock is a number the test hands in.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from epoch_broker.broker.groups.share_state import StateBatch
from epoch_broker.broker.replica.share_partition import (
    AcquiredRecords,
    RecordState,
    SharePartition,
    ShareSnapshot,
)
from epoch_broker.protocol.errors import ErrorCode

LOCK_MS = 1_000
GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = (RecordState.AVAILABLE, RecordState.ACQUIRED,
                                               RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
NONE, INVALID_REQUEST, INVALID_RECORD_STATE = (ErrorCode.NONE, ErrorCode.INVALID_REQUEST,
                                               ErrorCode.INVALID_RECORD_STATE)


def log_of(end: int, batch: int = 1, start: int = 0) -> list[tuple[int, int]]:
    """A log's batches: offsets [start, end) in batches of `batch` records."""
    return [(base, min(base + batch, end) - 1) for base in range(start, end, batch)]


def make(start: int = 0, limit: int = 5, locks: int = 100) -> SharePartition:
    return SharePartition(start, LOCK_MS, limit, locks)


def fetch(sp: SharePartition, log: Sequence[tuple[int, int]], member: str, max_records: int = 500,
          now: int = 0, batch_size: int | None = None) -> list[tuple[int, int, int]]:
    offset = sp.next_fetch_offset()
    batches = [b for b in log if b[1] >= offset]
    result = sp.acquire(member, offset, batches, max_records, now, batch_size=batch_size)
    return [(r.first_offset, r.last_offset, r.delivery_count) for r in result.records]


def states(sp: SharePartition, first: int, last: int) -> list[tuple[RecordState, int] | None]:
    out: list[tuple[RecordState, int] | None] = []
    for offset in range(first, last + 1):
        record = sp.record(offset)
        out.append(None if record is None else (record.state, record.delivery_count))
    return out


def check_invariants(sp: SharePartition) -> None:
    assert sp.start_offset <= sp.end_offset
    acquired = available = 0
    for offset in range(sp.start_offset, sp.end_offset):
        record = sp.record(offset)
        assert record is not None
        if record.state == ACQUIRED:
            acquired += 1
            assert record.member_id is not None and record.deadline_ms is not None
        else:
            assert record.member_id is None
        available += record.state == AVAILABLE
        assert record.delivery_count >= 0
    assert sp.acquired_count == acquired and sp.available_count == available
    first = sp.record(sp.start_offset)
    assert first is None or first.state in (AVAILABLE, ACQUIRED), "the start stops at the first live record"


# ---- acquiring new records ----

@pytest.mark.parametrize(("batch", "max_records", "batch_size", "expected"), [
    (1, 3, None, [(0, 2, 1)]),
    (5, 1, None, [(0, 4, 1)]),  # max_records is soft: whole log batches (Kafka's batch_optimized mode)
    (5, 6, None, [(0, 9, 1)]),
    (5, 10, None, [(0, 9, 1)]),
    (5, 100, None, [(0, 19, 1)]),
    (5, 100, 10, [(0, 9, 1), (10, 19, 1)]),  # split at log batch boundaries every batch_size records
    (4, 100, 5, [(0, 7, 1), (8, 15, 1), (16, 19, 1)]),
])
def test_new_records_are_acquired_in_whole_batches(batch: int, max_records: int, batch_size: int | None,
                                                    expected: list[tuple[int, int, int]]) -> None:
    sp = make()
    assert fetch(sp, log_of(20, batch), "a", max_records, batch_size=batch_size) == expected
    last = expected[-1][1]
    assert (sp.start_offset, sp.end_offset, sp.acquired_count) == (0, last + 1, last + 1)
    assert sp.record(0) == (ACQUIRED, 1, "a", LOCK_MS)
    assert sp.next_fetch_offset() == last + 1
    check_invariants(sp)


def test_the_batches_to_send_are_those_holding_acquired_records() -> None:
    sp = make()
    log = log_of(20, 5)
    result = sp.acquire("a", 0, log, 6, 0)
    assert result.batches == slice(0, 2) and result.acquired_count == 10
    sp.acknowledge("a", [(5, 9, [RELEASE])])
    result = sp.acquire("b", 5, log[1:], 3, 0)
    assert result.records == (AcquiredRecords(5, 9, 2),) and result.batches == slice(0, 1)


def test_nothing_is_acquired_without_batches_or_max_records() -> None:
    sp = make()
    assert sp.acquire("a", 0, [], 10, 0).records == ()
    assert sp.acquire("a", 0, log_of(5), 0, 0).records == ()
    assert sp.end_offset == 0


# ---- acknowledgements ----

@pytest.mark.parametrize(("ack", "state", "start"), [
    (ACCEPT, None, 5),      # acknowledged: the start moves past them
    (REJECT, None, 5),      # archived
    (GAP, None, 5),         # no record there: archived
    (RELEASE, (AVAILABLE, 1), 0),  # available again, delivery count kept
])
def test_an_acknowledgement_moves_the_records(ack: int, state: tuple[RecordState, int] | None, start: int) -> None:
    sp = make()
    fetch(sp, log_of(5), "a")
    assert sp.acknowledge("a", [(0, 4, [ack])]) == NONE
    assert sp.start_offset == start and sp.acquired_count == 0
    assert states(sp, 0, 0) == [state]
    check_invariants(sp)


def test_per_offset_types_and_counters() -> None:
    sp = make()
    fetch(sp, log_of(6), "a")
    assert sp.acknowledge("a", [(0, 5, [ACCEPT, GAP, REJECT, RELEASE, ACCEPT, ACCEPT])]) == NONE
    assert sp.start_offset == 3 and states(sp, 3, 5) == [(AVAILABLE, 1), (ACKNOWLEDGED, 1), (ACKNOWLEDGED, 1)]
    assert (sp.acknowledged_total, sp.archived_total) == (3, 2)
    assert sp.next_fetch_offset() == 3


def test_released_records_are_redelivered_first_lowest_offset_first_with_their_count() -> None:
    sp = make()
    log = log_of(20)
    assert fetch(sp, log, "a", 10) == [(0, 9, 1)]
    assert sp.acknowledge("a", [(7, 7, [RELEASE]), (3, 3, [RELEASE])]) == INVALID_REQUEST  # unsorted
    assert sp.acknowledge("a", [(3, 3, [RELEASE]), (7, 7, [RELEASE])]) == NONE
    assert sp.next_fetch_offset() == 3
    assert fetch(sp, log, "b", 1) == [(3, 3, 2)]
    assert fetch(sp, log, "b", 5) == [(7, 7, 2), (10, 13, 1)]  # then new records past the end
    assert fetch(sp, log, "c", 1) == [(14, 14, 1)]
    check_invariants(sp)


def test_released_records_are_acquired_in_whole_log_batches() -> None:
    sp = make()
    log = log_of(20, 5)
    fetch(sp, log, "a", 20)
    assert sp.acknowledge("a", [(0, 19, [RELEASE])]) == NONE
    assert fetch(sp, log, "b", 1) == [(0, 4, 2)]
    assert fetch(sp, log, "b", 6) == [(5, 14, 2)]


# ---- delivery count limit ----

def test_release_at_the_delivery_limit_archives_a_poison_record() -> None:
    sp = make(limit=3)
    log = log_of(3)
    for count in (1, 2, 3):
        assert fetch(sp, log, "a", 1) == [(0, 0, count)]
        assert sp.acknowledge("a", [(0, 0, [RELEASE])]) == NONE
    assert sp.start_offset == 1 and sp.archived_total == 1  # archived at the third release: the start moves on
    assert fetch(sp, log, "a", 1) == [(1, 1, 1)]


def test_lock_expiry_at_the_delivery_limit_archives_a_poison_record() -> None:
    sp = make(limit=2)
    log = log_of(1)
    assert fetch(sp, log, "a", now=0) == [(0, 0, 1)]
    assert sp.next_lock_deadline() == LOCK_MS
    assert not sp.expire_locks(LOCK_MS - 1)
    assert sp.expire_locks(LOCK_MS)
    assert fetch(sp, log, "b", now=LOCK_MS) == [(0, 0, 2)]
    assert sp.expire_locks(3 * LOCK_MS)
    assert (sp.start_offset, sp.end_offset, sp.archived_total, sp.next_lock_deadline()) == (1, 1, 1, None)


def test_a_record_on_its_last_delivery_attempt_is_delivered_alone() -> None:
    counts = ShareSnapshot(0, 0, (StateBatch(0, 0, 0, 1), StateBatch(1, 1, 0, 3),
                                  StateBatch(2, 3, 0, 1)))
    sp = SharePartition.from_snapshot(counts, LOCK_MS, 4, 100)
    log = log_of(4)
    assert fetch(sp, log, "b") == [(0, 0, 2)]  # stops before the record on its last attempt
    assert fetch(sp, log, "b") == [(1, 1, 4)]  # which goes alone
    assert fetch(sp, log, "b") == [(2, 3, 2)]
    sp.acknowledge("b", [(1, 1, [RELEASE])])
    assert sp.record(1) == (ARCHIVED, 4, None, None) and sp.archived_total == 1  # released at the limit


# ---- locks and members ----

def test_lock_expiry_with_several_members() -> None:
    sp = make()
    log = log_of(10)
    assert fetch(sp, log, "a", 5, now=0) == [(0, 4, 1)]
    assert fetch(sp, log, "b", 5, now=500) == [(5, 9, 1)]
    assert sp.next_lock_deadline() == LOCK_MS
    assert sp.expire_locks(LOCK_MS)
    assert states(sp, 4, 5) == [(AVAILABLE, 1), (ACQUIRED, 1)]
    assert sp.next_lock_deadline() == LOCK_MS + 500
    assert sp.acknowledge("a", [(0, 4, [ACCEPT])]) == INVALID_RECORD_STATE  # a's lock is gone
    assert fetch(sp, log, "c", 10, now=LOCK_MS) == [(0, 4, 2)]
    assert sp.acknowledge("a", [(0, 4, [ACCEPT])]) == INVALID_RECORD_STATE  # c holds them now
    assert sp.acknowledge("b", [(5, 9, [ACCEPT])]) == NONE
    assert sp.acknowledge("c", [(0, 4, [ACCEPT])]) == NONE
    assert (sp.start_offset, sp.end_offset, sp.next_lock_deadline()) == (10, 10, None)
    assert not sp.expire_locks(10 * LOCK_MS)


def test_a_released_member_gives_its_records_back_with_the_delivery_not_counted() -> None:
    sp = make(limit=2)
    log = log_of(6)
    fetch(sp, log, "a", 3)
    fetch(sp, log, "b", 3)
    sp.acknowledge("a", [(0, 0, [RELEASE])])
    assert fetch(sp, log, "a", 1) == [(0, 0, 2)]  # at the limit
    assert sp.release_member("a")
    assert states(sp, 0, 5) == [(AVAILABLE, 1), (AVAILABLE, 0), (AVAILABLE, 0)] + [(ACQUIRED, 1)] * 3
    assert not sp.release_member("a")
    assert sp.next_lock_deadline() == LOCK_MS  # b's
    assert fetch(sp, log, "c") == [(0, 0, 2), (1, 2, 1)]
    check_invariants(sp)


# ---- the in-flight limit ----

def test_no_new_records_past_the_in_flight_limit() -> None:
    sp = make(locks=10)
    log = log_of(30)
    assert fetch(sp, log, "a", 20) == [(0, 9, 1)]
    assert not sp.can_acquire_records()
    assert fetch(sp, log, "b", 20) == []
    sp.acknowledge("a", [(2, 2, [RELEASE]), (5, 5, [RELEASE])])
    assert sp.can_acquire_records()
    assert fetch(sp, log, "b", 20) == [(2, 2, 2), (5, 5, 2)]  # released ones only: no new record
    sp.acknowledge("a", [(0, 1, [ACCEPT]), (3, 4, [ACCEPT])])
    assert sp.start_offset == 2 and sp.in_flight_count == 8
    assert fetch(sp, log, "b", 20) == [(10, 11, 1)]  # room for two more


def test_the_in_flight_limit_cuts_the_last_batch() -> None:
    sp = make(locks=10)
    assert fetch(sp, log_of(30, 4), "a", 20) == [(0, 9, 1)]  # room 10: the third batch cut after offset 9
    assert sp.in_flight_count == 10
    sp.acknowledge("a", [(0, 9, [ACCEPT])])
    assert fetch(sp, log_of(30, 4), "a", 20) == [(10, 19, 1)]  # the rest of the cut batch comes next


# ---- validation ----

@pytest.mark.parametrize(("batches", "error"), [
    ([(0, 4, [ACCEPT]), (10, 12, [ACCEPT])], INVALID_REQUEST),  # past the end
    ([(0, 4, [ACCEPT]), (6, 12, [ACCEPT])], INVALID_REQUEST),  # last past the end
    ([(0, 4, [ACCEPT]), (5, 6, [ACCEPT])], INVALID_RECORD_STATE),  # b's records
    ([(0, 4, [ACCEPT]), (7, 7, [ACCEPT])], INVALID_RECORD_STATE),  # available, not acquired
    ([(0, 4, [ACCEPT]), (8, 8, [ACCEPT])], INVALID_RECORD_STATE),  # already acknowledged
    ([(0, 4, [ACCEPT]), (3, 3, [ACCEPT])], INVALID_REQUEST),  # overlapping
    ([(0, 4, [ACCEPT]), (5, 5, [9])], INVALID_REQUEST),  # unknown type
    ([(0, 4, [ACCEPT, ACCEPT])], INVALID_REQUEST),  # neither one type nor one per offset
    ([(4, 0, [ACCEPT])], INVALID_REQUEST),
    ([(0, 4, [ACCEPT]), (5, 6, [])], INVALID_REQUEST),
])
def test_an_invalid_acknowledgement_changes_nothing(batches: list[tuple[int, int, list[int]]],
                                                    error: ErrorCode) -> None:
    sp = make()
    log = log_of(10)
    fetch(sp, log, "a", 5)
    fetch(sp, log, "b", 5)
    sp.acknowledge("b", [(7, 7, [RELEASE]), (8, 8, [ACCEPT])])
    before = (states(sp, 0, 9), sp.snapshot(), sp.acknowledged_total, sp.archived_total, sp.acquired_count)
    assert sp.acknowledge("a", batches) == error
    assert (states(sp, 0, 9), sp.snapshot(), sp.acknowledged_total, sp.archived_total, sp.acquired_count) == before


def test_acknowledging_with_nothing_in_flight_or_below_the_start() -> None:
    sp = make(start=10)
    assert sp.acknowledge("a", [(10, 10, [ACCEPT])]) == INVALID_RECORD_STATE
    assert sp.acknowledge("a", [(0, 9, [ACCEPT])]) == NONE  # below the start: already archived, skipped
    fetch(sp, log_of(15, start=10), "a")
    assert sp.acknowledge("a", [(5, 11, [ACCEPT])]) == NONE
    assert sp.start_offset == 12


# ---- the start advancing ----

def test_the_start_advances_over_terminal_records_and_stops_at_a_live_one() -> None:
    sp = make()
    log = log_of(8)
    fetch(sp, log, "a")
    assert sp.acknowledge("a", [(1, 1, [ACCEPT]), (2, 2, [REJECT]), (3, 3, [GAP]), (5, 5, [ACCEPT])]) == NONE
    assert sp.start_offset == 0
    assert sp.acknowledge("a", [(0, 0, [RELEASE])]) == NONE
    assert sp.start_offset == 0
    assert fetch(sp, log, "b") == [(0, 0, 2)]
    assert sp.acknowledge("b", [(0, 0, [ACCEPT])]) == NONE
    assert sp.start_offset == 4  # 0-3 done, 4 still acquired by a
    assert sp.acknowledge("a", [(4, 4, [ACCEPT]), (6, 7, [ACCEPT])]) == NONE
    assert (sp.start_offset, sp.end_offset, sp.in_flight_count) == (8, 8, 0)
    check_invariants(sp)


# ---- snapshots ----

def test_snapshot_round_trip_writes_acquired_records_as_available() -> None:
    sp = make(start=100)
    log = log_of(110, start=100)
    fetch(sp, log, "a", 10)
    sp.acknowledge("a", [(100, 109, [RELEASE, ACCEPT, ACCEPT, REJECT, RELEASE, RELEASE, ACCEPT, ACCEPT,
                                     ACCEPT, ACCEPT])])
    fetch(sp, log, "b", 1)  # 100 again, count 2
    snapshot = sp.snapshot()
    assert snapshot == ShareSnapshot(0, 100, (
        StateBatch(100, 100, 0, 2), StateBatch(101, 102, 2, 1), StateBatch(103, 103, 4, 1),
        StateBatch(104, 105, 0, 1), StateBatch(106, 109, 2, 1)))
    restored = SharePartition.from_snapshot(snapshot, LOCK_MS, 5, 100)
    assert states(restored, 100, 109) == [(AVAILABLE, 2), *states(sp, 101, 109)]
    assert restored.snapshot() == snapshot and restored.acquired_count == 0
    assert fetch(restored, log, "c") == [(100, 100, 3), (104, 105, 2)]
    check_invariants(restored)


def test_a_snapshot_with_gaps_and_a_terminal_front_loads_as_kafka_reads_it() -> None:
    snapshot = ShareSnapshot(3, 10, (StateBatch(5, 11, 2, 1), StateBatch(14, 15, 0, 2)))
    sp = SharePartition.from_snapshot(snapshot, LOCK_MS, 5, 100)
    assert (sp.state_epoch, sp.start_offset, sp.end_offset) == (3, 12, 16)  # 10-11 acknowledged: the start moves
    assert states(sp, 12, 15) == [(AVAILABLE, 0), (AVAILABLE, 0), (AVAILABLE, 2), (AVAILABLE, 2)]
    empty = SharePartition.from_snapshot(ShareSnapshot(1, 7, ()), LOCK_MS, 5, 100)
    assert (empty.start_offset, empty.end_offset, empty.next_fetch_offset()) == (7, 7, 7)


# ---- the log moving ----

def test_log_start_moved_archives_what_is_below_it() -> None:
    sp = make()
    log = log_of(10)
    fetch(sp, log, "a", 8)
    sp.acknowledge("a", [(3, 3, [RELEASE]), (5, 5, [ACCEPT])])
    assert not sp.log_start_moved(0)
    assert sp.log_start_moved(6)
    assert (sp.start_offset, sp.end_offset, sp.acquired_count, sp.archived_total) == (6, 8, 2, 5)
    assert sp.acknowledge("a", [(0, 7, [ACCEPT])]) == NONE  # below the start: skipped without error
    assert (sp.start_offset, sp.end_offset) == (8, 8)
    assert sp.log_start_moved(20)
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (20, 20, 20)
    assert fetch(sp, log_of(25, start=20), "a", 2) == [(20, 21, 1)]


def test_truncation_forgets_records_above_it_and_never_moves_the_start_back() -> None:
    sp = make()
    log = log_of(10)
    fetch(sp, log, "a", 10)
    sp.acknowledge("a", [(0, 2, [ACCEPT]), (4, 4, [RELEASE])])
    assert not sp.truncate(10)
    assert sp.truncate(6)
    assert (sp.start_offset, sp.end_offset, sp.acquired_count, sp.available_count) == (3, 6, 2, 1)
    assert sp.acknowledge("a", [(6, 9, [ACCEPT])]) == INVALID_REQUEST
    new_log = [*log_of(6), (6, 8)]  # the new leader's records from 6
    assert fetch(sp, new_log, "b") == [(4, 4, 2), (6, 8, 1)]
    assert sp.truncate(1)
    assert (sp.start_offset, sp.end_offset, sp.acquired_count, sp.available_count) == (3, 3, 0, 0)
    assert sp.next_lock_deadline() is None
    check_invariants(sp)


def test_available_records_the_log_no_longer_has_are_archived() -> None:
    sp = make()
    fetch(sp, log_of(10), "a")
    sp.acknowledge("a", [(0, 9, [RELEASE])])
    compacted = [(6, 9)]  # 0-5 cleaned away: a read from 0 starts at 6
    assert sp.acquire("b", 0, compacted, 10, 0).records == (AcquiredRecords(6, 9, 2),)
    assert sp.start_offset == 6


def test_new_records_past_a_gap_at_the_end() -> None:
    sp = make()
    assert sp.acquire("a", 0, [(5, 9)], 10, 0).records == (AcquiredRecords(5, 9, 1),)
    assert (sp.start_offset, sp.end_offset) == (5, 10)


def test_aborted_transactions_are_archived_and_not_delivered() -> None:
    sp = make()
    result = sp.acquire("a", 0, [(0, 1), (2, 3), (4, 4), (5, 6)], 10, 0, aborted=[(2, 3), (5, 6)])
    assert result.records == (AcquiredRecords(0, 1, 1), AcquiredRecords(4, 4, 1))
    assert result.acquired_count == 3 and result.batches == slice(0, 3)
    assert states(sp, 2, 6) == [(ARCHIVED, 1), (ARCHIVED, 1), (ACQUIRED, 1), (ARCHIVED, 1), (ARCHIVED, 1)]
    assert sp.acknowledge("a", [(0, 1, [ACCEPT]), (4, 4, [ACCEPT])]) == NONE
    assert (sp.start_offset, sp.end_offset) == (7, 7)


# ---- invariants under random operations ----

def snapshot_record_by_record(sp: SharePartition) -> ShareSnapshot:
    """What `snapshot()` must give, read one record at a time through `record()`."""
    batches: list[StateBatch] = []
    for offset in range(sp.start_offset, sp.end_offset):
        seen = sp.record(offset)
        assert seen is not None
        state = RecordState.AVAILABLE if seen.state == RecordState.ACQUIRED else seen.state
        if batches and (batches[-1].delivery_state, batches[-1].delivery_count) == (state, seen.delivery_count):
            batches[-1] = batches[-1]._replace(last_offset=offset)
        else:
            batches.append(StateBatch(offset, offset, state, seen.delivery_count))
    return ShareSnapshot(sp.state_epoch, sp.start_offset, tuple(batches))


def test_random_operations_keep_the_invariants() -> None:
    """Members fetch, acknowledge, release, leave and lose locks while the log start moves and the log is cut.
    Seen from outside: no record is handed to a member while another's lock on it is live, the start only moves
    forward, and nothing below it is still locked (except what the log start took away)."""
    rng = random.Random(932)
    sp = make(limit=4, locks=40)
    log = log_of(5_000, 3)
    members = ["a", "b", "c"]
    locks: dict[int, tuple[str, int]] = {}  # offset -> (member, deadline), as the responses told the members
    done: set[int] = set()
    now = deliveries = 0
    for _ in range(3_000):
        now += rng.randrange(0, 300)
        start = sp.start_offset
        op = rng.random()
        if op < 0.1:
            sp.expire_locks(now)
        elif op < 0.45:
            sp.expire_locks(now)
            member = rng.choice(members)
            for first, last, count in fetch(sp, log, member, rng.randrange(1, 12), now):
                for offset in range(first, last + 1):
                    assert offset not in done and 1 <= count <= 4
                    assert offset not in locks or locks[offset][1] <= now, "acquired by two members at once"
                    locks[offset] = (member, now + LOCK_MS)
                    deliveries += 1
        elif op < 0.9:
            member = rng.choice(members)
            mine = sorted(o for o, (m, deadline) in locks.items() if m == member and deadline > now)
            if mine:
                take = mine[: rng.randrange(1, len(mine) + 1)]
                ack = rng.choice([ACCEPT, RELEASE, REJECT])
                sp.expire_locks(now)
                assert sp.acknowledge(member, [(o, o, [ack]) for o in take]) == NONE
                for o in take:
                    del locks[o]
                if ack != RELEASE:
                    done.update(take)
        elif op < 0.95:
            member = rng.choice(members)
            sp.release_member(member)
            locks = {o: held for o, held in locks.items() if held[0] != member}
        elif op < 0.98:
            sp.log_start_moved(sp.start_offset + rng.randrange(0, 3))
            locks = {o: held for o, held in locks.items() if o >= sp.start_offset}
        else:
            cut = rng.randrange(sp.start_offset, sp.end_offset + 1)
            sp.truncate(cut)
            locks = {o: held for o, held in locks.items() if o < cut}
            done = {o for o in done if o < cut}
        check_invariants(sp)
        assert sp.snapshot() == snapshot_record_by_record(sp)
        assert sp.start_offset >= start
        assert all(deadline <= now for o, (_, deadline) in locks.items() if o < sp.start_offset)
        assert (sp.next_lock_deadline() is None) == (sp.acquired_count == 0)
    assert deliveries > 4_000 and sp.acknowledged_total > 300 and sp.archived_total > 300
