"""One log segment: ``<base>.log`` plus its ``.index``, ``.timeindex`` and, if it holds an abort marker,
``.txnindex`` (storage.transaction_index) (base = 20-digit offset). The same files with the suffix ``.cleaned``
are a segment the log cleaner is writing (storage.log_cleaner), never read as part of the log.

``.log`` holds record batches back to back exactly as on the wire after the leader stamped them
(layout in protocol.records). Nothing else: no segment header, no footer, so a segment can be sent
to a socket with os.sendfile and its size is the sum of its batches.

Rules:
- ``size`` (in memory) is the end of the last whole batch; bytes are written there with one
  positional write per append, so a failed write never moves ``size``, and ``discard_tail``
  cuts whatever a failed write left behind.
- Offsets inside a segment strictly increase; every batch's base offset >= the segment's base.
- ``recover`` is the only place that trusts nothing: it validates every batch (framing, magic,
  CRC32C, increasing offsets), cuts the file at the first bad byte and rebuilds both indexes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

from epoch_broker.protocol.errors import KafkaError
from epoch_broker.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_LENGTH,
    BatchHeader,
    iter_batches,
    parse_header,
    validate_batch,
)
from epoch_broker.storage.file_records import FileSlice
from epoch_broker.storage.fs import FileSystem
from epoch_broker.storage.index import OffsetIndex, TimeIndex
from epoch_broker.storage.transaction_index import TransactionIndex

RECOVERY_CHUNK = 8 << 20  # read size while validating a segment: large reads, bounded memory
CLEANED_SUFFIX = ".cleaned"  # after a segment's file names: the log cleaner's output before its swap


def file_name(directory: str, base_offset: int, suffix: str) -> str:
    return os.path.join(directory, f"{base_offset:020d}{suffix}")


class LogSegment:
    def __init__(
        self,
        directory: str,
        base_offset: int,
        fs: FileSystem,
        index_interval_bytes: int,
        created_ms: int,
        suffix: str = "",
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.fs = fs
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self.suffix = suffix  # CLEANED_SUFFIX for the log cleaner's output
        self.log_path = file_name(directory, base_offset, ".log" + suffix)
        self.fd = fs.open(self.log_path)
        self.size = fs.size(self.fd)
        self.index = OffsetIndex(file_name(directory, base_offset, ".index" + suffix), base_offset, fs)
        self.time_index = TimeIndex(file_name(directory, base_offset, ".timeindex" + suffix), base_offset, fs)
        self.txn_index = TransactionIndex(file_name(directory, base_offset, ".txnindex" + suffix), fs)
        self.next_offset = base_offset
        self.max_timestamp = -1
        self._offset_of_max_timestamp = base_offset
        self._bytes_since_index = 0
        self._dirty = False

    # --- loading ------------------------------------------------------------------------------

    def load_tail(self) -> None:
        """After a clean shutdown: trust the file; find next offset and max timestamp cheaply."""
        offset, position = self.index.lookup(2**63 - 1)
        self.max_timestamp = self.time_index.last[0] if self.time_index.last else -1
        if position > self.size:
            raise KafkaError("index points past the end of the log")
        if self.time_index.last:
            self._offset_of_max_timestamp = self.time_index.last[1]
        self.next_offset = max(self.base_offset, offset)
        for _, header in self.headers_from(position):
            self.next_offset = header.next_offset
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self._offset_of_max_timestamp = header.base_offset

    def recover(self, on_batch: Callable[[BatchHeader], None]) -> int:
        """Validate every batch, truncate at the first bad one, rebuild indexes.

        Calls ``on_batch`` for each good batch in order; returns the number of bytes cut.
        """
        self.index.truncate_entries(0)
        self.time_index.truncate_entries(0)
        self._bytes_since_index = 0
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self._offset_of_max_timestamp = self.base_offset
        file_size = self.fs.size(self.fd)
        good = 0
        while good < file_size:
            chunk = os.pread(self.fd, RECOVERY_CHUNK, good)
            end = self._valid_prefix(chunk, good, on_batch)
            if end == len(chunk):
                good += end
                continue
            good += end
            rest = len(chunk) - end
            header = parse_header(chunk, end) if rest >= BATCH_HEADER_SIZE else None
            if (
                header is None
                or header.magic != MAGIC
                or header.batch_length < MIN_BATCH_LENGTH
                or header.total_size <= rest
            ):
                break  # the bad batch lies wholly in this chunk (or its header is unreadable)
            # A batch larger than the chunk starts here: read exactly that batch.
            extra = self._valid_prefix(os.pread(self.fd, header.total_size, good), good, on_batch)
            if extra == 0:
                break
            good += extra
        cut = file_size - good
        if cut:
            self.fs.truncate(self.fd, good)
        self.size = good
        self.seal_time_index()
        self._dirty = True
        return cut

    def _valid_prefix(self, chunk: bytes, base_position: int, on_batch: Callable[[BatchHeader], None]) -> int:
        """Length of the run of valid whole batches at the start of ``chunk``."""
        end = 0
        try:
            for pos, header in iter_batches(chunk):
                validate_batch(chunk, pos, header)
                if header.base_offset < self.next_offset:
                    break
                self._index_batch(base_position + pos, header)
                on_batch(header)
                end = pos + header.total_size
        except KafkaError:
            pass  # the first bad or incomplete batch ends the valid prefix
        return end

    # --- writing ------------------------------------------------------------------------------

    def _index_batch(self, position: int, header: BatchHeader) -> None:
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self._offset_of_max_timestamp = header.base_offset
        if self._bytes_since_index >= self.index_interval_bytes or position == 0:
            self.index.append(header.base_offset, position)
            self.time_index.append(self.max_timestamp, self._offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += header.total_size
        self.next_offset = header.next_offset

    def seal_time_index(self) -> None:
        """Record the segment's final max timestamp (on roll and close), as Kafka does, so a
        closed segment's max timestamp is the time index's last entry."""
        if self.max_timestamp >= 0:
            self.time_index.append(self.max_timestamp, self._offset_of_max_timestamp)

    def append(self, buf: bytes | bytearray | memoryview, batches: list[tuple[int, BatchHeader]]) -> None:
        """Write ``buf`` (whole, validated, stamped batches) at the end with one write."""
        position = self.size
        self.fs.write(self.fd, buf, position)
        self.size = position + len(buf)
        self._dirty = True
        for pos, header in batches:
            self._index_batch(position + pos, header)

    def discard_tail(self) -> None:
        """Cut anything a failed write left after ``size``."""
        self.fs.truncate(self.fd, self.size)

    def flush(self) -> None:
        if self._dirty:
            self.fs.fsync(self.fd)
            self.index.flush()
            self.time_index.flush()
            self._dirty = False
        self.txn_index.flush()

    # --- reading ------------------------------------------------------------------------------

    def headers_from(self, position: int) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from ``position`` to the end, reading headers only."""
        while position < self.size:
            header = parse_header(os.pread(self.fd, BATCH_HEADER_SIZE, position))
            yield position, header
            position += header.batch_length + LOG_OVERHEAD

    def find(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The batch holding ``offset`` (or the first one after it); None if past the end."""
        _, position = self.index.lookup(offset)
        for pos, header in self.headers_from(position):
            if header.last_offset >= offset:
                return pos, header
        return None

    def read(
        self, offset: int, max_bytes: int, upper_bound: int, include_first: bool
    ) -> tuple[FileSlice, int, int] | None:
        """Whole batches from the one holding ``offset``, at most ``max_bytes`` (the first one
        regardless when ``include_first``), none reaching ``upper_bound``.

        Returns (slice, first batch base offset, offset after the last batch), or None if no batch
        qualifies."""
        found = self.find(offset)
        if found is None:
            return None
        start, first = found
        end = start
        next_offset = offset
        for pos, header in self.headers_from(start):
            if header.last_offset >= upper_bound:
                break
            if pos + header.total_size - start > max_bytes and not (include_first and pos == start):
                break
            end = pos + header.total_size
            next_offset = header.next_offset
        if end == start:
            return None
        return FileSlice(self.fd, start, end - start), first.base_offset, next_offset

    def timestamp_start(self, timestamp: int) -> Iterator[tuple[int, BatchHeader]]:
        """Batches from a point before which every batch's max timestamp is < ``timestamp``."""
        found = self.find(self.time_index.lookup_before(timestamp))
        if found is not None:
            yield from self.headers_from(found[0])

    # --- truncation and lifecycle ---------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop every batch whose last offset is >= ``offset`` (whole batches only)."""
        found = self.find(offset)
        if found is None:
            return
        position, header = found
        self.fs.truncate(self.fd, position)
        self.size = position
        self.index.truncate_to(header.base_offset)
        self.time_index.truncate_to(header.base_offset)
        self.txn_index.truncate_to(header.base_offset)
        self._bytes_since_index = 0
        # Re-derive the tail state from what is left (at most one index interval to scan).
        last = self.index.last
        self.next_offset = last[0] if last else self.base_offset
        self.max_timestamp = self.time_index.last[0] if self.time_index.last else -1
        self._offset_of_max_timestamp = self.time_index.last[1] if self.time_index.last else self.base_offset
        for _, kept in self.headers_from(last[1] if last else 0):
            self.next_offset = kept.next_offset
            if kept.max_timestamp > self.max_timestamp:
                self.max_timestamp = kept.max_timestamp
                self._offset_of_max_timestamp = kept.base_offset
        self._dirty = True

    def close(self) -> None:
        self.seal_time_index()
        self.flush()
        self.index.close()
        self.time_index.close()
        self.fs.close(self.fd)

    def close_handles(self) -> None:
        """Close without flushing (after a storage error, or for files already deleted)."""
        for fd in (self.fd, self.index.fd, self.time_index.fd):
            with contextlib.suppress(OSError):
                self.fs.close(fd)

    def delete_files(self) -> None:
        for suffix in (".log", ".index", ".timeindex"):
            path = file_name(self.directory, self.base_offset, suffix + self.suffix)
            if self.fs.exists(path):
                self.fs.remove(path)
        self.txn_index.delete()
