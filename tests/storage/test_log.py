"""PartitionLog and LogManager behaviour: append, read, truncation, retention, recovery, producers."""

from __future__ import annotations

import itertools
import os
import pathlib
import socket
import struct

import pytest

from epoch_broker.protocol.errors import (
    CorruptRecordError,
    OffsetOutOfRange,
    UnsupportedForMessageFormat,
)
from epoch_broker.protocol.records import Compression, build_batch, iter_batches, iter_records, validate_batch
from epoch_broker.storage.fs import FileSystem
from epoch_broker.storage.leader_epoch import EpochEntry
from epoch_broker.storage.log import LogConfig, PartitionLog, UnexpectedAppendOffset
from epoch_broker.storage.log_manager import CLEAN_SHUTDOWN_FILE, HIGH_WATERMARK_FILE, LogManager
from epoch_broker.storage.producer_state import Verdict

SMALL = LogConfig(segment_bytes=1024, index_interval_bytes=128)


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def batch(n: int = 1, ts: int = 1000, size: int = 10, **kwargs: int) -> bytearray:
    return build_batch([(b"k", b"x" * size, [], ts + i) for i in range(n)], **kwargs)


def offsets_in(buf: bytes) -> list[int]:
    out = []
    for pos, header in iter_batches(buf):
        validate_batch(buf, pos, header)
        out += [r.offset for r in iter_records(buf, pos, header)]
    return out


@pytest.fixture
def log(tmp_path: pathlib.Path) -> PartitionLog:
    return PartitionLog.open(str(tmp_path / "t-0"), SMALL)


class CountingFileSystem(FileSystem):
    def __init__(self) -> None:
        super().__init__()
        self.fsyncs = 0

    def fsync(self, fd: int) -> None:
        self.fsyncs += 1
        super().fsync(fd)

    def fsync_dir(self, path: str) -> None:
        self.fsyncs += 1
        super().fsync_dir(path)


def test_a_new_log_opens_without_recovery_and_its_first_epoch_is_one_checkpoint_write(tmp_path: pathlib.Path
                                                                                     ) -> None:
    """Creating __consumer_offsets makes 50 logs on the event loop: a new log has nothing to recover or clear."""
    fs = CountingFileSystem()
    log = PartitionLog.open(str(tmp_path / "t-0"), SMALL, fs)
    assert fs.fsyncs == 0
    assert not (tmp_path / "t-0" / "leader-epoch-checkpoint").exists()
    log.epoch_cache.assign(0, 0)
    assert fs.fsyncs == 2  # the checkpoint's file and its directory (tmp, fsync, rename, fsync dir)
    log.append_as_leader(batch(3), leader_epoch=0)
    reopened = PartitionLog.open(str(tmp_path / "t-0"), SMALL)
    assert reopened.epoch_cache.entries == [EpochEntry(0, 0)]
    assert reopened.log_end_offset == 3


def test_leader_appends_get_consecutive_offsets_and_the_epoch_stamp(log: PartitionLog) -> None:
    first = log.append_as_leader(batch(3), leader_epoch=5)
    second = log.append_as_leader(batch(2), leader_epoch=5)
    assert (first.first_offset, first.last_offset, first.num_records) == (0, 2, 3)
    assert (second.first_offset, second.last_offset) == (3, 4)
    assert log.log_end_offset == 5
    data = log.read_bytes(0, 1 << 20)
    assert offsets_in(data) == [0, 1, 2, 3, 4]
    assert {h.partition_leader_epoch for _, h in iter_batches(data)} == {5}
    assert log.epoch_cache.entries == [EpochEntry(5, 0)]


def test_a_rising_leader_epoch_is_recorded_at_the_log_end_offset(log: PartitionLog) -> None:
    log.append_as_leader(batch(2), 1)
    log.append_as_leader(batch(2), 1)
    log.append_as_leader(batch(2), 3)
    assert log.epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(3, 4)]
    assert log.end_offset_for_epoch(1) == (1, 4)
    assert log.end_offset_for_epoch(2) == (1, 4)
    assert log.end_offset_for_epoch(3) == (3, 6)
    assert log.epoch_for_offset(5) == 3


