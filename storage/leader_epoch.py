"""The leader-epoch cache of one partition (KIP-101, KIP-279, KIP-320).

Each entry says "leader epoch E wrote its first batch at start offset S". Entries are strictly
increasing in both epoch and start offset. Persisted to ``leader-epoch-checkpoint`` in the
partition directory, in Kafka's format (see storage.checkpoint)::

    0
    <count>
    <epoch> <start_offset>
    ...

Rules:
- Every change is written through the checkpoint before the method returns; the cache is small and
  changes only when the leader changes or the log is truncated.
- ``assign`` ignores a stale assignment (same epoch, not an earlier start offset) and otherwise
  drops every entry whose epoch or start offset is not lower than the new one, as Kafka does: the
  new entry is the truth about lineage from its start offset on.
- -1 means "undefined" for epochs and offsets, as on the wire (UNDEFINED_EPOCH / _OFFSET).
- A missing or corrupt checkpoint loads as empty; the log re-derives entries from its batches.
"""

from __future__ import annotations

import bisect
import os
from typing import NamedTuple

from epoch_broker.storage.checkpoint import CheckpointFile
from epoch_broker.storage.fs import FileSystem

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
FILE_NAME = "leader-epoch-checkpoint"


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    def __init__(self, directory: str, fs: FileSystem | None = None) -> None:
        self._checkpoint = CheckpointFile(os.path.join(directory, FILE_NAME), fs,
                                          "the epochs are rebuilt from the leader epochs of the log's batches")
        loaded = self._checkpoint.read((int, int))
        self._entries: list[EpochEntry] = []
        self.loaded_from_checkpoint = loaded is not None
        for epoch, start in loaded or ():
            self._append_checked(EpochEntry(epoch, start))

    def _append_checked(self, entry: EpochEntry) -> None:
        # A hand-edited or half-valid file must not break the ordering invariant.
        if not self._entries or (
            entry.epoch > self._entries[-1].epoch and entry.start_offset > self._entries[-1].start_offset
        ):
            self._entries.append(entry)
        else:
            self.loaded_from_checkpoint = False

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def _flush(self) -> None:
        self._checkpoint.write(self._entries)

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; returns True if the cache changed."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"cannot assign epoch {epoch} at offset {start_offset}")
        if self._entries:
            latest = self._entries[-1]
            # Same epoch again (the usual case: every batch of the current leader): nothing new,
            # unless it claims an earlier start, which means earlier entries were wrong.
            if latest.epoch == epoch and start_offset >= latest.start_offset:
                return False
        while self._entries and (
            self._entries[-1].epoch >= epoch or self._entries[-1].start_offset >= start_offset
        ):
            self._entries.pop()
        self._entries.append(EpochEntry(epoch, start_offset))
        self._flush()
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (largest known epoch <= requested, end offset of that epoch)."""
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            # A bootstrapping follower, or no epochs recorded: nothing to say.
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._entries[-1].epoch:
            # The current epoch is still being written: it ends at the log end offset.
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        higher = bisect.bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            # Newer than anything we know (the latest epoch is the largest): undefined.
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            # Older than the first known epoch (its data was deleted): answer the first epoch's
            # start so the follower truncates to where our log begins.
            return requested_epoch, self._entries[0].start_offset
        # Between two known epochs: the floor epoch ends where the next higher one starts.
        return self._entries[higher - 1].epoch, self._entries[higher].start_offset

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch that wrote ``offset``; -1 if it precedes every entry."""
        starts = [e.start_offset for e in self._entries]
        index = bisect.bisect_right(starts, offset)
        return self._entries[index - 1].epoch if index else UNDEFINED_EPOCH

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (the log was truncated there)."""
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return
        while self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries.pop()
        self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget entries wholly before ``start_offset`` (the new log start offset).

        The last entry starting at or before it is kept, moved up to ``start_offset``, so the epoch
        of the first remaining record stays known.
        """
        if start_offset < 0:
            return
        starts = [e.start_offset for e in self._entries]
        index = bisect.bisect_right(starts, start_offset)
        if index == 0:
            return
        moved = EpochEntry(self._entries[index - 1].epoch, start_offset)
        if index == 1 and self._entries[0] == moved:
            return
        self._entries[:index] = [moved]
        self._flush()

    def clear(self) -> None:
        self._entries.clear()
        self._flush()
