"""One partition on this broker: its log, its role and leader epoch, ISR and high watermark, its waiters.

Rules:
- Becoming leader with a newer epoch records (epoch, log end offset) in the epoch cache, which checkpoints it,
  before the partition accepts a produce (KIP-101): the epoch's start offset is on disk before its data.
- KIP-320 (`check_leader_epoch`): -1 skips the check; equal serves; a lower epoch is FENCED_LEADER_EPOCH (74,
  the client is behind); a higher one UNKNOWN_LEADER_EPOCH (75, we are behind).
- KIP-207: the log end at the moment of becoming leader is kept; until the high watermark reaches it, offsets
  are not available to clients (ListOffsets answers OFFSET_NOT_AVAILABLE or LEADER_NOT_AVAILABLE), unless
  the topic allows unclean elections (a truncated history is accepted there anyway).
- As leader, every follower fetch records the follower's log end and when it last caught up (Kafka's rule:
  its fetch offset reached the leader's log end at this fetch or at the previous one). A follower that has not
  fetched in the current leader epoch has an unknown log end, which holds the high watermark back.
- The high watermark is the lowest log end over the maximal ISR: the ISR plus the members of a pending
  AlterPartition (so an expansion never lets it pass a joining follower). It never moves backwards. When it
  moves, or the ISR or leadership changes, waiting fetches and acks=all produces are woken through futures:
  nothing polls.
- `fault.high.watermark.held`: follower fetches see `follower_high_watermark`, frozen at the value the high
  watermark had when the hold began.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from broker.faults import BrokerFaults
from protocol.errors import ErrorCode
from storage.log import PartitionLog
from storage.segment import FileSlice


class FileRecords:
    """Record bytes that stay in segment files until the server sends them with sendfile.

    `len()` is the byte count, so the codec can frame it like any bytes value (see primitives.write_records).
    """

    __slots__ = ("size", "slices")

    def __init__(self, slices: list[FileSlice], size: int) -> None:
        self.slices = slices
        self.size = size

    def __len__(self) -> int:
        return self.size


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower in the current leader epoch."""

    log_end: int = -1  # unknown until it fetches in this epoch
    last_caught_up_ms: float = 0.0
    last_fetch_leader_end: int = -1  # the leader's log end at the previous fetch
    last_fetch_ms: float = 0.0