def test_a_bad_batch_anywhere_in_the_request_writes_nothing(log: PartitionLog) -> None:
    log.append_as_leader(batch(), 0)
    good, bad = batch(), batch()
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(good + bad, 0)
    truncated = batch()[:-3]
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(good + truncated, 0)
    assert log.log_end_offset == 1 and log.size == len(batch())


def test_old_message_formats_are_refused(log: PartitionLog) -> None:
    old = batch()
    old[16] = 1
    with pytest.raises(UnsupportedForMessageFormat):
        log.append_as_leader(old, 0)
    with pytest.raises(UnsupportedForMessageFormat):  # a follower's copy cannot hold one either
        log.append_as_follower(old)


def test_reads_return_whole_batches_and_the_first_even_when_too_big(log: PartitionLog) -> None:
    for _ in range(5):
        log.append_as_leader(batch(2, size=100), 0)
    one = len(batch(2, size=100))
    assert log.read(0, 10).size == one
    assert log.read(0, 10, min_one_batch=False).slices == []
    assert log.read(0, one * 2 + 5).size == 2 * one
    result = log.read(3, 1 << 20)
    assert result.first_offset == 2 and offsets_in(log.read_bytes(3, 1 << 20))[0] == 2
    assert result.next_offset == 10 and log.read(0, one).next_offset == 2


def test_reads_stop_below_the_upper_bound(log: PartitionLog) -> None:
    for _ in range(4):
        log.append_as_leader(batch(2), 0)
    assert offsets_in(log.read_bytes(0, 1 << 20, upper_bound=4)) == [0, 1, 2, 3]
    assert offsets_in(log.read_bytes(0, 1 << 20, upper_bound=5)) == [0, 1, 2, 3]
    assert log.read(4, 1 << 20, upper_bound=4).slices == []


def test_reading_at_the_log_end_is_empty_and_beyond_it_is_out_of_range(log: PartitionLog) -> None:
    log.append_as_leader(batch(), 0)
    assert log.read(1, 100).size == 0
    with pytest.raises(OffsetOutOfRange):
        log.read(2, 100)
    log.delete_records_before(1)
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 100)


def test_reads_span_segments_and_roll_at_segment_bytes(log: PartitionLog) -> None:
    for _ in range(30):
        log.append_as_leader(batch(1, size=100), 0)
    assert len(log.segments) > 3
    assert all(s.size <= SMALL.segment_bytes for s in log.segments)
    assert offsets_in(log.read_bytes(0, 1 << 20)) == list(range(30))
    names = sorted(os.listdir(log.directory))
    assert f"{log.segments[1].base_offset:020d}.log" in names
    assert f"{log.segments[1].base_offset:020d}.index" in names


def test_segments_roll_after_segment_ms(tmp_path: pathlib.Path) -> None:
    clock = Clock()
    log = PartitionLog.open(str(tmp_path / "t-0"), LogConfig(segment_ms=1000), clock=clock)
    log.append_as_leader(batch(), 0)
    clock.now += 1000
    log.append_as_leader(batch(), 0)
    assert [s.base_offset for s in log.segments] == [0, 1]


def test_read_slices_are_ready_for_sendfile(log: PartitionLog) -> None:
    for _ in range(20):
        log.append_as_leader(batch(1, size=100), 0)
    result = log.read(3, 1 << 20)
    a, b = socket.socketpair()
    with a, b:
        for piece in result.slices:
            sent = 0
            while sent < piece.size:
                sent += os.sendfile(a.fileno(), piece.fd, piece.position + sent, piece.size - sent)
        received = b""
        while len(received) < result.size:
            received += b.recv(1 << 16)
    assert offsets_in(received) == list(range(3, 20))


def test_truncation_cuts_at_a_batch_boundary_and_trims_the_epoch_cache(log: PartitionLog) -> None:
    log.append_as_leader(batch(3), 1)
    log.append_as_leader(batch(3), 2)
    log.append_as_leader(batch(3), 3)
    log.truncate_to(4)  # inside the second batch (3..5): the whole batch goes
    assert log.log_end_offset == 3
    assert log.epoch_cache.entries == [EpochEntry(1, 0)]
    assert offsets_in(log.read_bytes(0, 1 << 20)) == [0, 1, 2]
    log.append_as_leader(batch(1), 4)
    assert log.epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(4, 3)]


