"""Whose log dirs these are: checked on every start, before a log is opened or the metadata log is created.

Rules (issue 17.6; Kafka's meta.properties and 3.7's stray logs):
- A data dir that has served a node (it has meta.properties) but has lost its controller metadata log stops
  the start: an empty metadata log would make every partition look unassigned. Nothing is created or deleted.
- A metadata log that cannot be read stops the start with its path and the bad position.
- Every log dir is claimed for (cluster id, node id): another node's or cluster's dir stops the start.
- Partitions the metadata no longer places on this broker are renamed `-stray`, never deleted.
"""

from __future__ import annotations

import os

from epoch_broker.broker.config import StartupError
from epoch_broker.broker.metadata.stored_log import FILE_NAME as METADATA_LOG
from epoch_broker.broker.metadata.stored_log import CorruptMetadataLog
from epoch_broker.storage import meta_properties
from epoch_broker.storage.meta_properties import MetaPropertiesError


def check_usable(directories: list[str]) -> None:
    """Before anything is written: each dir exists (made if missing), is a directory, and can be written."""
    for directory in directories:
        if os.path.exists(directory) and not os.path.isdir(directory):
            raise StartupError(f"log dir {directory} is not a directory")
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as exc:
            raise StartupError(f"log dir {directory} cannot be created: {exc.strerror}") from exc
        if not os.access(directory, os.W_OK | os.X_OK):
            raise StartupError(f"log dir {directory} is not writable")


def check_metadata_log_present(data_dir: str) -> None:
    """Before an embedded or controller-only process opens (or would create) its metadata log."""
    try:
        meta = meta_properties.read(data_dir)
    except MetaPropertiesError as exc:
        raise StartupError(str(exc)) from exc
    if meta is not None and not os.path.exists(os.path.join(data_dir, METADATA_LOG)):
        raise StartupError(f"{os.path.join(data_dir, METADATA_LOG)} is missing, but {data_dir} has served node "
                           f"{meta.node_id} of cluster {meta.cluster_id}: restore it (nothing was changed; starting "
                           "empty would make every partition here look unassigned)")


def corrupt_metadata_log(exc: CorruptMetadataLog) -> StartupError:
    return StartupError(f"the metadata log cannot be read: {exc} (restore it; nothing was changed)")


def claim_log_dirs(log_dirs: list[str], cluster_id: str, node_id: int) -> None:
    """Check (or write) meta.properties in every log dir; StartupError naming the first that belongs elsewhere."""
    for log_dir in log_dirs:
        try:
            meta_properties.claim(log_dir, cluster_id, node_id)
        except MetaPropertiesError as exc:
            raise StartupError(str(exc)) from exc
