"""Sparse per-segment indexes, binary, in Kafka's layout.

``<base>.index`` (offset index): 8-byte entries, big-endian::

    relative_offset int32   batch base offset - segment base offset
    position        int32   byte position of that batch in the segment's .log

``<base>.timeindex`` (time index): 12-byte entries, big-endian::

    timestamp       int64   the segment's largest batch max timestamp so far
    relative_offset int32   base offset of the first batch that reached it, minus segment base

Rules:
- Entries are strictly increasing in every field; at most one entry per index_interval_bytes of log.
- Lookups bisect over the file with os.pread: memory stays flat however large the log grows, and
  a lookup costs O(log n) reads of a few bytes from the page cache.
- Indexes are derived data: after an unclean shutdown they are rebuilt from the .log, so their
  writes are not fsynced on the append path, only at flush and close.
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Sequence
from typing import overload

from epoch_broker.storage.fs import FileSystem


class _Entries(Sequence[tuple[int, int]]):
    """The index file seen as a read-only sequence, so the bisect module can search it."""

    def __init__(self, index: _FixedIndex) -> None:
        self._index = index

    def __len__(self) -> int:
        return self._index.entries

    @overload
    def __getitem__(self, i: int) -> tuple[int, int]: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[tuple[int, int]]: ...
    def __getitem__(self, i: int | slice) -> tuple[int, int] | Sequence[tuple[int, int]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self._index.entry(i)


class _FixedIndex:
    ENTRY: struct.Struct

    def __init__(self, path: str, base_offset: int, fs: FileSystem) -> None:
        self.path = path
        self.base_offset = base_offset
        self.fs = fs
        self.fd = fs.open(path)
        self.entries = fs.size(self.fd) // self.ENTRY.size
        self._last = self.entry(self.entries - 1) if self.entries else None

    def entry(self, i: int) -> tuple[int, int]:
        raw = os.pread(self.fd, self.ENTRY.size, i * self.ENTRY.size)
        return self._decode(self.ENTRY.unpack(raw))

    def _decode(self, fields: tuple[int, int]) -> tuple[int, int]:
        raise NotImplementedError

    def _append(self, *fields: int) -> None:
        self.fs.write(self.fd, self.ENTRY.pack(*fields), self.entries * self.ENTRY.size)
        self.entries += 1

    @property
    def last(self) -> tuple[int, int] | None:
        return self._last

    def truncate_entries(self, count: int) -> None:
        self.entries = count
        self.fs.truncate(self.fd, count * self.ENTRY.size)
        self._last = self.entry(count - 1) if count else None

    def flush(self) -> None:
        self.fs.fsync(self.fd)

    def close(self) -> None:
        self.fs.close(self.fd)


class OffsetIndex(_FixedIndex):
    """Batch base offset -> file position."""

    ENTRY = struct.Struct(">ii")

    def _decode(self, fields: tuple[int, int]) -> tuple[int, int]:
        return fields[0] + self.base_offset, fields[1]

    def append(self, offset: int, position: int) -> None:
        if self._last is not None and (offset <= self._last[0] or position <= self._last[1]):
            return
        self._append(offset - self.base_offset, position)
        self._last = (offset, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """Largest entry with offset <= ``offset``; the segment start if none."""
        i = bisect.bisect_right(_Entries(self), offset, key=lambda e: e[0])
        return self.entry(i - 1) if i else (self.base_offset, 0)

    def lookup_position(self, position: int) -> tuple[int, int]:
        """Largest entry with position <= ``position``; the segment start if none."""
        i = bisect.bisect_right(_Entries(self), position, key=lambda e: e[1])
        return self.entry(i - 1) if i else (self.base_offset, 0)

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets >= ``offset``."""
        self.truncate_entries(bisect.bisect_left(_Entries(self), offset, key=lambda e: e[0]))


class TimeIndex(_FixedIndex):
    """Largest timestamp so far -> base offset of the batch that reached it."""

    ENTRY = struct.Struct(">qi")

    def _decode(self, fields: tuple[int, int]) -> tuple[int, int]:
        return fields[0], fields[1] + self.base_offset

    def append(self, timestamp: int, offset: int) -> None:
        if self._last is not None and (timestamp <= self._last[0] or offset <= self._last[1]):
            return
        self._append(timestamp, offset - self.base_offset)
        self._last = (timestamp, offset)

    def lookup_before(self, timestamp: int) -> int:
        """An offset such that every batch before it has max timestamp < ``timestamp``."""
        i = bisect.bisect_left(_Entries(self), timestamp, key=lambda e: e[0])
        return self.entry(i - 1)[1] if i else self.base_offset

    def truncate_to(self, offset: int) -> None:
        self.truncate_entries(bisect.bisect_left(_Entries(self), offset, key=lambda e: e[1]))