def test_truncation_across_segments_removes_later_segments(log: PartitionLog) -> None:
    for _ in range(30):
        log.append_as_leader(batch(1, size=100), 0)
    log.truncate_to(5)
    assert log.log_end_offset == 5
    assert len(log.segments) == 1
    log.append_as_leader(batch(1), 0)
    assert offsets_in(log.read_bytes(0, 1 << 20)) == list(range(6))


def test_follower_appends_keep_offsets_and_learn_epochs_from_the_batches(log: PartitionLog) -> None:
    log.append_as_follower(batch(2, base_offset=0, partition_leader_epoch=1))
    copied = batch(2, base_offset=2, partition_leader_epoch=1) + batch(2, base_offset=4, partition_leader_epoch=4)
    log.append_as_follower(copied)
    assert log.log_end_offset == 6
    assert log.epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(4, 4)]
    with pytest.raises(UnexpectedAppendOffset):
        log.append_as_follower(batch(1, base_offset=3, partition_leader_epoch=4))


def test_a_follower_far_behind_restarts_its_log_at_the_leader_start(log: PartitionLog) -> None:
    log.append_as_follower(batch(2, base_offset=0, partition_leader_epoch=1))
    log.truncate_fully_and_start_at(100)
    log.append_as_follower(batch(2, base_offset=100, partition_leader_epoch=3))
    assert (log.log_start_offset, log.log_end_offset) == (100, 102)
    assert log.segments[0].base_offset == 100
    assert log.epoch_cache.entries == [EpochEntry(3, 100)]


