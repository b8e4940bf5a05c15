"""`meta.properties`: which cluster and node a log dir belongs to (Kafka's file, KRaft version 1).

Format (Java properties, UTF-8), written once when the log dir is first used, replaced atomically::

    #Written by epoch-broker; do not edit
    cluster.id=<the cluster id>
    directory.id=<22-character base64 uuid, this log dir's own>
    node.id=<the node id>
    version=1

Rules:
- Read on every start, before anything in the log dir is opened or changed. A file for another node id or
  another cluster id, or of a newer version, stops the start (the caller says so in one line): a data dir
  mixed up between nodes or clusters is a mistake to report, never a reason to delete partitions.
- A log dir without the file (new, or written before the file existed) gets one; nothing else is changed.
"""

from __future__ import annotations

import base64
import os
import uuid
from dataclasses import dataclass

from epoch_broker.storage.fs import FileSystem

FILE_NAME = "meta.properties"
VERSION = 1


class MetaPropertiesError(Exception):
    """The log dir belongs elsewhere or cannot be read: the message says which and why."""


@dataclass(frozen=True, slots=True)
class MetaProperties:
    cluster_id: str
    node_id: int
    directory_id: str
    version: int = VERSION


def read(log_dir: str, fs: FileSystem | None = None) -> MetaProperties | None:
    """The log dir's meta.properties, None if it has none; raises MetaPropertiesError if it cannot be used."""
    fs = fs or FileSystem()
    path = os.path.join(log_dir, FILE_NAME)
    if not fs.exists(path):
        return None
    try:
        pairs = dict(line.split("=", 1) for line in fs.read_file(path).decode().splitlines()
                     if line.strip() and not line.startswith("#"))
        version = int(pairs["version"])
        if version > VERSION:
            raise MetaPropertiesError(f"{path} is version {version}, newer than this broker reads ({VERSION})")
        return MetaProperties(pairs["cluster.id"].strip(), int(pairs["node.id"]), pairs.get("directory.id", ""),
                              version)
    except (KeyError, ValueError, UnicodeDecodeError) as exc:
        raise MetaPropertiesError(f"{path} cannot be read ({exc!r}): fix or restore it") from exc


def write(log_dir: str, cluster_id: str, node_id: int, fs: FileSystem | None = None) -> MetaProperties:
    fs = fs or FileSystem()
    fs.makedirs(log_dir)
    directory_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    meta = MetaProperties(cluster_id, node_id, directory_id)
    text = (f"#Written by epoch-broker; do not edit\ncluster.id={cluster_id}\ndirectory.id={directory_id}\n"
            f"node.id={node_id}\nversion={VERSION}\n")
    fs.write_atomic(os.path.join(log_dir, FILE_NAME), text.encode())
    return meta


def claim(log_dir: str, cluster_id: str, node_id: int, fs: FileSystem | None = None) -> MetaProperties:
    """Check that `log_dir` belongs to this cluster and node (writing the file if it has none)."""
    meta = read(log_dir, fs)
    if meta is None:
        return write(log_dir, cluster_id, node_id, fs)
    path = os.path.join(log_dir, FILE_NAME)
    if meta.node_id != node_id:
        raise MetaPropertiesError(f"{path} says this log dir belongs to node {meta.node_id}, not node {node_id}: "
                                  "use that node id, or another log dir")
    if meta.cluster_id != cluster_id:
        raise MetaPropertiesError(f"{path} says this log dir belongs to cluster {meta.cluster_id}, but the "
                                  f"controller's metadata is of cluster {cluster_id}: a missing, replaced or "
                                  "foreign metadata log? Nothing was changed")
    return meta
