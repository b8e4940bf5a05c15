"""One share-partition (KIP-932): the in-flight records of one share group on one topic-partition, as Kafka's
`SharePartition` keeps them on the partition's leader.

A pure state machine: no event loop, no IO, no clock. The caller reads the log, owns the clock (every call that
takes or checks an acquisition lock is given `now_ms`), schedules one timer from `next_lock_deadline()`, and
persists `snapshot()` (Kafka's share-group state: state epoch, start offset, state batches).

    start_offset   SPSO: every record below it is acknowledged or archived
    end_offset     SPEO: the offset after the last in-flight record; start_offset when nothing is in flight (the
                   KIP's "SPSO=100, SPEO=100" for a fresh partition). Kafka's `SharePartition.endOffset()` is
                   the last in-flight offset itself when records are in flight: end_offset - 1 here.
    in flight      [start_offset, end_offset): each record AVAILABLE, ACQUIRED (a member, a lock deadline),
                   ACKNOWLEDGED or ARCHIVED, with its delivery count

In-flight records are kept in parallel arrays indexed by offset - start_offset (one byte of state, one int16
delivery count, one owner reference, one int64 deadline per record): no object per record, and bounded by
`max_record_locks` (group.share.partition.max.record.locks) plus at most one log batch (see the in-flight limit).

Rules:
- Transitions (Kafka's RecordState): AVAILABLE -> ACQUIRED (delivery count + 1, an owner, a lock deadline of
  now + record_lock_duration_ms); ACQUIRED -> AVAILABLE, ACKNOWLEDGED or ARCHIVED. ACKNOWLEDGED and ARCHIVED are
  terminal. A record going back to AVAILABLE whose delivery count reached `delivery_count_limit` is ARCHIVED
  instead (RELEASE and lock expiry both), except on `release_member` (below).
- `acquire` (Kafka's acquire in its default batch_optimized mode; record_limit is ShareFetch v2, KIP-1206, not
  served): `fetch_batches` are the (base_offset, last_offset) of the log batches read from `fetch_offset`, which
  the caller took from `next_fetch_offset()`. AVAILABLE in-flight records are acquired first, lowest offset
  first, then new records from the end. max_records is a soft limit, as in Kafka: acquisition stops at the first
  log batch boundary at or past it, so whole batches are acquired (Kafka rounds re-acquisitions up to its cached
  batch and new records up to the end of the log batch holding the max_records-th record). A record whose next
  delivery is its last (count limit - 1, the limit above 2) is delivered alone, as Kafka isolates a possibly
  poisonous record; Kafka 4.2's further throttling (smaller acquisitions as counts near the limit) is not kept.
- In-flight limit (Kafka's lastOffsetAndMaxRecordsToAcquire): with room left (end - start < max_record_locks) at
  most that room is acquired, exactly: the last batch is cut there (its later records stay for a later fetch), so
  the window never passes the limit, as a Kafka 4.2 broker holds it (confluent-kafka's own suite checks a poll
  against the cap); with none, only AVAILABLE records below the end are, and no new record.
  `can_acquire_records()` says whether a fetch is worth reading (Kafka's canAcquireRecords).
- A record is acquired only from AVAILABLE, so never by two members at once. Available records between
  `fetch_offset` and the first fetched batch are gone from the log (compaction) and are archived, as Kafka's
  maybeArchiveStaleBatches; offsets between the end and the first new batch are filled as ARCHIVED.
- read_committed: the ranges of aborted transactions' batches (`aborted`) are archived as soon as acquired and
  not returned (Kafka's maybeFilterAbortedTransactionalAcquiredRecords).
- `acknowledge` is atomic per call: the request's shape is checked first (INVALID_REQUEST: a first offset past
  its last, acknowledge types neither one nor one per offset, an unknown type, batches unsorted or overlapping,
  as KafkaApis validates them), then each batch in order against the records: offsets below the start are
  skipped (already archived), no in-flight record at all is INVALID_RECORD_STATE, an offset at or past the end is
  INVALID_REQUEST, a record not ACQUIRED by this member is INVALID_RECORD_STATE (Kafka's
  fetchSubMapForAcknowledgementBatch and acknowledgeBatchRecords). The first error is answered and nothing
  changes (Kafka rolls the whole call back). Types: 0 GAP and 3 REJECT archive, 1 ACCEPT acknowledges, 2 RELEASE
  makes AVAILABLE (ARCHIVED at the limit); the delivery count is unchanged. Acknowledgement does not look at the
  lock deadline: the caller runs `expire_locks(now_ms)` first, as Kafka's timer would have fired.
- `release_member` is Kafka 4.2's releaseAcquiredRecords (a share session closed with the final epoch, or its
  connection dropped): the member's records become AVAILABLE with their delivery count decreased by one, never
  archived by the limit, because they were fetched but not delivered (KAFKA-17541: the closing acknowledgement
  carried what was delivered). Records whose lock simply runs out keep their count (`expire_locks`).
- `expire_locks(now_ms)` releases every ACQUIRED record whose deadline has passed (count kept, archived at the
  limit), as Kafka's releaseAcquisitionLockOnTimeout; deadlines are kept in a heap of acquisition ranges checked
  lazily, so `next_lock_deadline()` is the earliest live one.
- The start advances after every change while the record at it is ACKNOWLEDGED or ARCHIVED, dropping those
  records (Kafka's maybeUpdateCachedStateAndOffsets); the start never moves backwards.
- `log_start_moved`: retention or DeleteRecords moved the log start past the start. Records below it are archived
  and dropped and the start (and the end, if passed) moves to it (Kafka's updateCacheAndOffsets). Kafka leaves
  ACQUIRED ones acquired until their acknowledgement, release or lock timeout, each of which then archives them
  (an acknowledgement below the start is skipped without error), so they are dropped now to the same effect.
- `truncate(offset)`: the log was cut to end at `offset` (a leader change with divergence, KIP-101/320). In-flight
  records at or above it are forgotten, acquired ones included (their locks and acknowledgements mean nothing:
  the offsets will hold other records or none), and the end moves back to max(offset, start). The start never
  moves back: records a new leader writes below it are taken as consumed, as Kafka's persisted SPSO only moves
  forward (except by AlterShareGroupOffsets).
- Snapshot (Kafka's persister view): ACQUIRED records are written as AVAILABLE with their delivery count, so a
  restart redelivers them with the count kept; equal neighbours are coalesced. Loading one, offsets between its
  state batches (acquired but never written) are AVAILABLE with count 0, as Kafka's persister read gap window.
- Not kept here: the acquisition lock RENEW type and ShareAcknowledge v2 (KIP-1222), `share.auto.offset.reset`
  by duration, delivery-complete counts in the persisted state.
"""

