"""The log of one partition: segments, offsets, the leader-epoch cache and producer state.

Directory ``<topic>-<partition>/`` holds ``<base>.log/.index/.timeindex`` per segment, and ``<base>.txnindex`` for a
segment holding abort markers (storage.segment, storage.transaction_index),
``leader-epoch-checkpoint`` (storage.leader_epoch) and ``<offset>.snapshot`` (storage.producer_state).
``<base>.<kind>.cleaned`` files are a cleaning in progress (storage.log_cleaner), deleted at open.
The high watermark, recovery point, log start offset and first dirty offset are persisted per log directory by
the LogManager.

Rules:
- Offsets: log start offset <= high watermark <= log end offset (LEO). Batches are whole on disk.
- Appends are all-or-nothing: every batch is framed and CRC-checked before a byte is written, then
  the request's bytes go to disk in one write. A failed write is cut back; the log stays as it was.
- A failed fsync takes the log offline (KafkaStorageError on every write after it): after such a
  failure the kernel may have dropped dirty pages, so nothing written since is trustworthy.
- Epoch history (KIP-101): the leader records a new epoch in the cache at the LEO when it first
  appends with it; a follower records the epochs carried by the batches it copies. Truncation at
  the end truncates the cache from the end; moving the log start truncates it from the start.
- Recovery after an unclean shutdown (no clean-shutdown marker): segments from the one holding the
  recovery point on are validated batch by batch and cut at the first bad byte; later segments are
  dropped; indexes are rebuilt; epoch entries are re-derived from the batches' leader epochs; epoch
  entries at or beyond the recovered end are dropped. A missing or corrupt epoch checkpoint makes
  the whole log be rescanned. A clean shutdown skips the scan.
- Flushing follows Kafka's flush.messages / flush.ms (default: never, rely on replication), or
  fsync after every append with ``fsync_every_append`` for single-node durability.
- Transactions (KIP-98): the producer state tracks open transactions; a marker closes one, and an abort is indexed
  in the marker's segment. The last stable offset (LSO) is the first offset of a transaction still open or whose
  marker is not yet below the high watermark, else the high watermark: `read_committed` consumers read below it
  and skip the aborted transactions overlapping what they read (`aborted_transactions`).
- Reads return file ranges (FileSlice) for os.sendfile; a deleted segment's file descriptor stays
  open for ``file_delete_delay_ms`` so in-flight sendfiles finish, as Kafka's file.delete.delay.ms.
- Retention deletes segments only when cleanup.policy holds ``delete``: Kafka never deletes a compact-only log by
  age or size.
- Compaction (storage.log_cleaner) replaces consecutive segments that are not active by one cleaned segment with
  the first one's base offset (`replace_segments`): offsets never change, gaps may lie inside it, and it ends where
  the last replaced one ended, so segments stay contiguous. The swap runs in a crash-safe order: the first
  segment's ``.index`` is deleted, then its ``.timeindex``; ``<base>.log.cleaned`` is renamed over ``<base>.log``
  (the commit); the other replaced segments are deleted; the new index files are renamed in, ``.index`` last. An
  open undoes or completes a cut-short swap: ``.cleaned`` files are deleted; a segment (not the last) whose
  ``.index`` is empty while its ``.log`` is not has both indexes rebuilt from it (lost index files too, as Kafka
  does); segments starting below the end of the segment before them are what a committed swap merged and had not
  deleted yet: they are deleted. ``first_dirty_offset`` (where the cleaner's next pass starts reading new records)
  comes down with a truncation below it.
"""

from __future__ import annotations

import bisect
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from epoch_broker.protocol.errors import (
    CorruptRecordError,
    KafkaError,
    KafkaStorageError,
    OffsetOutOfRange,
)
from epoch_broker.protocol.record_scan import Buffer
from epoch_broker.protocol.records import (
    BatchHeader,
    iter_batches,
    iter_records,
    parse_end_txn_marker,
    parse_header,
    stamp,
    stamp_log_append_time,
    validate_batch,
)
from epoch_broker.storage.file_records import FileSlice
from epoch_broker.storage.fs import FileSystem
from epoch_broker.storage.leader_epoch import LeaderEpochCache
from epoch_broker.storage.log_validator import LONG_MAX, ValidationRules, recompressed, validate_client_batches
from epoch_broker.storage.producer_state import CompletedTxn, ProducerStateManager
from epoch_broker.storage.segment import CLEANED_SUFFIX, LogSegment, file_name
from epoch_broker.storage.transaction_index import AbortedTxn

