"""The aborted transactions of one segment: ``<base>.txnindex``, Kafka's layout (KIP-98).

One 34-byte entry per transaction aborted by a marker in this segment, in marker order, big-endian::

    version             int16   0
    producer_id         int64
    first_offset        int64   the transaction's first offset in this partition
    last_offset         int64   the offset of its abort marker
    last_stable_offset  int64   the partition's first unstable offset once it was aborted

A `read_committed` fetch gets the entries its range overlaps as `aborted_transactions`, and skips their records.

Rules:
- The file exists only for segments holding an abort marker, and is opened only to append or flush (a segment
  costs no descriptor for it); the entries are kept in memory from the segment's open.
- Derived data: the producer-state replay after an unclean shutdown writes the entries of the replayed range again
  (`truncate_to` first drops them), so appends are fsynced only with the segment, never one by one.
- A torn trailing entry (a crash mid-append) is ignored on load and cut at the next append.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from epoch_broker.storage.fs import FileSystem

_ENTRY = struct.Struct(">hqqqq")
_VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    def __init__(self, path: str, fs: FileSystem) -> None:
        self.path = path
        self.fs = fs
        self.entries: list[AbortedTxn] = []
        self._dirty = False
        if fs.exists(path):
            data = fs.read_file(path)
            for pos in range(0, len(data) - _ENTRY.size + 1, _ENTRY.size):
                version, *fields = _ENTRY.unpack_from(data, pos)
                if version != _VERSION:
                    break
                self.entries.append(AbortedTxn(*fields))

    def append(self, entry: AbortedTxn) -> None:
        self._write(len(self.entries) * _ENTRY.size, _ENTRY.pack(_VERSION, *entry))
        self.entries.append(entry)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of transactions aborted at or after ``offset`` (the log is cut there)."""
        kept = [e for e in self.entries if e.last_offset < offset]
        if len(kept) != len(self.entries):
            self.entries = kept
            self._write(len(kept) * _ENTRY.size, b"")

    def _write(self, position: int, data: bytes) -> None:
        fd = self.fs.open(self.path)
        try:
            self.fs.truncate(fd, position)
            if data:
                self.fs.write(fd, data, position)
        finally:
            self.fs.close(fd)
        self._dirty = True

    def flush(self) -> None:
        if self._dirty:
            fd = self.fs.open(self.path)
            try:
                self.fs.fsync(fd)
            finally:
                self.fs.close(fd)
            self._dirty = False

    def delete(self) -> None:
        if self.fs.exists(self.path):
            self.fs.remove(self.path)
        self.entries = []