def test_delete_records_moves_the_log_start_and_drops_whole_segments(log: PartitionLog) -> None:
    for i in range(30):
        log.append_as_leader(batch(1, size=100), i // 10)
    log.high_watermark = 30
    log.delete_records_before(15)
    assert log.log_start_offset == 15
    assert log.segments[0].base_offset <= 15 < log.segments[0].next_offset
    assert log.epoch_cache.entries == [EpochEntry(1, 15), EpochEntry(2, 20)]


def test_high_watermark_is_clamped_to_the_log(log: PartitionLog) -> None:
    log.append_as_leader(batch(3), 0)
    log.high_watermark = 10
    assert log.high_watermark == 3
    log.high_watermark = -5
    assert log.high_watermark == 0


def test_retention_by_bytes_and_by_time_deletes_whole_segments_below_the_high_watermark(
    tmp_path: pathlib.Path,
) -> None:
    clock = Clock()
    config = LogConfig(segment_bytes=1024, retention_bytes=2048, retention_ms=-1)
    log = PartitionLog.open(str(tmp_path / "t-0"), config, clock=clock)
    for i in range(40):
        log.append_as_leader(batch(1, size=100, ts=1000 + i), 0)
    assert log.apply_retention(clock.now) == 0  # nothing below the high watermark yet
    log.high_watermark = log.log_end_offset
    assert log.apply_retention(clock.now) > 0
    assert log.size - log.segments[0].size < 2048
    assert log.log_start_offset == log.segments[0].base_offset
    log.config = LogConfig(segment_bytes=1024, retention_ms=10_000)
    clock.now = 1000 + 40 + 10_001
    log.apply_retention(clock.now)
    assert len(log.segments) == 1


def test_offset_for_timestamp_finds_the_first_record_at_or_after_it(log: PartitionLog) -> None:
    for i in range(20):
        log.append_as_leader(build_batch([(None, b"v" * 100, [], 1000 + 10 * i + j) for j in range(3)]), i // 5)
    assert log.offset_for_timestamp(1000) == (0, 1000, 0)
    assert log.offset_for_timestamp(1052) == (17, 1052, 1)
    assert log.offset_for_timestamp(1055) == (18, 1060, 1)
    assert log.offset_for_timestamp(5000) is None
    assert log.offset_for_timestamp(-2) == (0, -1, 0)
    assert log.offset_for_timestamp(-1) == (60, -1, 3)


def test_log_append_time_restamps_the_batch_with_a_valid_crc(tmp_path: pathlib.Path) -> None:
    clock = Clock(5_000_000)
    log = PartitionLog.open(str(tmp_path / "t-0"), LogConfig(message_timestamp_type="LogAppendTime"), clock=clock)
    info = log.append_as_leader(batch(2, compression=Compression.LZ4), 0)
    assert info.log_append_time == 5_000_000
    data = log.read_bytes(0, 1 << 20)
    assert [r.timestamp for _, h in iter_batches(data) for r in iter_records(data, 0, h)] == [5_000_000] * 2


def test_a_clean_reopen_restores_offsets_epochs_and_reads(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "t-0")
    log = PartitionLog.open(path, SMALL)
    for i in range(30):
        log.append_as_leader(batch(1, size=100, ts=i), i // 10)
    log.close()
    reopened = PartitionLog.open(path, SMALL, clean_shutdown=True, recovery_point=30)
    assert reopened.log_end_offset == 30
    assert reopened.epoch_cache.entries == [EpochEntry(0, 0), EpochEntry(1, 10), EpochEntry(2, 20)]
    assert offsets_in(reopened.read_bytes(0, 1 << 20)) == list(range(30))
    assert reopened.offset_for_timestamp(25) == (25, 25, 2)


def test_idempotent_producer_retries_are_recognised_as_duplicates(log: PartitionLog) -> None:
    state = log.producer_state
    assert state.check_and_update(7, 0, 0, 2).verdict is Verdict.OK
    log.append_as_leader(batch(3, producer_id=7, producer_epoch=0, base_sequence=0), 0)
    assert state.check_and_update(7, 0, 0, 2) == (Verdict.DUPLICATE, 0, 2, 1002)
    assert state.check_and_update(7, 0, 5, 6).verdict is Verdict.OUT_OF_ORDER_SEQUENCE
    assert state.check_and_update(7, 0, 3, 4).verdict is Verdict.OK
    assert state.check_and_update(8, 0, 3, 4).verdict is Verdict.OUT_OF_ORDER_SEQUENCE
    log.append_as_leader(batch(1, producer_id=7, producer_epoch=1, base_sequence=0), 0)
    assert state.check_and_update(7, 0, 3, 4).verdict is Verdict.INVALID_PRODUCER_EPOCH
    assert state.check_and_update(7, 2, 0, 0).verdict is Verdict.OK
    assert state.check_and_update(7, 2, 1, 1).verdict is Verdict.OUT_OF_ORDER_SEQUENCE


def test_producer_state_survives_a_clean_restart_and_a_crash(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "t-0")
    log = PartitionLog.open(path, SMALL)
    for seq in range(0, 30, 3):
        log.append_as_leader(batch(3, producer_id=9, producer_epoch=0, base_sequence=seq), 0)
    log.close()
    clean = PartitionLog.open(path, SMALL, clean_shutdown=True, recovery_point=30)
    assert clean.producer_state.check_and_update(9, 0, 27, 29).verdict is Verdict.DUPLICATE
    clean.append_as_leader(batch(3, producer_id=9, producer_epoch=0, base_sequence=30), 0)
    clean.close_without_flush()
    crashed = PartitionLog.open(path, SMALL)
    assert crashed.producer_state.check_and_update(9, 0, 30, 32) == (Verdict.DUPLICATE, 30, 32, 1002)
    crashed.truncate_to(30)
    assert crashed.producer_state.check_and_update(9, 0, 30, 32).verdict is Verdict.OK


def test_a_corrupt_producer_snapshot_is_skipped_and_the_state_rebuilt(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "t-0")
    log = PartitionLog.open(path, SMALL)
    log.append_as_leader(batch(3, producer_id=9, producer_epoch=0, base_sequence=0), 0)
    log.close()
    [snapshot] = [n for n in os.listdir(path) if n.endswith(".snapshot")]
    pathlib.Path(path, snapshot).write_bytes(b"\x00\x01garbage")
    reopened = PartitionLog.open(path, SMALL, clean_shutdown=True)
    assert reopened.producer_state.check_and_update(9, 0, 0, 2).verdict is Verdict.DUPLICATE


def test_log_manager_reopens_partitions_with_checkpointed_offsets(tmp_path: pathlib.Path) -> None:
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    manager = LogManager.open(dirs, SMALL)
    for topic, partition in [("orders", 0), ("orders", 1), ("my-topic-with-dashes", 3)]:
        log = manager.get_or_create_log(topic, partition)
        for _ in range(5):
            log.append_as_leader(batch(), 2)
        log.high_watermark = 4
        log.delete_records_before(1)
    manager.shutdown()
    assert all(os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE)) for d in dirs)
    reopened = LogManager.open(dirs, SMALL)
    assert set(reopened.logs) == {("orders", 0), ("orders", 1), ("my-topic-with-dashes", 3)}
    assert all(reopened.was_clean_shutdown.values())
    assert not any(os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE)) for d in dirs)
    log = reopened.get_log("my-topic-with-dashes", 3)
    assert log is not None
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (1, 4, 5)