_MAX_RELATIVE_OFFSET = 2**31 - 1  # index entries store offsets relative to the segment as int32
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class LogConfig:
    """Per-log settings, Kafka's topic configs with Kafka's defaults. These defaults are declared here only: the
    broker's config catalogue (broker/config/catalogue.py) takes its keys' defaults from them."""

    segment_bytes: int = 1 << 30  # segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000  # segment.ms
    retention_bytes: int = -1  # retention.bytes (-1: unlimited)
    retention_ms: int = 7 * 24 * 3600 * 1000  # retention.ms (-1: unlimited)
    flush_interval_messages: int = LONG_MAX  # flush.messages
    flush_interval_ms: int = LONG_MAX  # flush.ms
    index_interval_bytes: int = 4096  # index.interval.bytes
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type: CreateTime | LogAppendTime
    compression_type: str = "producer"  # compression.type: producer keeps the batch's codec, else one of TOPIC_CODECS
    fsync_every_append: bool = False  # not a Kafka config: single-node durability
    validation: ValidationRules = field(default_factory=ValidationRules)  # log_validator.py: client batches
    file_delete_delay_ms: int = 60_000  # file.delete.delay.ms
    cleanup_policy: frozenset[str] = frozenset({"delete"})  # cleanup.policy: delete (retention), compact, or both
    delete_retention_ms: int = 86_400_000  # delete.retention.ms: how long the cleaner keeps a tombstone
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio: dirty share of the bytes that starts a clean


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    num_records: int


class ReadResult(NamedTuple):
    slices: list[FileSlice]
    size: int
    first_offset: int  # base offset of the first batch returned, -1 if none
    next_offset: int  # offset after the last batch returned (where the next read starts)


class UnexpectedAppendOffset(KafkaError):
    """A follower append whose first offset is below the log end offset."""


