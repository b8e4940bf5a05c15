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
  never raises for bad content. A file that exists but cannot be used (corrupt, or written by a newer
  version) is never discarded silently: a WARNING names it, why, and what replaces it (`fallback`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from epoch_broker.storage.fs import FileSystem

log = logging.getLogger(__name__)

VERSION = 0


class CheckpointFile:
    def __init__(self, path: str, fs: FileSystem | None = None, fallback: str = "rebuilt from the log") -> None:
        self.path = path
        self.fs = fs or FileSystem()
        self.fallback = fallback  # what takes the place of an unusable file, for the warning

    def write(self, entries: Iterable[Sequence[Any]]) -> None:
        rows = [" ".join(str(field) for field in entry) for entry in entries]
        text = "\n".join([str(VERSION), str(len(rows)), *rows]) + "\n"
        self.fs.write_atomic(self.path, text.encode())

    def read(self, field_types: Sequence[Callable[[str], Any]]) -> list[tuple[Any, ...]] | None:
        """Entries converted with ``field_types``; None if the file is missing or unusable (then WARNING)."""
        if not self.fs.exists(self.path):
            return None
        try:
            entries, problem = self._parse(self.fs.read_file(self.path).decode(), field_types)
        except (ValueError, UnicodeDecodeError, OSError) as exc:
            entries, problem = None, f"unreadable ({exc})"
        if problem is not None:
            log.warning("ignoring checkpoint %s: %s; %s", self.path, problem, self.fallback)
        return entries

    @staticmethod
    def _parse(text: str, field_types: Sequence[Callable[[str], Any]]
               ) -> tuple[list[tuple[Any, ...]] | None, str | None]:
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if len(lines) < 2:
            return None, "truncated (no version and count lines)"
        if int(lines[0]) != VERSION:
            return None, f"format version {lines[0]}, this broker reads version {VERSION}"
        count = int(lines[1])
        if count != len(lines) - 2:
            return None, f"{len(lines) - 2} entries where the count line says {count}"
        entries = []
        for line in lines[2:]:
            fields = line.split(" ")
            if len(fields) != len(field_types):
                return None, f"entry {line!r} has {len(fields)} fields, not {len(field_types)}"
            entries.append(tuple(convert(f) for convert, f in zip(field_types, fields, strict=True)))
        return entries, None
