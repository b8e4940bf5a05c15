"""What each replica of the drill's topic holds on disk after healing, as `replica_log` events for the checker's
`replicas_consistent` invariant (the StrongIsr invariant: below the high watermark, every replica's log and
leader-epoch-checkpoint are the same).

Rules:
- Read from outside the broker processes, as another process sees the files: the segments (`*.log`, in offset
  order) up to their last whole batch (a batch being written ends the scan), and `leader-epoch-checkpoint` in
  Kafka's text format (storage/checkpoint.py reads it).
- A batch is named by what a replica must agree on: its offsets, its leader epoch and its CRC.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from epoch_broker.drill.targets import Target
from epoch_broker.protocol.records import LOG_OVERHEAD, iter_batches
from epoch_broker.storage.checkpoint import CheckpointFile
from epoch_broker.storage.leader_epoch import FILE_NAME as EPOCH_CHECKPOINT

_LENGTH = struct.Struct(">i")  # a batch's length, after its 8-byte base offset


def whole_prefix(data: bytes) -> bytes:
    """The whole batches at the start of `data`: a batch still being written ends it (a broker writes with
    pwrite, no user-space buffer, so another process sees its writes at once)."""
    end = 0
    while end + LOG_OVERHEAD <= len(data):
        (length,) = _LENGTH.unpack_from(data, end + 8)
        if length <= 0 or end + LOG_OVERHEAD + length > len(data):
            break
        end += LOG_OVERHEAD + length
    return data[:end]


def whole_batches(data: bytes) -> list[list[int]]:
    """[base offset, last offset, leader epoch, crc] of every whole batch at the start of `data`."""
    return [[h.base_offset, h.last_offset, h.partition_leader_epoch, h.crc]
            for _, h in iter_batches(whole_prefix(data))]


def replica_logs(cluster: Target, topic: str, high_watermarks: dict[int, int]) -> list[dict[str, Any]]:
    """One `replica_log` event's fields per replica directory of the topic found on the brokers' disks (none
    where the drill cannot read them)."""
    found = []
    for broker in cluster.brokers():
        for partition, high_watermark in sorted(high_watermarks.items()):
            if broker.data_dir is None:
                continue
            directory = Path(broker.data_dir) / f"{topic}-{partition}"
            if not directory.is_dir():
                continue  # not a replica of this partition
            data = b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))
            checkpoint = CheckpointFile(str(directory / EPOCH_CHECKPOINT)).read((int, int)) or []
            found.append({"broker": broker.node_id, "topic": topic, "partition": partition,
                          "high_watermark": high_watermark, "batches": whole_batches(data),
                          "epoch_checkpoint": [list(entry) for entry in checkpoint]})
    return found