class PartitionLog:
    def __init__(self, directory: str, config: LogConfig, fs: FileSystem, clock: Callable[[], int]) -> None:
        self.directory = directory
        self.config = config
        self.fs = fs
        self.clock = clock
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.epoch_cache = LeaderEpochCache(directory, fs)
        self.producer_state = ProducerStateManager(directory, fs)
        self._log_start_offset = 0
        self._high_watermark = 0
        self.recovery_point = 0
        self.offline = False
        self._unflushed_messages = 0
        self._last_flush_ms = clock()
        self._retired: list[tuple[int, LogSegment]] = []  # (close after ms, segment)
        # closed transactions whose marker is not below the high watermark yet: (marker offset, first offset)
        self._unreplicated_txns: deque[tuple[int, int]] = deque()
        self.first_dirty_offset = 0  # the log cleaner's: records from here on are not cleaned yet
        self.truncation_count = 0  # truncations so far: a cleaning planned before one is not swapped in

    # --- opening and recovery ---------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str,
        config: LogConfig,
        fs: FileSystem | None = None,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int = 0,
        first_dirty_offset: int = 0,
        clean_shutdown: bool = False,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> PartitionLog:
        fs = fs or FileSystem()
        fs.makedirs(directory)
        log = cls(directory, config, fs, clock)
        log._load(recovery_point, log_start_offset, clean_shutdown)
        log.high_watermark = high_watermark
        # a checkpoint past the log end predates a truncation: what lies below it may not be clean (Kafka's reset)
        start, end = log.log_start_offset, log.log_end_offset
        log.first_dirty_offset = first_dirty_offset if start <= first_dirty_offset <= end else start
        return log

    def _load(self, recovery_point: int, log_start_offset: int, clean_shutdown: bool) -> None:
        bases = []
        for name in self.fs.listdir(self.directory):
            if name.endswith((".tmp", CLEANED_SUFFIX)):
                # an interrupted write_atomic, or a cleaning stopped before its swap renamed these in
                self.fs.remove(os.path.join(self.directory, name))
            elif name.endswith(".log") and name[:-4].isdigit():
                bases.append(int(name[:-4]))
        now = self.clock()
        for base in sorted(bases):
            self._add_segment(LogSegment(self.directory, base, self.fs, self.config.index_interval_bytes, now))
        # a new log (no segment on disk): its one empty segment has nothing to validate or re-derive epochs from
        created = not self.segments
        if created:
            self._add_segment(self._new_segment(max(log_start_offset, 0)))
        first_corrupt = self._rebuild_lost_indexes()
        # Where validation starts: nowhere after a clean shutdown, else from the recovery point;
        # from the very start when the epoch history must be re-derived.
        if created or (clean_shutdown and self.epoch_cache.loaded_from_checkpoint):
            first_unsafe = len(self.segments)
        elif not self.epoch_cache.loaded_from_checkpoint:
            first_unsafe = 0
        else:
            first_unsafe = max(0, bisect.bisect_right(self._bases, recovery_point) - 1)
        first_unsafe = min(first_unsafe, first_corrupt)
        for i, segment in enumerate(self.segments[:first_unsafe]):
            if segment.index.entries == 0 and segment.size > 0:
                first_unsafe = i  # the last segment's index files lost: recover it
                break
            segment.max_timestamp = segment.time_index.last[0] if segment.time_index.last else -1
            if i + 1 < len(self.segments):
                segment.next_offset = self.segments[i + 1].base_offset
            else:
                try:
                    segment.load_tail()
                except KafkaError:
                    first_unsafe = i  # the "clean" tail does not parse: recover it
        if not self.epoch_cache.loaded_from_checkpoint and not created:
            self.epoch_cache.clear()
        recovered = first_unsafe < len(self.segments)
        if recovered:
            # the producer state (open transactions, aborted-transaction entries) is replayed over the recovered range
            self.producer_state.delete_snapshots_from(self.segments[first_unsafe].base_offset + 1)
            self._recover_from(first_unsafe)
        self._log_start_offset = max(log_start_offset, self.segments[0].base_offset)
        leo = self.log_end_offset
        if self._log_start_offset > leo:
            self._log_start_offset = leo
        # Start first, then end: an entry left at the log end holds no data and goes, either way.
        self.epoch_cache.truncate_from_start(self._log_start_offset)
        self.epoch_cache.truncate_from_end(leo)
        # Recovered segments were validated and fsynced: the recovery point moves to the end.
        self.recovery_point = leo if recovered else min(max(recovery_point, 0), leo)
        self._rebuild_producer_state()

    def _rebuild_lost_indexes(self) -> int:
        """Rebuild both indexes of each segment but the last whose ``.index`` is empty while its ``.log`` is not: the
        files were lost, or a cleaning's swap was cut short before renaming them in (the last segment is left to
        recovery, which rebuilds them too). Segments starting below the end of a rebuilt one are what that swap had
        merged into it: they are deleted. Returns the position of the first segment found corrupt (cut), or the
        number of segments."""
        i = 0
        while i < len(self.segments) - 1:
            segment = self.segments[i]
            if segment.index.entries == 0 and segment.size > 0:
                # the epoch cache and producer snapshots stay: the records are those they were derived from
                if segment.recover(lambda header: None):
                    return i
                segment.flush()  # it may lie below the recovery point, which later flushes no longer reach
                end = i + 1
                while end < len(self.segments) and self.segments[end].base_offset < segment.next_offset:
                    end += 1
                self._drop_segments(i + 1, end)
            i += 1
        return len(self.segments)

    def _recover_from(self, first: int) -> None:
        # The epoch history of the rescanned range is re-derived from its batches: forget what the
        # checkpoint said about it, keep what it said about the trusted range before it.
        self.epoch_cache.truncate_from_end(self.segments[first].base_offset)

        def on_batch(header: BatchHeader) -> None:
            if header.partition_leader_epoch > self.epoch_cache.latest_epoch:
                self.epoch_cache.assign(header.partition_leader_epoch, header.base_offset)

        for i in range(first, len(self.segments)):
            segment = self.segments[i]
            if i > first and segment.base_offset != self.segments[i - 1].next_offset:
                # Segments are contiguous (a roll starts the next one at the LEO, a cleaned one ends where the
                # segments it replaced ended): a gap means the previous segment lost its tail, so whatever follows
                # is not a valid continuation.
                self._drop_segments(i)
                break
            cut = segment.recover(on_batch)
            if cut:
                # Corruption: nothing after the first bad byte can be trusted.
                self._drop_segments(i + 1)
                break
        for segment in self.segments[first:]:
            segment.flush()

    def _drop_segments(self, start: int, stop: int | None = None) -> None:
        """Close and delete segments[start:stop] (at open: nothing can be reading them)."""
        for segment in self.segments[start:stop]:
            segment.close_handles()
            segment.delete_files()
        del self.segments[start:stop]
        del self._bases[start:stop]

    def _rebuild_producer_state(self) -> None:
        leo = self.log_end_offset
        self.producer_state.delete_snapshots_from(leo + 1)
        start = max(self.producer_state.load_latest(leo), self._log_start_offset)
        # the replay indexes the aborted transactions of its range again
        for segment in self.segments[self._segment_index(start) :]:
            segment.txn_index.truncate_to(start)
        self._unreplicated_txns = deque(t for t in self._unreplicated_txns if t[0] < start)
        for segment, position, header in self._headers_from(start):
            if header.base_offset >= start:
                batch = os.pread(segment.fd, header.total_size, position) if header.is_control else b""
                self._on_batch_written(segment, batch, 0, header)
        # rewritten entries may sit below the recovery point, which later flushes no longer reach
        for segment in self.segments[self._segment_index(start) :]:
            segment.txn_index.flush()

    # --- segments ---------------------------------------------------------------------------------

    def _new_segment(self, base_offset: int) -> LogSegment:
        return LogSegment(self.directory, base_offset, self.fs, self.config.index_interval_bytes, self.clock())

    def _add_segment(self, segment: LogSegment) -> None:
        self.segments.append(segment)
        self._bases.append(segment.base_offset)

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    def roll(self, base_offset: int | None = None) -> None:
        """Start a new active segment at ``base_offset`` (default: the LEO)."""
        base = self.log_end_offset if base_offset is None else base_offset
        if self.active_segment.size == 0:
            if base == self.active_segment.base_offset:
                return
            # An empty active segment is simply replaced.
            self._remove_segment(len(self.segments) - 1)
        else:
            self.active_segment.seal_time_index()
            # Snapshot at each roll (as Kafka does) so recovery replays at most one segment.
            self.producer_state.take_snapshot(base)
        self._add_segment(self._new_segment(base))

    def maybe_roll(self, incoming_bytes: int = 0, last_offset: int | None = None, now: int | None = None) -> None:
        segment = self.active_segment
        if segment.size == 0:
            return
        last = self.log_end_offset if last_offset is None else last_offset
        if (
            segment.size + incoming_bytes > self.config.segment_bytes
            or (self.clock() if now is None else now) - segment.created_ms >= self.config.segment_ms
            or last - segment.base_offset > _MAX_RELATIVE_OFFSET
        ):
            self.roll()

    def _remove_segment(self, i: int) -> None:
        segment = self.segments.pop(i)
        del self._bases[i]
        segment.delete_files()  # unlinked now; the open descriptor still serves pending sendfiles
        self._retired.append((self.clock() + self.config.file_delete_delay_ms, segment))

    def _close_retired(self, now_ms: int) -> None:
        keep = []
        for deadline, segment in self._retired:
            if deadline <= now_ms:
                segment.close_handles()
            else:
                keep.append((deadline, segment))
        self._retired = keep

    def _segment_index(self, offset: int) -> int:
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    def _headers_from(self, offset: int) -> Iterator[tuple[LogSegment, int, BatchHeader]]:
        for segment in self.segments[self._segment_index(offset) :]:
            found = segment.find(offset)
            if found is not None:
                for position, header in segment.headers_from(found[0]):
                    yield segment, position, header

    # --- offsets ----------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.active_segment.next_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self._high_watermark = min(max(offset, self._log_start_offset), self.log_end_offset)
        while self._unreplicated_txns and self._unreplicated_txns[0][0] < self._high_watermark:
            self._unreplicated_txns.popleft()

    @property
    def last_stable_offset(self) -> int:
        """The first offset of a transaction still open or whose marker is not replicated, else the high
        watermark: `read_committed` consumers read below it."""
        unstable = self.producer_state.first_open_txn_offset
        for _, first in self._unreplicated_txns:
            unstable = first if unstable is None else min(unstable, first)
        if unstable is None:
            return self._high_watermark
        return max(min(unstable, self._high_watermark), self._log_start_offset)

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping offsets [start, end), for a `read_committed` fetch."""
        found = []
        for segment in self.segments[self._segment_index(start) :]:
            for entry in segment.txn_index.entries:
                if entry.last_offset >= start and entry.first_offset < end:
                    found.append(entry)
                if entry.last_stable_offset > end:
                    # every transaction open when this one was aborted began after `end`, and every later one too
                    return found
        return found

    @property
    def latest_epoch(self) -> int:
        return self.epoch_cache.latest_epoch

    def epoch_for_offset(self, offset: int) -> int:
        return self.epoch_cache.epoch_for_offset(offset)

    def end_offset_for_epoch(self, requested_epoch: int) -> tuple[int, int]:
        return self.epoch_cache.end_offset_for(requested_epoch, self.log_end_offset)

    @property
    def size(self) -> int:
        return sum(segment.size for segment in self.segments)

    # --- appending --------------------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self.offline:
            raise KafkaStorageError(f"log {self.directory} is offline after a storage error")

    @staticmethod
    def _validated(buf: bytearray | memoryview) -> tuple[memoryview, list[tuple[int, BatchHeader]]]:
        view = memoryview(buf)
        batches = list(iter_batches(view))
        if not batches:
            raise CorruptRecordError("no record batch to append")
        for pos, header in batches:
            validate_batch(view, pos, header)
        return view, batches

    def append_as_leader(self, buf: bytearray | memoryview, leader_epoch: int, from_client: bool = True
                         ) -> AppendInfo:
        """Validate (each batch, then, for a client's, every record: log_validator.py), recompress a client's to the
        topic's compression.type if it names another codec, assign offsets, stamp ``leader_epoch`` in place, write.
        All or nothing. The broker's own batches (transaction markers) skip the client rules."""
        self._check_writable()
        view, batches = self._validated(buf)
        now = self.clock()
        if from_client:
            validate_client_batches(view, batches, self.config.validation, now)
            view, batches = recompressed(view, batches, self.config.compression_type)
        first = offset = self.log_end_offset
        log_append = self.config.message_timestamp_type == "LogAppendTime"
        stamped = []
        num_records = 0
        max_timestamp = -1
        for pos, header in batches:
            stamp(view, pos, offset, leader_epoch)
            if log_append:
                stamp_log_append_time(view, pos, now)
                header = parse_header(view, pos)
            else:
                header = header._replace(base_offset=offset, partition_leader_epoch=leader_epoch)
            stamped.append((pos, header))
            num_records += header.records_count
            max_timestamp = max(max_timestamp, header.max_timestamp)
            offset = header.next_offset
        self._write(view, stamped, offset - 1, now)
        # KIP-101: the first append of a new leader epoch marks where that epoch starts.
        if leader_epoch >= 0 and leader_epoch > self.epoch_cache.latest_epoch:
            self.epoch_cache.assign(leader_epoch, first)
        self._after_append(view, stamped, num_records, now)
        return AppendInfo(first, offset - 1, max_timestamp, now if log_append else -1, num_records)

    def append_as_follower(self, buf: bytearray | memoryview) -> AppendInfo:
        """Append batches copied from the leader, keeping their offsets and epochs."""
        self._check_writable()
        view, batches = self._validated(buf)
        expected = self.log_end_offset
        for _, header in batches:
            if header.base_offset < expected:
                raise UnexpectedAppendOffset(
                    f"batch at offset {header.base_offset} is below the expected {expected}"
                )
            expected = header.next_offset
        first = batches[0][1].base_offset
        now = self.clock()
        self._write(view, batches, expected - 1, now)
        # KIP-101 step 4.7.1: the follower's epoch history comes from the batches it copies.
        for _, header in batches:
            if header.partition_leader_epoch >= 0:
                self.epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
        num_records = sum(header.records_count for _, header in batches)
        self._after_append(view, batches, num_records, now)
        return AppendInfo(
            first, expected - 1, max(h.max_timestamp for _, h in batches), -1, num_records
        )

    def _write(self, view: memoryview, batches: list[tuple[int, BatchHeader]], last: int, now: int) -> None:
        self.maybe_roll(len(view), last, now)
        segment = self.active_segment
        try:
            segment.append(view, batches)
        except OSError as exc:
            # ENOSPC or EIO: cut what reached the file so the log is exactly as before.
            try:
                segment.discard_tail()
            except OSError:
                self.offline = True
            raise KafkaStorageError(f"append to {self.directory} failed: {exc}") from exc

    def _after_append(self, view: memoryview, batches: list[tuple[int, BatchHeader]], num_records: int, now: int
                      ) -> None:
        segment = self.active_segment
        try:
            for pos, header in batches:
                self._on_batch_written(segment, view, pos, header)
        except OSError as exc:
            # An abort's index entry could not be written (a full disk): undo the append, so that no marker stands
            # without its entry (read_committed readers would take the aborted records for committed ones).
            try:
                self.truncate_to(batches[0][1].base_offset)
            except OSError:
                self.offline = True
            raise KafkaStorageError(f"indexing an aborted transaction in {self.directory} failed: {exc}") from exc
        self._unflushed_messages += num_records
        if (
            self.config.fsync_every_append
            or self._unflushed_messages >= self.config.flush_interval_messages
            or now - self._last_flush_ms >= self.config.flush_interval_ms
        ):
            self.flush()

    def _on_batch_written(self, segment: LogSegment, buf: Buffer, pos: int, header: BatchHeader) -> None:
        """The producer state takes a batch in `segment` (appended, or replayed); a transaction it closes is
        indexed there if aborted, and holds the last stable offset until its marker is replicated."""
        marker = parse_end_txn_marker(buf, pos, header) if header.is_control and header.producer_id >= 0 else None
        completed = self.producer_state.on_append(header, marker)
        if completed is not None:
            self._index_completed(segment, completed)

    def _index_completed(self, segment: LogSegment, txn: CompletedTxn) -> None:
        if txn.aborted:
            open_first = self.producer_state.first_open_txn_offset
            stable = txn.last_offset + 1 if open_first is None else open_first
            segment.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, stable))
        if txn.last_offset >= self._high_watermark:
            self._unreplicated_txns.append((txn.last_offset, txn.first_offset))

    def flush(self) -> None:
        """fsync everything written so far; the recovery point moves to the LEO."""
        leo = self.log_end_offset
        try:
            for segment in self.segments[self._segment_index(self.recovery_point) :]:
                segment.flush()
        except OSError as exc:
            self.offline = True
            raise KafkaStorageError(f"fsync in {self.directory} failed: {exc}") from exc
        self.recovery_point = leo
        self._unflushed_messages = 0
        self._last_flush_ms = self.clock()

    def maybe_flush(self, now_ms: int) -> None:
        """Called periodically: applies flush.ms."""
        if self._unflushed_messages and now_ms - self._last_flush_ms >= self.config.flush_interval_ms:
            self.flush()

    # --- reading ----------------------------------------------------------------------------------

    def read(
        self, offset: int, max_bytes: int, upper_bound: int | None = None, min_one_batch: bool = True
    ) -> ReadResult:
        """Whole batches from the one holding ``offset``, as file ranges.

        The first batch comes whole even if larger than ``max_bytes`` (when ``min_one_batch``); no
        batch with an offset at or above ``upper_bound`` (the high watermark for consumers) is returned.
        """
        leo = self.log_end_offset
        if offset < self._log_start_offset or offset > leo:
            raise OffsetOutOfRange(f"offset {offset} outside [{self._log_start_offset}, {leo}]")
        upper = leo if upper_bound is None else min(upper_bound, leo)
        slices: list[FileSlice] = []
        size = 0
        first_offset = -1
        for segment in self.segments[self._segment_index(offset) :]:
            if offset >= upper or (size >= max_bytes and slices):
                break
            piece = segment.read(offset, max_bytes - size, upper, min_one_batch and not slices)
            if piece is None:
                if segment.next_offset > offset and segment.size:
                    break  # stopped by the size or upper bound inside this segment
                continue
            file_slice, piece_first, offset = piece
            slices.append(file_slice)
            size += file_slice.size
            if first_offset < 0:
                first_offset = piece_first
            if file_slice.position + file_slice.size < segment.size:
                break  # the segment had more: a limit stopped us
        return ReadResult(slices, size, first_offset, offset)

    def read_bytes(
        self, offset: int, max_bytes: int, upper_bound: int | None = None, min_one_batch: bool = True
    ) -> bytes:
        result = self.read(offset, max_bytes, upper_bound, min_one_batch)
        return b"".join(os.pread(s.fd, s.size, s.position) for s in result.slices)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) of the first record with timestamp >= ``timestamp``.

        -2 (earliest) and -1 (latest) answer the log start and end offsets, as ListOffsets does.
        """
        if timestamp == EARLIEST_TIMESTAMP:
            start = self._log_start_offset
            return start, -1, self.epoch_cache.epoch_for_offset(start)
        if timestamp == LATEST_TIMESTAMP:
            return self.log_end_offset, -1, self.epoch_cache.latest_epoch
        for segment in self.segments:
            if segment.max_timestamp < timestamp:
                continue
            for position, header in segment.timestamp_start(timestamp):
                if header.max_timestamp < timestamp or header.last_offset < self._log_start_offset:
                    continue
                batch = os.pread(segment.fd, header.total_size, position)
                for record in iter_records(batch, 0, header):
                    if record.timestamp >= timestamp and record.offset >= self._log_start_offset:
                        return record.offset, record.timestamp, header.partition_leader_epoch
        return None

    # --- truncation and retention -----------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop everything at and above ``offset``, cutting back to a batch boundary (KIP-101).

        The epoch cache is trimmed at the log end even when no record is cut (Kafka's UnifiedLog.truncateTo): a
        broker that led for a moment assigned (epoch, log end) and appended nothing; as a follower that entry
        would make it ask about an epoch it has no record of, forever (KIP-279).
        """
        if offset >= self.log_end_offset:
            self.epoch_cache.truncate_from_end(self.log_end_offset)
            return
        if offset < self.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return
        while len(self.segments) > 1 and self.active_segment.base_offset >= offset:
            self._remove_segment(len(self.segments) - 1)
        self.active_segment.truncate_to(offset)
        self.truncation_count += 1
        leo = self.log_end_offset
        self.epoch_cache.truncate_from_end(leo)
        self._log_start_offset = min(self._log_start_offset, leo)
        self._high_watermark = min(self._high_watermark, leo)
        self.recovery_point = min(self.recovery_point, leo)
        self.first_dirty_offset = min(self.first_dirty_offset, leo)
        self._rebuild_producer_state()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and restart it at ``offset`` (a follower far behind the leader's start)."""
        for i in range(len(self.segments) - 1, -1, -1):
            self._remove_segment(i)
        self._add_segment(self._new_segment(offset))
        self.epoch_cache.clear()
        self.producer_state.clear()
        self.producer_state.delete_snapshots_from(0)
        self._unreplicated_txns.clear()
        self.truncation_count += 1
        self._log_start_offset = self._high_watermark = self.recovery_point = self.first_dirty_offset = offset

    def delete_records_before(self, offset: int) -> None:
        """Advance the log start offset (DeleteRecords); whole segments below it are deleted."""
        offset = min(offset, self.log_end_offset)
        if offset <= self._log_start_offset:
            return
        self._log_start_offset = offset
        self._high_watermark = max(self._high_watermark, offset)
        while len(self.segments) > 1 and self.segments[1].base_offset <= offset:
            self._remove_segment(0)
        self.epoch_cache.truncate_from_start(offset)
        self.producer_state.delete_snapshots_before(offset)

    def apply_retention(self, now_ms: int) -> int:
        """Delete whole segments past retention.ms / retention.bytes; returns how many.

        Only segments wholly below the high watermark go, and never the active one; none when cleanup.policy does
        not hold ``delete``.
        """
        self._close_retired(now_ms)
        deleted = 0
        total = self.size
        while len(self.segments) > 1 and "delete" in self.config.cleanup_policy:
            segment, following = self.segments[0], self.segments[1]
            too_old = 0 <= self.config.retention_ms < now_ms - segment.max_timestamp
            too_big = 0 <= self.config.retention_bytes <= total - segment.size
            if not (too_old or too_big) or following.base_offset > self._high_watermark:
                break
            total -= segment.size
            self._remove_segment(0)
            deleted += 1
        if deleted:
            self._log_start_offset = max(self._log_start_offset, self.segments[0].base_offset)
            self.epoch_cache.truncate_from_start(self._log_start_offset)
            self.producer_state.delete_snapshots_before(self._log_start_offset)
        if self.clock() - self.active_segment.created_ms >= self.config.segment_ms:
            self.maybe_roll()
        return deleted

    # --- compaction -------------------------------------------------------------------------------

    def replace_segments(self, old: list[LogSegment]) -> bool:
        """Swap in the cleaned segment the log cleaner wrote for ``old`` (consecutive segments, not the active one):
        ``<base>.*.cleaned`` files of old[0]'s base offset, fsynced, ending where old[-1] ends. In the crash-safe
        order of the module's rules; the replaced segment objects are retired as deleted ones are, so in-flight
        sendfiles finish. False (nothing done) if ``old`` are no longer consecutive segments of this log, or take
        in the active one: they were deleted or truncated meanwhile."""
        i = self._segment_index(old[0].base_offset)
        if self.segments[i : i + len(old)] != old or i + len(old) >= len(self.segments):
            return False
        first = old[0]
        base = first.base_offset

        def cleaned(suffix: str) -> str:
            return file_name(self.directory, base, suffix + CLEANED_SUFFIX)

        def final(suffix: str) -> str:
            return file_name(self.directory, base, suffix)

        try:
            for suffix in (".index", ".timeindex"):  # .index first: its absence is what makes an open rebuild both
                if self.fs.exists(final(suffix)):
                    self.fs.remove(final(suffix))
            self.fs.fsync_dir(self.directory)
            self.fs.rename(cleaned(".log"), final(".log"))  # the commit
            self.fs.fsync_dir(self.directory)
            for segment in old[1:]:
                segment.delete_files()
            if not self.fs.exists(cleaned(".txnindex")):
                first.txn_index.delete()  # none of them indexed an abort
            for suffix in (".txnindex", ".timeindex", ".index"):  # .index last
                if self.fs.exists(cleaned(suffix)):
                    self.fs.rename(cleaned(suffix), final(suffix))
            self.fs.fsync_dir(self.directory)
            segment = LogSegment(self.directory, base, self.fs, self.config.index_interval_bytes, first.created_ms)
            segment.load_tail()
        except OSError as exc:
            # Which step failed is unknown in memory: the next open completes or undoes the swap from the files.
            self.offline = True
            raise KafkaStorageError(f"swapping in a cleaned segment in {self.directory} failed: {exc}") from exc
        self.segments[i : i + len(old)] = [segment]
        self._bases[i : i + len(old)] = [base]
        deadline = self.clock() + self.config.file_delete_delay_ms
        self._retired.extend((deadline, replaced) for replaced in old)
        return True

    # --- shutdown ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Clean close: flush, snapshot the producer state at the LEO, release files."""
        if not self.offline:
            self.flush()
            self.producer_state.take_snapshot(self.log_end_offset)
        for segment in self.segments:
            if self.offline:
                segment.close_handles()
            else:
                segment.close()
        self._close_retired(LONG_MAX)

    def close_without_flush(self) -> None:
        """Drop file handles as a crashed process would (tests, and the log-dir-failure path)."""
        for segment in self.segments:
            segment.close_handles()
        self._close_retired(LONG_MAX)
