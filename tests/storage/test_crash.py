"""Crash tests through the fault seam: torn writes, lost unsynced data, failed fsync, full disk,
corrupt files. After every reopen the log is a prefix of what was written, every batch passes its
CRC and the epoch cache agrees with the batches."""

from __future__ import annotations

import os
import pathlib

import pytest

from epoch_broker.protocol.errors import KafkaStorageError
from epoch_broker.protocol.records import build_batch
from epoch_broker.storage.fs import FaultyFileSystem, SimulatedCrash
from epoch_broker.storage.leader_epoch import FILE_NAME, EpochEntry
from epoch_broker.storage.log import LogConfig, PartitionLog
from epoch_broker.storage.log_manager import RECOVERY_POINT_FILE, LogManager
from tests.storage.storage_invariants import assert_prefix_of

CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=256)


def batch(i: int) -> bytearray:
    return build_batch([(b"key", b"value-%d" % i * 10, [("h", b"v")], 1000 + i)] * (1 + i % 3))


class Writer:
    """Appends numbered batches (epoch rising every 4) and remembers their stamped bytes."""

    def __init__(self, path: str, fs: FaultyFileSystem, config: LogConfig = CONFIG) -> None:
        self.path, self.fs, self.config = path, fs, config
        self.log = PartitionLog.open(path, config, fs)
        self.written: list[bytes] = []
        self.durable = 0  # batches known fsynced

    def append(self, n: int) -> None:
        for _ in range(n):
            buf = batch(len(self.written))
            self.log.append_as_leader(buf, leader_epoch=len(self.written) // 4)
            self.written.append(bytes(buf))

    def flush(self) -> None:
        self.log.flush()
        self.durable = len(self.written)

    def crash_and_reopen(self, lose_unsynced: bool = True) -> PartitionLog:
        recovery_point = self.log.recovery_point
        self.log.close_without_flush()
        if lose_unsynced:
            self.fs.crash()
        self.log = PartitionLog.open(self.path, self.config, self.fs, recovery_point=recovery_point)
        return self.log


@pytest.fixture
def writer(tmp_path: pathlib.Path) -> Writer:
    return Writer(str(tmp_path / "t-0"), FaultyFileSystem())


@pytest.mark.parametrize("keep", [0, 1, 11, 12, 60, 61, 62, -1])
def test_a_torn_last_batch_is_cut_and_everything_before_it_kept(writer: Writer, keep: int) -> None:
    writer.append(10)
    writer.flush()
    writer.append(3)
    writer.fs.tear_next_write_at = keep if keep >= 0 else len(batch(13)) - 1
    with pytest.raises(SimulatedCrash):
        writer.append(1)
    log = writer.crash_and_reopen(lose_unsynced=False)
    assert assert_prefix_of(log, writer.written) == 13
    writer.append(2)  # and the log takes appends again, at the right offsets
    assert_prefix_of(writer.log, writer.written)


def test_everything_not_fsynced_may_be_lost_but_the_log_stays_a_prefix(writer: Writer) -> None:
    writer.append(9)
    writer.flush()
    writer.append(11)  # new epochs start here (epoch checkpoint is fsynced, the data is not)
    log = writer.crash_and_reopen()
    kept = assert_prefix_of(log, writer.written)
    assert kept == writer.durable
    assert log.latest_epoch == 2 and EpochEntry(3, 0) not in log.epoch_cache.entries


def test_an_epoch_checkpoint_ahead_of_the_log_is_trimmed_to_the_log_end(writer: Writer) -> None:
    writer.append(6)
    writer.flush()
    writer.log.epoch_cache.assign(9, 500)  # as if a leader recorded epoch 9 and then lost its data
    log = writer.crash_and_reopen()
    assert_prefix_of(log, writer.written)
    assert all(entry.start_offset < log.log_end_offset for entry in log.epoch_cache.entries)


@pytest.mark.parametrize("content", [b"", b"junk", b"0\n5\n1 1\n", b"0\n1\n7 x\n", b"\xff\xfe"])
def test_a_corrupt_epoch_checkpoint_is_rebuilt_from_the_batches(writer: Writer, content: bytes) -> None:
    writer.append(12)
    writer.flush()
    writer.log.close()
    pathlib.Path(writer.path, FILE_NAME).write_bytes(content)
    log = PartitionLog.open(writer.path, CONFIG, writer.fs, clean_shutdown=True, recovery_point=999)
    assert_prefix_of(log, writer.written)
    assert [e.epoch for e in log.epoch_cache.entries] == [0, 1, 2]


def test_a_missing_epoch_checkpoint_is_rebuilt_from_the_batches(writer: Writer) -> None:
    writer.append(12)
    writer.log.close()
    os.remove(os.path.join(writer.path, FILE_NAME))
    log = PartitionLog.open(writer.path, CONFIG, writer.fs, clean_shutdown=True)
    assert_prefix_of(log, writer.written)


def test_a_flipped_bit_mid_log_cuts_the_log_there(writer: Writer) -> None:
    writer.append(30)
    assert len(writer.log.segments) > 2
    second = writer.log.segments[1]
    writer.log.close_without_flush()
    with open(second.log_path, "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0x10]))
    log = PartitionLog.open(writer.path, CONFIG, writer.fs)
    kept = assert_prefix_of(log, writer.written)
    assert log.log_end_offset <= second.base_offset + 3 and kept < 30
    assert len(log.segments) == 2


def test_a_failed_fsync_takes_the_log_offline_and_a_reopen_recovers_a_prefix(tmp_path: pathlib.Path) -> None:
    fs = FaultyFileSystem()
    writer = Writer(str(tmp_path / "t-0"), fs, LogConfig(fsync_every_append=True))
    writer.append(5)
    fs.disk_faults.fsync_failing = True
    with pytest.raises(KafkaStorageError):
        writer.append(1)
    with pytest.raises(KafkaStorageError):
        writer.append(1)
    assert writer.log.offline
    log = writer.crash_and_reopen()
    assert assert_prefix_of(log, writer.written) >= 5


def test_a_full_disk_raises_a_clear_error_and_leaves_the_log_as_it_was(writer: Writer) -> None:
    writer.append(5)
    before = (writer.log.log_end_offset, writer.log.size, writer.log.read_bytes(0, 1 << 20))
    writer.fs.space_left = 30
    with pytest.raises(KafkaStorageError, match="No space left"):
        writer.log.append_as_leader(batch(99), 7)
    assert (writer.log.log_end_offset, writer.log.size, writer.log.read_bytes(0, 1 << 20)) == before
    assert writer.log.latest_epoch == 1
    writer.fs.space_left = None
    writer.append(3)
    writer.log.close()
    log = PartitionLog.open(writer.path, CONFIG, writer.fs, clean_shutdown=True, recovery_point=8)
    assert assert_prefix_of(log, writer.written) == 8


def test_a_corrupt_recovery_point_checkpoint_means_a_full_rescan(tmp_path: pathlib.Path) -> None:
    fs = FaultyFileSystem()
    manager = LogManager.open([str(tmp_path)], CONFIG, fs)
    log = manager.get_or_create_log("t", 0)
    written = []
    for i in range(20):
        buf = batch(i)
        log.append_as_leader(buf, i // 4)
        written.append(bytes(buf))
    manager.flush_all()
    log.close_without_flush()
    (tmp_path / RECOVERY_POINT_FILE).write_bytes(b"0\n1\nt 0 zz\n")
    fs.crash()
    reopened = LogManager.open([str(tmp_path)], CONFIG, fs)
    assert not reopened.was_clean_shutdown[str(tmp_path)]
    recovered = reopened.get_log("t", 0)
    assert recovered is not None and recovered.recovery_point == recovered.log_end_offset
    assert assert_prefix_of(recovered, written) == 20


def test_lost_index_files_are_rebuilt_after_a_clean_shutdown(writer: Writer) -> None:
    writer.append(30)
    writer.log.close()
    for name in os.listdir(writer.path):
        if name.endswith(".index"):
            os.remove(os.path.join(writer.path, name))
    log = PartitionLog.open(writer.path, CONFIG, writer.fs, clean_shutdown=True, recovery_point=999)
    assert assert_prefix_of(log, writer.written) == 30
    assert log.read(20, 1).first_offset <= 20