from __future__ import annotations

import heapq
import re
from array import array
from collections.abc import Iterable, Sequence
from enum import IntEnum
from typing import NamedTuple

from epoch_broker.broker.groups.share_state import StateBatch
from epoch_broker.protocol.errors import ErrorCode


class RecordState(IntEnum):
    """Kafka's SharePartition.RecordState, with the ids its persister writes (DeliveryState)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(IntEnum):
    """The acknowledge types of ShareFetch and ShareAcknowledge (0 is GAP: no record at that offset)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = (int(s) for s in RecordState)
# A run of terminal records at the front of the window: how far the start can advance, found at C speed.
_TERMINAL_RUN = re.compile(rb"[\x02\x04]*")
_STATE_RUN = re.compile(rb"(.)\1*", re.DOTALL)  # records in one state
_COUNT_RUN = re.compile(rb"(..)\1*", re.DOTALL)  # int16 delivery counts, equal: matches keep 2-byte alignment
_PERSISTED_STATE = bytes.maketrans(bytes([ACQUIRED]), bytes([AVAILABLE]))  # a lock does not survive a restart
# by the type's number (an IntEnum hashes as its int: no enum call per acknowledged record)
_ACK_STATE: dict[int, int] = {AcknowledgeType.GAP: ARCHIVED, AcknowledgeType.ACCEPT: ACKNOWLEDGED,
                              AcknowledgeType.REJECT: ARCHIVED}


class AcquiredRecords(NamedTuple):
    """One AcquiredRecords entry of a ShareFetch response."""

    first_offset: int
    last_offset: int
    delivery_count: int


class ShareAcquiredRecords(NamedTuple):
    """What `acquire` took: the ranges, how many offsets, and the fetched batches to send (a slice of them)."""

    records: tuple[AcquiredRecords, ...]
    acquired_count: int
    batches: slice


class InFlightState(NamedTuple):
    """One in-flight record as `record(offset)` reports it."""

    state: RecordState
    delivery_count: int
    member_id: str | None
    deadline_ms: int | None