def test_log_manager_deletes_by_rename_then_remove_and_finishes_after_a_crash(tmp_path: pathlib.Path) -> None:
    manager = LogManager.open([str(tmp_path)], SMALL)
    manager.get_or_create_log("gone", 0).append_as_leader(batch(), 0)
    manager.delete_log("gone", 0)
    assert manager.get_log("gone", 0) is None
    assert not [n for n in os.listdir(tmp_path) if n.startswith("gone")]
    # A crash between rename and remove leaves a -delete directory: the next start removes it.
    (tmp_path / "left-0.0123abcd-delete").mkdir()
    (tmp_path / "left-0.0123abcd-delete" / "00000000000000000000.log").write_bytes(b"x")
    again = LogManager.open([str(tmp_path)], SMALL)
    assert not (tmp_path / "left-0.0123abcd-delete").exists()
    assert again.logs == {}


def test_log_manager_treats_a_corrupt_offset_checkpoint_as_absent(tmp_path: pathlib.Path) -> None:
    manager = LogManager.open([str(tmp_path)], SMALL)
    log = manager.get_or_create_log("t", 0)
    log.append_as_leader(batch(3), 0)
    log.high_watermark = 3
    manager.shutdown()
    (tmp_path / HIGH_WATERMARK_FILE).write_bytes(b"\x00garbage")
    reopened = LogManager.open([str(tmp_path)], SMALL)
    log = reopened.get_log("t", 0)
    assert log is not None and log.high_watermark == 0 and log.log_end_offset == 3


def test_fsync_every_append_moves_the_recovery_point_each_time(tmp_path: pathlib.Path) -> None:
    log = PartitionLog.open(str(tmp_path / "t-0"), LogConfig(fsync_every_append=True))
    log.append_as_leader(batch(2), 0)
    assert log.recovery_point == 2
    lazy = PartitionLog.open(str(tmp_path / "t-1"), LogConfig(flush_interval_messages=3))
    lazy.append_as_leader(batch(2), 0)
    assert lazy.recovery_point == 0
    lazy.append_as_leader(batch(2), 0)
    assert lazy.recovery_point == 4


def test_the_offset_index_is_sparse_and_binary(log: PartitionLog) -> None:
    for _ in range(10):
        log.append_as_leader(batch(1, size=100), 0)
    raw = pathlib.Path(log.segments[0].index.path).read_bytes()
    entries = [struct.unpack_from(">ii", raw, i) for i in range(0, len(raw), 8)]
    assert entries[0] == (0, 0)
    assert 1 < len(entries) < 10
    assert all(a < b for a, b in itertools.pairwise(entries))


def test_truncating_at_or_past_the_log_end_still_drops_epochs_that_start_there(tmp_path: pathlib.Path) -> None:
    """Kafka's UnifiedLog.truncateTo: an epoch assigned at the log end by a leader that wrote nothing goes."""
    log = PartitionLog.open(str(tmp_path / "t-0"), LogConfig())
    log.append_as_leader(build_batch([(None, b"v", [], None)]), 3)
    log.epoch_cache.assign(7, log.log_end_offset)  # led in epoch 7 and appended nothing
    log.truncate_to(log.log_end_offset)
    assert (log.log_end_offset, log.latest_epoch) == (1, 3)
