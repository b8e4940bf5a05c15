"""One partition on this broker: its log, its role and leader epoch, ISR and high watermark, its waiters.

Rules:
- Becoming leader with a newer epoch records (epoch, log end offset) in the epoch cache, which checkpoints it,
  before the partition accepts a produce (KIP-101): the epoch's start offset is on disk before its data.
- KIP-320 (`check_leader_epoch`): -1 skips the check; equal serves; a lower epoch is FENCED_LEADER_EPOCH (74,
  the client is behind); a higher one UNKNOWN_LEADER_EPOCH (75, we are behind).
- KIP-207: the log end at the moment of becoming leader is kept; until the high watermark reaches it, offsets
  are not available to clients (ListOffsets answers OFFSET_NOT_AVAILABLE or LEADER_NOT_AVAILABLE).
- The high watermark is the lowest log end over the ISR (only this broker's on a single broker). When it
  moves, waiting fetches and acks=all produces are woken through futures: nothing polls.
"""

from __future__ import annotations

import asyncio
from typing import Any

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


class Partition:
    def __init__(self, topic: str, index: int, topic_id: bytes, log: PartitionLog, node_id: int,
                 configs: dict[str, Any]) -> None:
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
        self.leader_log_end_at_election = 0  # KIP-207
        self.follower_end_offsets: dict[int, int] = {}
        self._waiters: set[asyncio.Future] = set()

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index}, leader={self.leader_id}, epoch={self.leader_epoch})"

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.node_id

    def update(self, leader: int, leader_epoch: int, partition_epoch: int, replicas: tuple[int, ...],
               isr: tuple[int, ...]) -> bool:
        """Apply the controller's view of this partition; returns True if this broker just became its leader
        (or, as leader, entered a new epoch)."""
        new_leader_epoch = leader == self.node_id and leader_epoch > self.leader_epoch
        if leader_epoch < self.leader_epoch:
            return False  # metadata never goes backwards (KIP-232)
        self.leader_id, self.leader_epoch, self.partition_epoch = leader, leader_epoch, partition_epoch
        self.replicas, self.isr = replicas, isr
        if new_leader_epoch:
            end = self.log.log_end_offset
            self.log.epoch_cache.assign(leader_epoch, end)  # checkpointed before any produce of the epoch
            self.leader_log_end_at_election = end
            self.follower_end_offsets = {}
            self.maybe_advance_high_watermark()
        return new_leader_epoch

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
        return self.log.high_watermark >= self.leader_log_end_at_election

    def maybe_advance_high_watermark(self) -> None:
        log_end = self.log.log_end_offset
        ends = [log_end] + [self.follower_end_offsets.get(r, 0) for r in self.isr if r != self.node_id]
        high_watermark = min(ends)
        if high_watermark > self.log.high_watermark:
            self.log.high_watermark = high_watermark
            self.wake_waiters()

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

    async def wait_for_high_watermark(self, offset: int, timeout_s: float) -> bool:
        """Delayed produce (acks=all): wait until the high watermark passes `offset`; False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.log.high_watermark <= offset:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            future = loop.create_future()
            self.add_waiter(future)
            try:
                await asyncio.wait((future,), timeout=remaining)
            finally:
                self.remove_waiter(future)
        return True