class ShareSnapshot(NamedTuple):
    """A share-partition's durable state, as Kafka's share coordinator keeps it."""

    state_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]  # as WriteShareGroupState / ReadShareGroupState carry them


NOTHING_ACQUIRED = ShareAcquiredRecords((), 0, slice(0, 0))


class SharePartition:
    """The in-flight records of one share group on one partition; see the module's rules."""

    def __init__(self, start_offset: int, record_lock_duration_ms: int, delivery_count_limit: int,
                 max_record_locks: int, *, state_epoch: int = 0) -> None:
        self.record_lock_duration_ms = record_lock_duration_ms
        self.delivery_count_limit = delivery_count_limit
        self.max_record_locks = max_record_locks
        self.state_epoch = state_epoch
        self._start = start_offset
        # The window [start, start + len(_states)), one entry per offset in each array.
        self._states = bytearray()
        self._counts = array("h")
        self._owners: list[str | None] = []
        self._deadlines = array("q")
        # (deadline, first offset, last offset) per acquisition; an entry whose records were since acknowledged,
        # released or re-acquired is dropped when met.
        self._locks: list[tuple[int, int, int]] = []
        self._acquired = 0
        self._available = 0
        self.archived_total = 0
        self.acknowledged_total = 0

    # ---- reading ----

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._start + len(self._states)

    @property
    def in_flight_count(self) -> int:
        return len(self._states)

    @property
    def acquired_count(self) -> int:
        return self._acquired

    @property
    def available_count(self) -> int:
        return self._available

    def record(self, offset: int) -> InFlightState | None:
        """The state of one in-flight record, None outside [start, end)."""
        i = offset - self._start
        if not 0 <= i < len(self._states):
            return None
        state = RecordState(self._states[i])
        return InFlightState(state, self._counts[i], self._owners[i],
                             self._deadlines[i] if state == RecordState.ACQUIRED else None)

    def next_fetch_offset(self) -> int:
        """Where a share fetch reads the log from: the first AVAILABLE in-flight record, else the end."""
        if self._available:
            return self._start + self._states.find(AVAILABLE)
        return self.end_offset

    def can_acquire_records(self) -> bool:
        """Kafka's canAcquireRecords: a record to re-deliver, or room for new ones."""
        return self._available > 0 or len(self._states) < self.max_record_locks

    def next_lock_deadline(self) -> int | None:
        """The earliest acquisition lock deadline still held, for the caller's one timer."""
        while self._locks:
            deadline, first, last = self._locks[0]
            if self._lock_live(deadline, first, last):
                return deadline
            heapq.heappop(self._locks)
        return None

    # ---- acquiring ----

    def acquire(self, member_id: str, fetch_offset: int, fetch_batches: Sequence[tuple[int, int]], max_records: int,
                now_ms: int, *, batch_size: int | None = None,
                aborted: Iterable[tuple[int, int]] = ()) -> ShareAcquiredRecords:
        """Acquire records for `member_id` from the log batches read at `fetch_offset`; see the module's rules.

        `batch_size` (ShareFetch's BatchSize) splits new records into AcquiredRecords of about that many at log
        batch boundaries, as Kafka's createBatches; `aborted` are the (base, last) of aborted transactions' batches
        among `fetch_batches` (read_committed).
        """
        if max_records <= 0 or not fetch_batches:
            return NOTHING_ACQUIRED
        first_base, last_fetched = fetch_batches[0][0], fetch_batches[-1][1]
        end = self.end_offset
        if first_base > fetch_offset:
            self._archive_available(max(fetch_offset, self._start), min(first_base, end))
            self._advance()
        room = self.max_record_locks - len(self._states)
        if room > 0:
            limit, last = min(max_records, room), last_fetched
        elif fetch_offset < end:
            # No room for new records, but released ones below the end can go again.
            limit, last = min(max_records, end - fetch_offset), min(last_fetched, end - 1)
        else:
            return NOTHING_ACQUIRED
        deadline = now_ms + self.record_lock_duration_ms
        ranges: list[list[int]] = []  # [first, last, delivery count]
        acquired, isolated = self._reacquire(member_id, deadline, fetch_batches, max(first_base, self._start),
                                             min(last, end - 1), limit, ranges)
        if not isolated and acquired < limit and last >= end and room > 0:
            acquired += self._acquire_new(member_id, deadline, fetch_batches, max(end, first_base), last,
                                          limit - acquired, batch_size, ranges, exact=room < max_records)
        for first, last_offset, _ in ranges:
            heapq.heappush(self._locks, (deadline, first, last_offset))
        for base, batch_last in aborted:
            acquired -= self._archive_aborted(member_id, deadline, base, batch_last, ranges)
        self._advance()
        records = tuple(AcquiredRecords(*r) for r in ranges)
        if not records:
            return NOTHING_ACQUIRED
        return ShareAcquiredRecords(records, acquired, _overlapping(fetch_batches, records[0][0], records[-1][1]))

    def _reacquire(self, member_id: str, deadline: int, batches: Sequence[tuple[int, int]], lo: int, hi: int,
                   limit: int, ranges: list[list[int]]) -> tuple[int, bool]:
        """Acquire AVAILABLE records in [lo, hi], whole log batches until `limit`: (count, isolated)."""
        acquired, batch = 0, 0
        start, states, counts, count_limit = self._start, self._states, self._counts, self.delivery_count_limit
        i = states.find(AVAILABLE, max(lo - start, 0), hi - start + 1) if self._available else -1
        while i >= 0:
            offset = start + i
            moved = batch
            while batch + 1 < len(batches) and batches[batch + 1][0] <= offset:
                batch += 1
            if batch != moved and acquired >= limit:
                break
            # A record on its last attempt goes alone: if it is poison, it takes no other record with it.
            alone = count_limit > 2 and counts[i] + 1 == count_limit
            if alone and acquired:
                return acquired, True
            self._take(i, member_id, deadline)
            acquired += 1
            if ranges and ranges[-1][1] == offset - 1 and ranges[-1][2] == counts[i]:
                ranges[-1][1] = offset
            else:
                ranges.append([offset, offset, counts[i]])
            if alone:
                return acquired, True
            i = states.find(AVAILABLE, i + 1, hi - start + 1)
        return acquired, False

    def _acquire_new(self, member_id: str, deadline: int, batches: Sequence[tuple[int, int]], first: int,
                     last: int, limit: int, batch_size: int | None, ranges: list[list[int]], *, exact: bool) -> int:
        """Append records [first, ...] past the end as ACQUIRED, up to the log batch holding the limit-th one (the
        limit-th one itself when `exact`: the in-flight limit)."""
        want = first + limit - 1
        if want < last:
            last = want if exact else next((b_last for base, b_last in batches if base <= want <= b_last), want)
        gap = first - self.end_offset
        if gap > 0:  # offsets the log no longer has (compacted away): nothing to deliver there
            self._extend(gap, ARCHIVED, 0, None, 0)
        count = last - first + 1
        self._extend(count, ACQUIRED, 1, member_id, deadline)
        self._acquired += count
        split_from = first
        if batch_size is not None and count > batch_size:
            for base, _ in batches:
                if base > last:
                    break
                if base - split_from >= batch_size:
                    ranges.append([split_from, base - 1, 1])
                    split_from = base
        ranges.append([split_from, last, 1])
        return count

    def _archive_aborted(self, member_id: str, deadline: int, base: int, last: int,
                         ranges: list[list[int]]) -> int:
        """Archive what this acquisition took of an aborted batch and cut it from `ranges`: how many."""
        archived = 0
        for offset in range(max(base, self._start), min(last, self.end_offset - 1) + 1):
            i = offset - self._start
            if self._states[i] == ACQUIRED and self._owners[i] == member_id and self._deadlines[i] == deadline:
                self._finish(i, ARCHIVED)
                archived += 1
        if archived:
            kept: list[list[int]] = []
            for first, r_last, count in ranges:
                if first < base:
                    kept.append([first, min(r_last, base - 1), count])
                if r_last > last:
                    kept.append([max(first, last + 1), r_last, count])
            ranges[:] = kept
        return archived

    # ---- acknowledging and releasing ----

    def acknowledge(self, member_id: str, batches: Sequence[tuple[int, int, Sequence[int]]]) -> ErrorCode:
        """Apply a member's acknowledgement batches (first, last, types) all or nothing; see the module's rules."""
        previous_last = None
        for first, last, types in batches:
            if (first > last or len(types) not in (1, last - first + 1)
                    or (previous_last is not None and first <= previous_last)
                    or any(t not in _ACK_TYPES for t in types)):
                return ErrorCode.INVALID_REQUEST
            previous_last = last
        start, end = self._start, self.end_offset
        for first, last, _ in batches:
            if last < start:
                continue  # already archived: the start moved past them
            if start == end:
                return ErrorCode.INVALID_RECORD_STATE
            if last >= end:
                return ErrorCode.INVALID_REQUEST
            lo, hi = max(first, start) - start, last - start + 1
            if (self._states.count(ACQUIRED, lo, hi) != hi - lo
                    or self._owners[lo:hi].count(member_id) != hi - lo):
                return ErrorCode.INVALID_RECORD_STATE
        for first, last, types in batches:
            lo, hi = max(first, start) - start, last - start + 1
            if len(types) == 1 and hi > lo:
                self._acknowledge_range(lo, hi, types[0])  # one type for the range: whole slices at once
                continue
            for offset in range(max(first, start), last + 1):
                ack = types[0] if len(types) == 1 else types[offset - first]
                if ack == AcknowledgeType.RELEASE:
                    self._release(offset - start, decrease=False)
                else:
                    self._finish(offset - start, _ACK_STATE[ack])
        self._advance()
        return ErrorCode.NONE

    def _acknowledge_range(self, lo: int, hi: int, ack: int) -> None:
        """Indexes lo..hi-1, all ACQUIRED by the acknowledging member, acknowledged with one type."""
        n = hi - lo
        if ack == AcknowledgeType.RELEASE:
            if max(self._counts[lo:hi]) >= self.delivery_count_limit:  # some are archived: record by record
                for i in range(lo, hi):
                    self._release(i, decrease=False)
                return
            state = AVAILABLE
            self._available += n
        else:
            state = _ACK_STATE[ack]
            if state == ARCHIVED:
                self.archived_total += n
            else:
                self.acknowledged_total += n
        self._states[lo:hi] = bytes([state]) * n
        self._owners[lo:hi] = [None] * n
        self._acquired -= n

    def release_member(self, member_id: str) -> bool:
        """Kafka's releaseAcquiredRecords for a member whose session closed: whether any record was released."""
        released = False
        if self._acquired:
            for i, owner in enumerate(self._owners):
                if owner == member_id and self._states[i] == ACQUIRED:
                    self._release(i, decrease=True)
                    released = True
            self._advance()
        return released

    def expire_locks(self, now_ms: int) -> bool:
        """Release the records whose acquisition lock passed its deadline: whether any record changed state."""
        changed = False
        while self._locks and self._locks[0][0] <= now_ms:
            _, first, last = heapq.heappop(self._locks)
            for offset in range(max(first, self._start), min(last, self.end_offset - 1) + 1):
                i = offset - self._start
                if self._states[i] == ACQUIRED and self._deadlines[i] <= now_ms:
                    self._release(i, decrease=False)
                    changed = True
        if changed:
            self._advance()
        return changed

    # ---- the log moving under the share-partition ----

    def log_start_moved(self, log_start_offset: int) -> bool:
        """Retention or DeleteRecords moved the log start: archive and drop what is below it. Whether it moved."""
        if log_start_offset <= self._start:
            return False
        dropped = min(log_start_offset - self._start, len(self._states))
        head = self._states[:dropped]
        live = head.count(AVAILABLE) + head.count(ACQUIRED)
        self._available -= head.count(AVAILABLE)
        self._acquired -= head.count(ACQUIRED)
        self.archived_total += live
        self._drop_front(dropped)
        self._start = log_start_offset
        self._advance()
        return True

    def truncate(self, offset: int) -> bool:
        """The log now ends at `offset`: forget in-flight records at or above it. Whether any were."""
        keep = max(offset, self._start) - self._start
        if keep >= len(self._states):
            return False
        tail = self._states[keep:]
        self._available -= tail.count(AVAILABLE)
        self._acquired -= tail.count(ACQUIRED)
        del self._states[keep:], self._counts[keep:], self._owners[keep:], self._deadlines[keep:]
        return True

    # ---- durability ----

    def snapshot(self) -> ShareSnapshot:
        """The state batches of the in-flight records, ACQUIRED written as AVAILABLE, equal neighbours coalesced.
        Every acquisition and acknowledgement is written, so the runs are found by regular expressions over the
        state bytes and the delivery counts' bytes (C speed), not record by record."""
        states = self._states.translate(_PERSISTED_STATE)
        counts = self._counts.tobytes()
        batches = []
        for run in _STATE_RUN.finditer(states):
            state = states[run.start()]
            for same in _COUNT_RUN.finditer(counts, 2 * run.start(), 2 * run.end()):
                first = same.start() // 2
                batches.append(StateBatch(self._start + first, self._start + same.end() // 2 - 1, state,
                                                   self._counts[first]))
        return ShareSnapshot(self.state_epoch, self._start, tuple(batches))

    @classmethod
    def from_snapshot(cls, snapshot: ShareSnapshot, record_lock_duration_ms: int, delivery_count_limit: int,
                      max_record_locks: int) -> SharePartition:
        """A share-partition as a snapshot left it; offsets no state batch covers are AVAILABLE, count 0."""
        partition = cls(snapshot.start_offset, record_lock_duration_ms, delivery_count_limit, max_record_locks,
                        state_epoch=snapshot.state_epoch)
        start = snapshot.start_offset
        end = max((b.last_offset + 1 for b in snapshot.state_batches), default=start)
        if end > start:
            partition._extend(end - start, AVAILABLE, 0, None, 0)
            for first, last, state, count in snapshot.state_batches:
                lo, hi = max(first, start) - start, last - start + 1
                if hi <= lo:
                    continue
                # The persister never writes ACQUIRED; a lock does not survive a restart anyway.
                state = AVAILABLE if state == ACQUIRED else state
                partition._states[lo:hi] = bytes([state]) * (hi - lo)
                partition._counts[lo:hi] = array("h", [count]) * (hi - lo)
            partition._available = partition._states.count(AVAILABLE)
            partition._advance()
        return partition

    # ---- transitions ----

    def _take(self, i: int, member_id: str, deadline: int) -> None:
        self._states[i] = ACQUIRED
        self._counts[i] += 1
        self._owners[i] = member_id
        self._deadlines[i] = deadline
        self._available -= 1
        self._acquired += 1

    def _release(self, i: int, *, decrease: bool) -> None:
        """ACQUIRED -> AVAILABLE, or ARCHIVED at the delivery count limit (not when the count is given back)."""
        self._acquired -= 1
        self._owners[i] = None
        if decrease:
            self._counts[i] -= 1
        elif self._counts[i] >= self.delivery_count_limit:
            self._states[i] = ARCHIVED
            self.archived_total += 1
            return
        self._states[i] = AVAILABLE
        self._available += 1

    def _finish(self, i: int, state: int) -> None:
        """ACQUIRED -> ACKNOWLEDGED or ARCHIVED."""
        self._states[i] = state
        self._owners[i] = None
        self._acquired -= 1
        if state == ARCHIVED:
            self.archived_total += 1
        else:
            self.acknowledged_total += 1

    def _archive_available(self, first: int, end: int) -> None:
        for offset in range(first, end):
            i = offset - self._start
            if self._states[i] == AVAILABLE:
                self._states[i] = ARCHIVED
                self._available -= 1
                self.archived_total += 1

    def _extend(self, n: int, state: int, count: int, owner: str | None, deadline: int) -> None:
        self._states.extend(bytes([state]) * n)
        self._counts.extend(array("h", [count]) * n)
        self._owners.extend([owner] * n)
        self._deadlines.extend(array("q", [deadline]) * n)

    def _advance(self) -> None:
        """Kafka's maybeUpdateCachedStateAndOffsets: move the start past terminal records at the front."""
        match = _TERMINAL_RUN.match(self._states)
        n = match.end() if match else 0
        if n:
            self._drop_front(n)
            self._start += n

    def _drop_front(self, n: int) -> None:
        del self._states[:n], self._counts[:n], self._owners[:n], self._deadlines[:n]

    def _lock_live(self, deadline: int, first: int, last: int) -> bool:
        lo, hi = max(first, self._start) - self._start, min(last + 1, self.end_offset) - self._start
        return any(self._states[i] == ACQUIRED and self._deadlines[i] == deadline for i in range(lo, hi))


_ACK_TYPES = frozenset(int(t) for t in AcknowledgeType)


def _overlapping(batches: Sequence[tuple[int, int]], first: int, last: int) -> slice:
    """The fetched batches from the one holding `first` to the one holding `last` (Kafka slices the records so)."""
    lo = next(i for i, (_, b_last) in enumerate(batches) if b_last >= first)
    hi = max(i for i, (base, _) in enumerate(batches) if base <= last)
    return slice(lo, hi + 1)
