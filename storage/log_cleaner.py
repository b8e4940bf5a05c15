"""The log cleaner: compaction of the logs whose cleanup.policy holds ``compact`` (Kafka's LogCleaner).

A cleaning writes, next to the segments it replaces, one cleaned segment per group of them: ``<base>.log.cleaned``
(batches back to back, as a segment's ``.log``) with its ``<base>.index.cleaned``, ``<base>.timeindex.cleaned``
and, when the group indexed aborted transactions, ``<base>.txnindex.cleaned``, in the formats of storage.segment,
storage.index and storage.transaction_index (``<base>``: the group's first base offset). PartitionLog's
`replace_segments` swaps them in (its module says in which crash-safe order, and how an open completes or undoes a
swap cut short). Each compacted log's first dirty offset is kept per log dir in ``cleaner-offset-checkpoint``
("topic partition offset" lines, storage.checkpoint) by the LogManager.

Rules:
- What is cleaned: whole segments from the log's first, up to the first of the active segment and the segment
  holding the last stable offset (at most the high watermark): nothing unreplicated, no transaction in flight.
- When (LogManager.cleanings): a compacted log whose dirty bytes (its cleanable segments from the first dirty
  offset, i.e. not cleaned yet) make at least min.cleanable.dirty.ratio of its cleanable bytes, dirtiest log first;
  also one whose last cleaning kept a tombstone that has expired since.
- Which records go (Kafka's shouldRetainRecord): the offset map holds, for every key of the dirty segments, the
  offset of its latest record there (aborted transactions left out). A record goes when the map holds a later
  offset for its key; when it has no key; when its batch belongs to an aborted transaction (an entry of the log's
  `aborted_transactions`: same producer id, base offset from the transaction's first offset to its marker); when
  it is a tombstone (null value) whose timestamp (the batch's for LogAppendTime) is more than delete.retention.ms
  old. Kafka keeps a tombstone for delete.retention.ms from the first cleaning of its segment (KIP-534's delete
  horizon, stamped into the batch); here the record's own timestamp starts the clock, which is simpler and keeps
  the batch's bytes, but lets a tombstone with an old CreateTime go at the first cleaning. Transaction markers
  (control batches) always stay: Kafka removes one once its transaction's records are gone, they are small.
  Committed transactional records are compacted like any others.
- Offsets never change: a batch keeps its base offset, lastOffsetDelta, partitionLeaderEpoch, producer id, epoch
  and base sequence, attributes (codec, transactional, timestamp type) and both timestamps; its kept records keep
  their bytes (offset and timestamp deltas stay right under the same header); only the record count, the length
  and the CRC change, and the records are compressed again with the batch's codec. A batch left without records is
  dropped (Kafka keeps one for a producer's last sequence; producer state here comes from snapshots, which cleaning
  never touches), except the last batch of a cleaned segment: it stays as its bare header (no records, no codec,
  as Kafka's empty batches), so the segment ends at the offset the replaced ones ended at; storage.log's recovery
  takes a segment ending below the next one's base for one that lost its tail. Clients step over an empty batch by
  its lastOffsetDelta, as they do over Kafka's (KAFKA-5443).
- Consecutive segments are merged into one cleaned segment while their sizes add up to at most segment.bytes and
  their offsets span less than 2^31 (Kafka's groupSegmentsBySize): a compacted log does not keep a segment, and
  three file descriptors, per roll forever. Empty segments are left alone.
- Threads: `plan` and `Cleaning.swap` run on the log's thread (the event loop). `Cleaning.run` does the reading
  and writing anywhere (a worker thread): it reads only segments that are not active, opening their files itself
  one at a time (never the log's descriptors, which the log may close meanwhile), up to the sizes and with the
  transaction indexes read at plan time, and writes only ``.cleaned`` files. Whatever it read, the swap first
  checks that the log was not truncated and that each group's segments are still the log's, else their output is
  deleted. Reads and writes are held to log.cleaner.io.max.bytes.per.second (`Throttler`). Every batch read is
  CRC-checked first: a corrupt one stops the cleaning rather than be written again under a fresh CRC.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from epoch_broker.protocol.errors import CorruptRecordError, KafkaError
from epoch_broker.protocol.primitives import read_varint, read_varlong
from epoch_broker.protocol.record_scan import Buffer
from epoch_broker.protocol.records import (
    BATCH_HEADER_SIZE,
    MIN_BATCH_LENGTH,
    TIMESTAMP_LOG_APPEND_TIME,
    BatchHeader,
    batch_body,
    batch_keeping,
    empty_batch,
    parse_header,
    validate_batch,
)
from epoch_broker.storage.log import PartitionLog
from epoch_broker.storage.segment import CLEANED_SUFFIX, LogSegment, file_name
from epoch_broker.storage.transaction_index import AbortedTxn

READ_CHUNK = 1 << 20  # bytes read at a time: large reads, bounded memory
WRITE_CHUNK = 1 << 20  # cleaned batches gathered before one write
_MAX_SPAN = 2**31 - 1  # offsets a segment's index can hold relative to its base


class CleaningAborted(KafkaError):
    """The cleaning was stopped (`Cleaning.abort`: the broker is shutting down)."""


class CleanableRange(NamedTuple):
    segments: list[LogSegment]  # from the log's first, none active, all below the last stable offset
    end: int  # the offset after them: where this cleaning stops
    first_dirty: int  # records from here on were not cleaned yet
    dirty_bytes: int  # size of the segments holding them
    total_bytes: int

    @property
    def dirty_ratio(self) -> float:
        return self.dirty_bytes / self.total_bytes if self.total_bytes else 0.0


def cleanable_range(log: PartitionLog) -> CleanableRange:
    """What a cleaning of `log` may take now (the module's rules)."""
    segments = log.segments
    stable = log.last_stable_offset  # at most the high watermark
    n = 0
    while n + 1 < len(segments) and segments[n + 1].base_offset <= stable:
        n += 1
    end = segments[n].base_offset
    first_dirty = min(max(log.first_dirty_offset, log.log_start_offset), end)
    dirty = sum(segment.size for segment, following in itertools.pairwise(segments[: n + 1])
                if following.base_offset > first_dirty)
    return CleanableRange(segments[:n], end, first_dirty, dirty, sum(segment.size for segment in segments[:n]))


@dataclass
class CleanerStats:
    segments_read: int = 0
    segments_written: int = 0
    log_bytes: int = 0  # size of the segments cleaned
    bytes_read: int = 0  # by both passes: the offset map's and the cleaning's
    bytes_written: int = 0
    records_read: int = 0
    records_removed: int = 0
    seconds: float = 0.0

    @property
    def mb_per_second(self) -> float:
        """MB (2^20 bytes, as Kafka's cleaner log line counts them) of log cleaned a second."""
        return self.log_bytes / (1 << 20) / self.seconds if self.seconds > 0 else math.inf


class Throttler:
    """Holds the caller back so its bytes average at most `bytes_per_second` since it was made (Kafka's Throttler
    for log.cleaner.io.max.bytes.per.second). `sleep` may return early: an abort wakes it."""

    def __init__(self, bytes_per_second: float, sleep: Callable[[float], object],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.bytes_per_second = bytes_per_second
        self._sleep = sleep
        self._clock = clock
        self._start = clock()
        self._bytes = 0

    def throttle(self, n: int) -> None:
        self._bytes += n
        ahead = self._bytes / self.bytes_per_second - (self._clock() - self._start)
        if ahead > 0:
            self._sleep(ahead)


class _Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    tombstone: bool  # null value
    start: int  # its bytes in the batch body: [start, end)
    end: int


def _records(body: Buffer, header: BatchHeader) -> Iterator[_Record]:
    """The records of a batch body (from `batch_body`), reading only as far as each one's value length: the rest of
    a record is kept or dropped as bytes."""
    view = memoryview(body)
    log_append = header.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
    pos = 0
    try:
        for _ in range(header.records_count):
            start = pos
            length, pos = read_varint(view, pos)
            end = pos + length
            if length < 0 or end > len(view):
                raise CorruptRecordError(f"a record of the batch at offset {header.base_offset} runs past its end")
            timestamp_delta, pos = read_varlong(view, pos + 1)  # after the record's attributes byte
            offset_delta, pos = read_varint(view, pos)
            key_length, pos = read_varint(view, pos)
            key = None if key_length < 0 else bytes(view[pos : pos + key_length])
            value_length, _ = read_varint(view, pos + max(key_length, 0))
            timestamp = header.max_timestamp if log_append else header.base_timestamp + timestamp_delta
            yield _Record(header.base_offset + offset_delta, timestamp, key, value_length < 0, start, end)
            pos = end
    except (IndexError, ValueError) as exc:  # primitives' DecodeError is a ValueError
        raise CorruptRecordError(f"malformed record in the batch at offset {header.base_offset}") from exc
    if pos != len(view):
        raise CorruptRecordError(f"the batch at offset {header.base_offset} has bytes after its records")


def _groups(segments: list[LogSegment], ends: dict[LogSegment, int], max_bytes: int) -> list[list[LogSegment]]:
    """Consecutive non-empty segments, merged while their sizes add up to at most `max_bytes` and their offsets fit
    one segment's index (Kafka's groupSegmentsBySize)."""
    groups: list[list[LogSegment]] = []
    size = 0
    for segment in segments:
        group = groups[-1] if groups else None
        if segment.size == 0:
            groups.append([])  # left alone, and the segments around it are not merged across it
        elif group and size + segment.size <= max_bytes and ends[segment] - 1 - group[0].base_offset <= _MAX_SPAN:
            group.append(segment)
            size += segment.size
        else:
            groups.append([segment])
            size = segment.size
    return [group for group in groups if group]


def _cleaned_paths(directory: str, base_offset: int) -> list[str]:
    return [file_name(directory, base_offset, kind + CLEANED_SUFFIX)
            for kind in (".log", ".index", ".timeindex", ".txnindex")]


class Cleaning:
    """One cleaning of one log: made by `plan` on the log's thread, `run` anywhere, `swap` on the log's thread."""

    def __init__(self, log: PartitionLog, cleanable: CleanableRange, io_max_bytes_per_second: float) -> None:
        self.log = log
        self.end = cleanable.end
        self.first_dirty = cleanable.first_dirty
        self.truncation_count = log.truncation_count
        now = log.clock()
        self.delete_retention_ms = log.config.delete_retention_ms
        self._delete_before = now - self.delete_retention_ms  # a tombstone with an older timestamp goes
        self.io_max_bytes_per_second = io_max_bytes_per_second
        segments = cleanable.segments
        self._ends = {segment: following.base_offset
                      for segment, following in itertools.pairwise(log.segments[: len(segments) + 1])}
        self.groups = _groups(segments, self._ends, log.config.segment_bytes)
        # Read now, on the log's thread: the run must not look at objects the log changes meanwhile.
        self._sizes = {segment: segment.size for segment in segments}
        self._txn_entries = [[entry for segment in group for entry in segment.txn_index.entries]
                             for group in self.groups]
        self._aborted: dict[int, list[AbortedTxn]] = {}
        for txn in log.aborted_transactions(segments[0].base_offset, self.end):
            self._aborted.setdefault(txn.producer_id, []).append(txn)
        self._stop = threading.Event()
        self._lock = threading.Lock()  # held by `run`
        self.stats = CleanerStats(segments_read=sum(map(len, self.groups)),
                                  log_bytes=sum(self._sizes[s] for group in self.groups for s in group))
        self.error: Exception | None = None  # why `run` failed
        self.oldest_tombstone_kept: int | None = None  # timestamp of the oldest tombstone the cleaned segments hold

    @property
    def tombstones_expire_ms(self) -> int | None:
        """When the oldest tombstone kept may go, or None if none was kept."""
        oldest = self.oldest_tombstone_kept
        return None if oldest is None else oldest + self.delete_retention_ms

    # --- in any thread ----------------------------------------------------------------------------

    def run(self) -> None:
        """Write the cleaned segments (``.cleaned`` files, fsynced). Never raises: a failure is kept in `error` (the
        swap then reports it) and what was written is deleted."""
        with self._lock:
            started = time.monotonic()
            throttler = Throttler(self.io_max_bytes_per_second, self._stop.wait)
            try:
                self._check_stop()
                offsets = self._offset_map(throttler)
                for group, txn_entries in zip(self.groups, self._txn_entries, strict=True):
                    self._clean_group(group, txn_entries, offsets, throttler)
            except Exception as exc:  # nobody waits on this thread for an exception: the swap reports it
                self.error = exc
                self.discard()
            finally:
                self.stats.seconds = time.monotonic() - started

    def abort(self) -> None:
        """Stop a run in progress (it deletes what it wrote) and wait for it, or keep one from starting."""
        self._stop.set()
        with self._lock:
            pass  # a run in progress holds it until it has stopped

    def discard(self) -> None:
        """Delete the output (best effort: what is left, the log's next open deletes)."""
        for group in self.groups:
            self._delete_output(group[0].base_offset)

    def _check_stop(self) -> None:
        if self._stop.is_set():
            raise CleaningAborted(f"cleaning of {self.log.directory} aborted")

    def _delete_output(self, base_offset: int) -> None:
        for path in _cleaned_paths(self.log.directory, base_offset):
            with contextlib.suppress(OSError):
                if self.log.fs.exists(path):
                    self.log.fs.remove(path)

    def _is_aborted(self, header: BatchHeader) -> bool:
        txns = self._aborted.get(header.producer_id, ())
        return header.is_transactional and any(t.first_offset <= header.base_offset <= t.last_offset for t in txns)

    def _batches(self, segment: LogSegment, throttler: Throttler) -> Iterator[tuple[bytes, int, BatchHeader]]:
        """(buffer, position, header) of each batch of `segment`, CRC-checked, READ_CHUNK at a time."""
        size = self._sizes[segment]
        fd = os.open(segment.log_path, os.O_RDONLY)
        try:
            position = 0
            while position < size:
                self._check_stop()
                chunk = os.pread(fd, min(READ_CHUNK, size - position), position)
                if not chunk:
                    raise CorruptRecordError(f"{segment.log_path} shrank while being cleaned")
                pos = 0
                while pos < len(chunk) and (len(chunk) - pos >= BATCH_HEADER_SIZE or pos == 0):
                    header = parse_header(chunk, pos)
                    if header.batch_length < MIN_BATCH_LENGTH or position + pos + header.total_size > size:
                        raise CorruptRecordError(f"bad batch length at {position + pos} in {segment.log_path}")
                    if pos + header.total_size > len(chunk):
                        if pos:
                            break  # it comes whole with the next chunk
                        chunk = os.pread(fd, header.total_size, position)  # a batch larger than a chunk
                    validate_batch(chunk, pos, header)
                    yield chunk, pos, header
                    pos += header.total_size
                position += pos
                self.stats.bytes_read += pos
                throttler.throttle(pos)
        finally:
            os.close(fd)

    def _offset_map(self, throttler: Throttler) -> dict[bytes, int]:
        """Key -> offset of its latest record in the dirty segments (aborted transactions and markers left out)."""
        offsets: dict[bytes, int] = {}
        for group in self.groups:
            for segment in group:
                if self._ends[segment] <= self.first_dirty:
                    continue
                for buf, pos, header in self._batches(segment, throttler):
                    if header.last_offset < self.first_dirty or header.is_control or self._is_aborted(header):
                        continue
                    for record in _records(batch_body(buf, pos, header), header):
                        if record.key is not None:
                            offsets[record.key] = record.offset
        return offsets

    def _retained(self, buf: bytes, pos: int, header: BatchHeader, offsets: dict[bytes, int]
                  ) -> tuple[Buffer, BatchHeader] | None:
        """The batch with the records that stay (the module's rules), or None if none does."""
        self.stats.records_read += header.records_count
        whole = memoryview(buf)[pos : pos + header.total_size]
        if header.is_control:
            return whole, header
        if self._is_aborted(header):
            self.stats.records_removed += header.records_count
            return None
        body = batch_body(buf, pos, header)
        spans = []
        for record in _records(body, header):
            if record.key is None or offsets.get(record.key, record.offset) > record.offset:
                continue
            if record.tombstone:
                if record.timestamp < self._delete_before:
                    continue
                if self.oldest_tombstone_kept is None or record.timestamp < self.oldest_tombstone_kept:
                    self.oldest_tombstone_kept = record.timestamp
            spans.append((record.start, record.end))
        self.stats.records_removed += header.records_count - len(spans)
        if len(spans) == header.records_count:
            return whole, header
        return batch_keeping(header, body, spans) if spans else None

    def _clean_group(self, group: list[LogSegment], txn_entries: list[AbortedTxn], offsets: dict[bytes, int],
                     throttler: Throttler) -> None:
        first = group[0]
        self._delete_output(first.base_offset)  # what a failed cleaning of this process left
        out = LogSegment(self.log.directory, first.base_offset, self.log.fs, first.index_interval_bytes,
                         first.created_ms, CLEANED_SUFFIX)
        try:
            pending = bytearray()
            batches: list[tuple[int, BatchHeader]] = []
            last: BatchHeader | None = None  # the last batch read
            kept_last: BatchHeader | None = None  # the last batch written
            for segment in group:
                for buf, pos, header in self._batches(segment, throttler):
                    last = header
                    retained = self._retained(buf, pos, header, offsets)
                    if retained is None:
                        continue
                    data, kept_last = retained
                    batches.append((len(pending), kept_last))
                    pending += data
                    if len(pending) >= WRITE_CHUNK:
                        self._write(out, pending, batches, throttler)
                        pending, batches = bytearray(), []
            if last is not None and (kept_last is None or kept_last.next_offset != last.next_offset):
                data, header = empty_batch(last)  # the segment still ends where the group ended
                batches.append((len(pending), header))
                pending += data
            self._write(out, pending, batches, throttler)
            for entry in txn_entries:
                out.txn_index.append(entry)
            out.close()  # seals the time index, fsyncs every file
        except BaseException:
            out.close_handles()
            raise
        self.stats.segments_written += 1

    def _write(self, out: LogSegment, pending: bytearray, batches: list[tuple[int, BatchHeader]],
               throttler: Throttler) -> None:
        if pending:
            out.append(pending, batches)
            self.stats.bytes_written += len(pending)
            throttler.throttle(len(pending))

    # --- on the log's thread ---------------------------------------------------------------------

    def swap(self) -> CleanerStats | None:
        """After `run`: put each cleaned segment in place of its group (PartitionLog.replace_segments) and move the
        log's first dirty offset to the end of what was cleaned. None, and the output deleted, if the run failed
        (see `error`) or the log was truncated or taken offline meanwhile; a group whose segments went meanwhile
        (retention, DeleteRecords) is skipped."""
        log = self.log
        if self.error is not None or log.offline or log.truncation_count != self.truncation_count:
            self.discard()
            return None
        for group in self.groups:
            if not log.replace_segments(group):
                self._delete_output(group[0].base_offset)
        log.first_dirty_offset = max(log.first_dirty_offset, self.end)
        return self.stats


def plan(log: PartitionLog, io_max_bytes_per_second: float = math.inf) -> Cleaning | None:
    """On the log's thread: a cleaning of what `cleanable_range` allows now, whatever the dirty ratio; None if that
    is nothing."""
    cleanable = cleanable_range(log)
    if not any(segment.size for segment in cleanable.segments):
        return None
    return Cleaning(log, cleanable, io_max_bytes_per_second)


def clean(log: PartitionLog, io_max_bytes_per_second: float = math.inf) -> CleanerStats | None:
    """Plan, run and swap one cleaning of `log` in this thread (tests, tools); raises what made the run fail."""
    cleaning = plan(log, io_max_bytes_per_second)
    if cleaning is None:
        return None
    cleaning.run()
    if cleaning.error is not None:
        raise cleaning.error
    return cleaning.swap()
