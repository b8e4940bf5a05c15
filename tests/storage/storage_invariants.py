"""Checks shared by the crash and property tests: what must hold of any log after a reopen."""

from __future__ import annotations

from epoch_broker.protocol.records import iter_batches, parse_header, validate_batch
from epoch_broker.storage.leader_epoch import EpochEntry
from epoch_broker.storage.log import PartitionLog


def batches_of(log: PartitionLog) -> list[bytes]:
    """Every batch in the log, CRC-checked, in order."""
    data = log.read_bytes(log.log_start_offset, 1 << 40) if log.log_end_offset > log.log_start_offset else b""
    out = []
    for pos, header in iter_batches(data):
        validate_batch(data, pos, header)
        out.append(data[pos : pos + header.total_size])
    return out


def expected_epochs(batches: list[bytes]) -> list[EpochEntry]:
    """The epoch history a log holding exactly ``batches`` must report (first batch of each epoch)."""
    entries: list[EpochEntry] = []
    for raw in batches:
        header = parse_header(raw)
        if header.partition_leader_epoch >= 0 and (not entries or header.partition_leader_epoch > entries[-1].epoch):
            entries.append(EpochEntry(header.partition_leader_epoch, header.base_offset))
    return entries


def assert_prefix_of(log: PartitionLog, written: list[bytes]) -> int:
    """The log holds the first k written batches, byte for byte, and agrees on epochs; returns k."""
    found = batches_of(log)
    assert found == written[: len(found)], "the recovered log is not a prefix of what was written"
    offsets = [b[:8] for b in found]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    assert log.epoch_cache.entries == expected_epochs(found)
    end = int.from_bytes(found[-1][:8], "big") + int.from_bytes(found[-1][23:27], "big") + 1 if found else 0
    assert log.log_end_offset == end
    return len(found)
