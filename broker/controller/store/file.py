"""`FileMetadataStore`: the controller's metadata in a file of the data dir, replayed at start.

Format: the file `cluster-metadata.log` in the data dir, UTF-8 JSON lines, one metadata
record per line (broker/metadata/records.py has the record types), appended and fsynced before `append` returns::

    {"type":"ClusterRecord","cluster_id":"..."}
    {"type":"TopicRecord","name":"t","topic_id":"<32 hex>","configs":{}}
    ...

Rules:
- Append-only; a record, once acknowledged, is never lost (fsync of the file, and of the directory when the
  file is created).
- A torn last line (a crash mid-append, never acknowledged) is cut off when the store is opened. A bad line
  anywhere else is corruption and stops the start: guessing at cluster metadata is worse than failing.
- Synchronous file code, like storage/: the controller calls it on the event loop; appends are rare
  (topic changes, registrations, fencing, ISR changes, producer-id blocks).
"""

from __future__ import annotations

import os
from typing import Any

from epoch_broker.broker.metadata.records import from_json, to_json
from epoch_broker.broker.metadata.stored_log import FILE_NAME, CorruptMetadataLog


class FileMetadataStore:
    def __init__(self, directory: str) -> None:
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, FILE_NAME)
        created = not os.path.exists(self.path)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        if created:
            dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def load(self) -> list[Any]:
        with open(self.path, "rb") as f:
            data = f.read()
        records = []
        position = 0
        for line in data.split(b"\n"):
            end = position + len(line) + 1
            if end > len(data):  # no newline: a torn last append, never acknowledged
                if line:
                    os.ftruncate(self._fd, position)
                break
            try:
                records.append(from_json(line.decode()))
            except (ValueError, KeyError, TypeError) as exc:
                raise CorruptMetadataLog(f"{self.path}: bad record at byte {position}: {exc}") from exc
            position = end
        return records

    def append(self, records: list[Any]) -> None:
        if not records:
            return
        os.write(self._fd, "".join(to_json(r) + "\n" for r in records).encode())
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:  # closing twice is harmless
            os.close(self._fd)
            self._fd = -1
