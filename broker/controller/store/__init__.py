"""Where the controller keeps cluster metadata: a `MetadataStore`, replayed at start.

Backends implement `load` and `append` (and `close`): `file.py` (the default, `cluster-metadata.log` in the
data dir) and `zookeeper.py` (`zookeeper.connect`: the log in ZooKeeper, appended only by the controller elected
there, fenced by the controller epoch; it also elects and follows, for controller/quorum.py). The controller's
decisions do not depend on which one it writes to; only when they become durable does (Controller.deferred).
A store that cannot read its records back raises `CorruptMetadataLog` (metadata/stored_log.py).
"""

from __future__ import annotations

from typing import Any, Protocol


class MetadataStore(Protocol):
    def load(self) -> list[Any]:
        """Every record appended so far, in order."""

    def append(self, records: list[Any]) -> None:
        """Make `records` durable, in order, before returning."""

    def close(self) -> None:
        """Release the store; closing twice is harmless."""


class NotController(Exception):
    """This process may not append: another controller is elected (or this one never was)."""