class Partition:
    def __init__(self, topic: str, index: int, topic_id: bytes, log: PartitionLog, node_id: int,
                 configs: dict[str, Any], faults: BrokerFaults) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.node_id = node_id
        self.configs = configs  # effective topic configs (config.topic_config)
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.faults = faults
        self.leader_log_end_at_election = 0  # KIP-207, and the start offset of the current leader epoch
        self.followers: dict[int, FollowerState] = {}
        self.pending_isr: tuple[int, ...] | None = None  # the ISR asked for by the AlterPartition in flight
        self._held_high_watermark: int | None = None
        self._waiters: set[asyncio.Future] = set()

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index}, leader={self.leader_id}, epoch={self.leader_epoch})"

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.node_id

    def update(self, leader: int, leader_epoch: int, partition_epoch: int, replicas: tuple[int, ...],
               isr: tuple[int, ...], now_ms: float) -> bool:
        """Apply the controller's view of this partition; returns True if this broker just became its leader
        (or, as leader, entered a new epoch)."""
        if (leader_epoch, partition_epoch) < (self.leader_epoch, self.partition_epoch):
            return False  # metadata never goes backwards (KIP-232)
        new_leader_epoch = leader == self.node_id and leader_epoch > self.leader_epoch
        changed = (leader, leader_epoch, isr) != (self.leader_id, self.leader_epoch, self.isr)
        self.leader_id, self.leader_epoch, self.partition_epoch = leader, leader_epoch, partition_epoch
        self.replicas, self.isr = replicas, isr
        if new_leader_epoch:
            end = self.log.log_end_offset
            self.log.epoch_cache.assign(leader_epoch, end)  # checkpointed before any produce of the epoch
            self.leader_log_end_at_election = end
            self.pending_isr = None  # an answer for the old epoch is ignored (see `apply_isr_change`)
            # Kafka's reset: ISR members count as caught up now, so the new leader does not drop them at once.
            self.followers = {r: FollowerState(last_caught_up_ms=now_ms if r in isr else 0.0)
                              for r in replicas if r != self.node_id}
        if self.is_leader:
            self.maybe_advance_high_watermark()
        if changed:
            self.wake_waiters()  # acks=all waiters re-check leadership and the ISR size
        return new_leader_epoch

    def apply_isr_change(self, leader_epoch: int, partition_epoch: int, isr: tuple[int, ...]) -> None:
        """AlterPartition's answer (the metadata brings the same state, perhaps later or already)."""
        if leader_epoch == self.leader_epoch and partition_epoch > self.partition_epoch:
            self.partition_epoch, self.isr = partition_epoch, isr
            self.maybe_advance_high_watermark()
            self.wake_waiters()

    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.NONE
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.UNKNOWN_LEADER_EPOCH

    def leader_error(self, current_leader_epoch: int) -> ErrorCode:
        """The KIP-320 check, then NOT_LEADER_OR_FOLLOWER if this broker does not lead the partition."""
        error = self.check_leader_epoch(current_leader_epoch)
        if error == ErrorCode.NONE and not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return error

    def read(self, offset: int, max_bytes: int, upper_bound: int, first_batch_whole: bool) -> FileRecords | bytes:
        """Batches from `offset` below `upper_bound` as file ranges (never decoded); raises OffsetOutOfRange."""
        result = self.log.read(offset, max_bytes, upper_bound, first_batch_whole)
        return FileRecords(result.slices, result.size) if result.size else b""

    @property
    def offsets_available(self) -> bool:
        """KIP-207: the new leader's high watermark has reached the log end it had when elected."""
        return (self.log.high_watermark >= self.leader_log_end_at_election
                or self.configs["unclean.leader.election.enable"])

    # -- leader: followers, ISR, high watermark ------------------------------------------------------

    @property
    def maximal_isr(self) -> set[int]:
        return set(self.isr).union(self.pending_isr or ())

    def record_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: float) -> None:
        """A follower fetched from `fetch_offset` (its log end) in the current leader epoch."""
        follower = self.followers.get(replica_id)
        if follower is None:
            return  # not an assigned replica
        leader_end = self.log.log_end_offset
        if fetch_offset >= leader_end:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, now_ms)
        elif fetch_offset >= follower.last_fetch_leader_end:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, follower.last_fetch_ms)
        follower.log_end = fetch_offset
        follower.last_fetch_leader_end, follower.last_fetch_ms = leader_end, now_ms
        self.maybe_advance_high_watermark()

    def can_join_isr(self, replica_id: int) -> bool:
        """Kafka's expansion rule: caught up to the high watermark and into the leader's current epoch."""
        follower = self.followers.get(replica_id)
        return (follower is not None and replica_id not in self.maximal_isr
                and follower.log_end >= self.log.high_watermark
                and follower.log_end >= self.leader_log_end_at_election)

    def out_of_sync(self, now_ms: float, lag_max_ms: int) -> list[int]:
        """ISR followers neither at the log end nor caught up within replica.lag.time.max.ms."""
        leader_end = self.log.log_end_offset
        return [r for r in self.isr if r != self.node_id and (follower := self.followers.get(r)) is not None
                and follower.log_end != leader_end and now_ms - follower.last_caught_up_ms > lag_max_ms]

    def maybe_advance_high_watermark(self) -> None:
        ends = [self.log.log_end_offset]
        for replica in self.maximal_isr - {self.node_id}:
            follower = self.followers.get(replica)
            ends.append(-1 if follower is None else follower.log_end)
        high_watermark = min(ends)
        current = self.log.high_watermark
        if high_watermark > current:
            if self.faults.high_watermark_held and self._held_high_watermark is None:
                self._held_high_watermark = current  # the hold began before this first move
            self.log.high_watermark = high_watermark
            self.wake_waiters()

    @property
    def follower_high_watermark(self) -> int:
        """The high watermark a follower fetch is answered with (frozen under `fault.high.watermark.held`)."""
        if not self.faults.high_watermark_held:
            self._held_high_watermark = None
            return self.log.high_watermark
        if self._held_high_watermark is None:
            self._held_high_watermark = self.log.high_watermark
        return self._held_high_watermark

    # -- waiting for data or for the high watermark ---------------------------------------------------

    def add_waiter(self, future: asyncio.Future) -> None:
        self._waiters.add(future)

    def remove_waiter(self, future: asyncio.Future) -> None:
        self._waiters.discard(future)

    def wake_waiters(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for future in waiters:
            if not future.done():
                future.set_result(None)

    async def wait_for_replication(self, offset: int, timeout_s: float) -> ErrorCode:
        """Delayed produce (acks=all): wait until the high watermark passes `offset`.

        NOT_LEADER_OR_FOLLOWER if leadership is lost meanwhile, NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR
        shrinks below min.insync.replicas, REQUEST_TIMED_OUT at the timeout.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            if not self.is_leader:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            if len(self.isr) < self.configs["min.insync.replicas"]:
                return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            if self.log.high_watermark > offset:
                return ErrorCode.NONE
            remaining = deadline - loop.time()
            if remaining <= 0:
                return ErrorCode.REQUEST_TIMED_OUT
            future = loop.create_future()
            self.add_waiter(future)
            try:
                await asyncio.wait((future,), timeout=remaining)
            finally:
                self.remove_waiter(future)
