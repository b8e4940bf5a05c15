"""Record bytes that stay in segment files until the server sends them (Kafka's `FileRecords`).

A read never copies or decodes batches: it returns byte ranges of open segment files (`FileSlice`), which the
server hands to os.sendfile, so records go from the page cache to the socket without passing through Python.
"""

from __future__ import annotations

from typing import NamedTuple


class FileSlice(NamedTuple):
    """A byte range of an open segment file, ready for os.sendfile(out, fd, position, size)."""

    fd: int
    position: int
    size: int


class FileRecords:
    """The batches of one partition read, as file ranges; `len()` is the byte count, so the codec frames it
    like any bytes value (see primitives.write_records)."""

    __slots__ = ("size", "slices")

    def __init__(self, slices: list[FileSlice], size: int) -> None:
        self.slices = slices
        self.size = size

    def __len__(self) -> int:
        return self.size
