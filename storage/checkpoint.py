"""A small text checkpoint file, replaced atomically, in the format of Kafka's CheckpointFile.

Format (UTF-8 text, one item per line)::

    <version>           always 0 here
    <count>             number of entry lines that follow
    <field> <field> ... one entry per line, fields separated by one space

Kafka writes leader-epoch-checkpoint ("epoch start_offset"), replication-offset-checkpoint,
recovery-point-offset-checkpoint and log-start-offset-checkpoint ("topic partition offset") this way.

Rules:
- Writes go through FileSystem.write_atomic (temp file, fsync, rename, fsync dir): a crash leaves
  the old or the new content, never a mix.
- A missing or corrupt file reads as None ("absent"); the caller rebuilds from the log. Reading
  never raises for bad content.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from epoch_broker.storage.fs import FileSystem

VERSION = 0


class CheckpointFile:
    def __init__(self, path: str, fs: FileSystem | None = None) -> None:
        self.path = path
        self.fs = fs or FileSystem()

    def write(self, entries: Iterable[Sequence[Any]]) -> None:
        rows = [" ".join(str(field) for field in entry) for entry in entries]
        text = "\n".join([str(VERSION), str(len(rows)), *rows]) + "\n"
        self.fs.write_atomic(self.path, text.encode())

    def read(self, field_types: Sequence[Callable[[str], Any]]) -> list[tuple[Any, ...]] | None:
        """Entries converted with ``field_types``; None if the file is missing or corrupt."""
        if not self.fs.exists(self.path):
            return None
        try:
            lines = self.fs.read_file(self.path).decode().split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            if len(lines) < 2 or int(lines[0]) != VERSION:
                return None
            count = int(lines[1])
            if count != len(lines) - 2:
                return None
            entries = []
            for line in lines[2:]:
                fields = line.split(" ")
                if len(fields) != len(field_types):
                    return None
                entries.append(tuple(convert(f) for convert, f in zip(field_types, fields, strict=True)))
            return entries
        except (ValueError, UnicodeDecodeError, OSError):
            return None
