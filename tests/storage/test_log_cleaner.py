"""The log cleaner (storage.log_cleaner) on PartitionLog and LogManager directly: what survives a cleaning, what
it never touches, tombstones, transactions, crashes in the middle of a swap, truncation after a cleaning, the
dirty ratio and the cleaner checkpoint."""

from __future__ import annotations

import itertools
import os
import pathlib
from typing import NamedTuple

import pytest

from epoch_broker.protocol.records import (
    BatchHeader,
    Compression,
    EndTxnMarker,
    build_batch,
    build_end_txn_marker,
    iter_batches,
    iter_records,
    validate_batch,
)
from epoch_broker.storage import log_cleaner
from epoch_broker.storage.fs import FaultyFileSystem, SimulatedCrash
from epoch_broker.storage.leader_epoch import FILE_NAME as EPOCH_FILE
from epoch_broker.storage.log import LogConfig, PartitionLog
from epoch_broker.storage.log_manager import CLEANER_OFFSET_FILE, LogManager
from epoch_broker.storage.transaction_index import AbortedTxn

COMPACT = LogConfig(segment_bytes=16384, index_interval_bytes=512, cleanup_policy=frozenset({"compact"}))
CODECS = [Compression.NONE, Compression.GZIP, Compression.LZ4, Compression.ZSTD, Compression.SNAPPY]
PRODUCER = 77


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class Written(NamedTuple):
    key: bytes | None
    value: bytes | None
    timestamp: int


class Updates:
    """Writes updates of `keys` keys in batches of 1-4 records, codecs in turn, the leader epoch rising every
    2500 records, and remembers every record and batch header as appended."""

    def __init__(self, log: PartitionLog, keys: int = 100) -> None:
        self.log, self.keys = log, keys
        self.records: dict[int, Written] = {}
        self.headers: dict[int, BatchHeader] = {}
        self.count = 0

    def write(self, n: int) -> None:
        end = self.count + n
        while self.count < end:
            i = self.count
            size = min(1 + len(self.headers) % 4, end - i)
            batch = [(b"key-%d" % ((i + j) * 7 % self.keys), b"value-%d" % (i + j), [], 1000 + i + j)
                     for j in range(size)]
            buf = build_batch(batch, compression=CODECS[len(self.headers) % len(CODECS)], producer_id=PRODUCER,
                              producer_epoch=0, base_sequence=i)
            info = self.log.append_as_leader(buf, leader_epoch=i // 2500)
            self.headers[info.first_offset] = next(iter_batches(buf))[1]
            for j, (key, value, _, timestamp) in enumerate(batch):
                self.records[info.first_offset + j] = Written(key, value, timestamp)
            self.count += size

    def latest_below(self, offset: int) -> dict[bytes, int]:
        """Key -> offset of its latest record below `offset`."""
        latest: dict[bytes, int] = {}
        for at in sorted(o for o in self.records if o < offset):
            key = self.records[at].key
            assert key is not None
            latest[key] = at
        return latest


def batches(log: PartitionLog) -> list[tuple[BatchHeader, list[Written], list[int]]]:
    """Every batch from the log start: header, records, their offsets; CRCs checked."""
    data = log.read_bytes(log.log_start_offset, 1 << 40)
    out = []
    for pos, header in iter_batches(data):
        validate_batch(data, pos, header)
        records = list(iter_records(data, pos, header))
        out.append((header, [Written(r.key, r.value, r.timestamp) for r in records], [r.offset for r in records]))
    return out


def records(log: PartitionLog) -> dict[int, Written]:
    """Offset -> record, from the log start."""
    return {offset: record for _, written, offsets in batches(log)
            for record, offset in zip(written, offsets, strict=True)}


def epoch_answers(log: PartitionLog) -> list[tuple[int, int]]:
    return [log.end_offset_for_epoch(epoch) for epoch in range(-1, 6)]


def compacted_log(tmp_path: pathlib.Path, updates: int = 10_000, fs: FaultyFileSystem | None = None
                  ) -> tuple[PartitionLog, Updates]:
    log = PartitionLog.open(str(tmp_path / "t-0"), COMPACT, fs)
    written = Updates(log)
    written.write(updates)
    log.high_watermark = log.log_end_offset
    return log, written


def test_ten_thousand_updates_over_a_hundred_keys_leave_the_latest_of_each_key_at_its_offset(
        tmp_path: pathlib.Path) -> None:
    log, written = compacted_log(tmp_path)
    size, epochs, end = log.size, epoch_answers(log), log.log_end_offset
    stats = log_cleaner.clean(log)
    assert stats is not None and stats.records_removed > 8000 and log.size < size // 5
    active = log.active_segment.base_offset
    bases = {segment.base_offset for segment in log.segments}
    for header, _, _ in batches(log):
        appended = written.headers[header.base_offset]  # every batch starts where it did
        kept = ("last_offset_delta", "partition_leader_epoch", "producer_id", "producer_epoch", "base_sequence",
                "base_timestamp", "max_timestamp", "timestamp_type", "is_transactional")
        assert [getattr(header, f) for f in kept] == [getattr(appended, f) for f in kept]
        if header.records_count:
            assert header.compression == appended.compression
        else:  # an emptied last batch keeps its segment ending where it did
            assert header.next_offset in bases
    found = records(log)
    assert all(written.records[offset] == record for offset, record in found.items())
    expected = set(written.latest_below(active).values()) | {o for o in written.records if o >= active}
    assert set(found) == expected
    assert len([o for o in found if o < active]) == 100
    assert epoch_answers(log) == epochs and log.log_end_offset == end
    # the next pass merges the small cleaned segments, and changes nothing else
    log_cleaner.clean(log)
    assert len(log.segments) <= 3 and records(log) == found


def test_a_tombstone_stays_for_delete_retention_ms_after_its_timestamp_then_goes(tmp_path: pathlib.Path) -> None:
    clock = Clock()
    config = LogConfig(cleanup_policy=frozenset({"compact"}), delete_retention_ms=60_000)
    log = PartitionLog.open(str(tmp_path / "t-0"), config, clock=clock)
    for key, value in [(b"a", b"1"), (b"b", b"1"), (b"a", None), (b"b", b"2")]:
        log.append_as_leader(build_batch([(key, value, [], clock.now)]), leader_epoch=0)
    log.roll()
    log.append_as_leader(build_batch([(b"c", b"1", [], clock.now)]), leader_epoch=0)
    log.high_watermark = log.log_end_offset

    clock.now += 60_000
    cleaning = log_cleaner.plan(log)
    assert cleaning is not None
    cleaning.run()
    assert cleaning.swap() is not None and cleaning.tombstones_expire_ms == 1_060_000
    assert records(log) == {2: Written(b"a", None, 1_000_000), 3: Written(b"b", b"2", 1_000_000),
                            4: Written(b"c", b"1", 1_000_000)}
    clock.now += 1
    log_cleaner.clean(log)
    assert sorted(records(log)) == [3, 4]


def test_aborted_records_go_markers_stay_and_committed_records_compact_like_any(tmp_path: pathlib.Path) -> None:
    log = PartitionLog.open(str(tmp_path / "t-0"), COMPACT)
    committer, aborter = 1001, 1002

    def data(pid: int, key: bytes, value: bytes) -> int:
        buf = build_batch([(key, value, [], 1000)], producer_id=pid, producer_epoch=0, base_sequence=0,
                          is_transactional=True)
        return log.append_as_leader(buf, leader_epoch=0).first_offset

    def marker(pid: int, commit: bool) -> int:
        buf = build_end_txn_marker(pid, 0, EndTxnMarker(commit, 0), 2000)
        return log.append_as_leader(buf, leader_epoch=0, from_client=False).first_offset

    committed = data(committer, b"c", b"committed")  # 0
    data(aborter, b"c", b"aborted")  # 1: later than the committed value, but never the key's latest
    data(aborter, b"x", b"aborted")  # 2
    data(committer, b"y", b"old")  # 3
    markers = [marker(committer, True), marker(aborter, False)]  # 4, 5
    newer_y = log.append_as_leader(build_batch([(b"y", b"new", [], 1000)]), leader_epoch=0).first_offset  # 6
    log.roll()
    log.append_as_leader(build_batch([(b"z", b"1", [], 1000)]), leader_epoch=0)
    log.high_watermark = log.log_end_offset

    log_cleaner.clean(log)
    found = batches(log)
    assert [h.base_offset for h, _, _ in found if h.is_control] == markers
    kept = {offset: record.value for header, written, offsets in found if not header.is_control
            for record, offset in zip(written, offsets, strict=True)}
    assert kept == {committed: b"committed", newer_y: b"new", newer_y + 1: b"1"}
    # the abort's entry stays in the .txnindex: harmless, its records are gone
    assert log.aborted_transactions(0, log.log_end_offset) == [AbortedTxn(aborter, 1, 5, 6)]


def files_from(log: PartitionLog, offset: int) -> dict[int, bytes]:
    """Base offset -> ``.log`` bytes of the segments from the one holding `offset` on."""
    holding = max(s.base_offset for s in log.segments if s.base_offset <= offset)
    return {s.base_offset: pathlib.Path(s.log_path).read_bytes() for s in log.segments if s.base_offset >= holding}


def test_nothing_from_the_last_stable_offset_on_nor_the_active_segment_is_touched(tmp_path: pathlib.Path) -> None:
    log, written = compacted_log(tmp_path, 3000)
    in_flight = build_batch([(b"key-1", b"in flight", [], 5000)], producer_id=PRODUCER + 1, producer_epoch=0,
                            base_sequence=0, is_transactional=True)
    open_txn = log.append_as_leader(in_flight, leader_epoch=1).first_offset
    written.write(3000)
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == open_txn
    untouched, size = files_from(log, open_txn), log.size
    log_cleaner.clean(log)
    assert files_from(log, open_txn) == untouched and log.size < size

    # and nothing above the high watermark either
    log, _ = compacted_log(tmp_path / "hw", 3000)
    log.high_watermark = log.segments[3].base_offset + 1
    untouched, size = files_from(log, log.high_watermark), log.size
    log_cleaner.clean(log)
    assert files_from(log, log.high_watermark) == untouched and log.size < size


class CrashingFileSystem(FaultyFileSystem):
    """Dies (SimulatedCrash) just before or just after renaming a ``.log.cleaned`` over its segment."""

    def __init__(self) -> None:
        super().__init__()
        self.crash_at: str | None = None  # "before" or "after" the commit of the next swap

    def rename(self, src: str, dst: str) -> None:
        when, self.crash_at = (self.crash_at, None) if src.endswith(".log.cleaned") else (None, self.crash_at)
        if when == "before":
            raise SimulatedCrash("before the rename")
        super().rename(src, dst)
        if when == "after":
            raise SimulatedCrash("after the rename")


def crash_and_reopen(log: PartitionLog, fs: FaultyFileSystem) -> PartitionLog:
    recovery_point, high_watermark = log.recovery_point, log.high_watermark
    log.close_without_flush()
    fs.crash()
    return PartitionLog.open(log.directory, log.config, fs, recovery_point=recovery_point,
                             high_watermark=high_watermark)


def cleaned_files(log: PartitionLog) -> list[str]:
    return [name for name in os.listdir(log.directory) if name.endswith(".cleaned")]


def test_a_crash_before_the_swap_renames_the_cleaned_file_leaves_the_old_segments(tmp_path: pathlib.Path) -> None:
    fs = CrashingFileSystem()
    log, _ = compacted_log(tmp_path, 3000, fs)
    log.flush()
    before = batches(log)
    fs.crash_at = "before"
    with pytest.raises(SimulatedCrash):
        log_cleaner.clean(log)
    assert cleaned_files(log)
    reopened = crash_and_reopen(log, fs)
    assert not cleaned_files(reopened)
    assert batches(reopened) == before
    assert reopened.segments[0].index.entries > 0  # the indexes the swap had deleted are rebuilt
    for offset in range(0, reopened.log_end_offset, 97):
        assert reopened.read(offset, 1).first_offset <= offset < reopened.read(offset, 1).next_offset


def test_a_crash_right_after_the_swap_commits_reopens_with_rebuilt_indexes_and_no_merged_leftovers(
        tmp_path: pathlib.Path) -> None:
    fs = CrashingFileSystem()
    log, written = compacted_log(tmp_path, 3000, fs)
    log_cleaner.clean(log)  # many small segments, which the next cleaning merges
    written.write(1000)
    log.high_watermark = log.log_end_offset
    log.flush()
    end = log.log_end_offset
    fs.crash_at = "after"
    with pytest.raises(SimulatedCrash):
        log_cleaner.clean(log)
    segment_files = len([name for name in os.listdir(log.directory) if name.endswith(".log")])
    reopened = crash_and_reopen(log, fs)
    assert not cleaned_files(reopened) and len(reopened.segments) < segment_files
    for segment, following in itertools.pairwise(reopened.segments):
        assert segment.index.entries > 0 and segment.next_offset == following.base_offset
    found = records(reopened)
    assert all(written.records[offset] == record for offset, record in found.items())
    assert set(written.latest_below(end).values()) <= set(found)
    assert reopened.log_end_offset == end
    for offset in range(0, end, 97):
        assert reopened.read(offset, 1).first_offset >= 0


def test_a_cleaned_log_survives_a_full_rescan(tmp_path: pathlib.Path) -> None:
    """Cleaned segments end where the replaced ones did: recovery sees no gap between segments."""
    log, _ = compacted_log(tmp_path, 3000)
    log_cleaner.clean(log)
    before, end = batches(log), log.log_end_offset
    log.close_without_flush()
    os.remove(os.path.join(log.directory, EPOCH_FILE))
    reopened = PartitionLog.open(log.directory, COMPACT)
    assert batches(reopened) == before and reopened.log_end_offset == end


def test_a_follower_truncating_into_a_removed_gap_cuts_at_a_batch_boundary(tmp_path: pathlib.Path) -> None:
    log, _ = compacted_log(tmp_path, 6000)
    epochs = epoch_answers(log)
    log_cleaner.clean(log)
    assert epoch_answers(log) == epochs
    headers = [header for header, _, _ in batches(log)]
    before, after = next((a, b) for a, b in itertools.pairwise(headers) if b.base_offset - a.next_offset >= 2)
    inside = before.next_offset + 1
    log.truncate_to(inside)
    assert log.log_end_offset == before.next_offset
    assert [h for h, _, _ in batches(log)] == [h for h in headers if h.base_offset <= before.base_offset]
    assert log.epoch_cache.entries[-1].start_offset < log.log_end_offset
    # the leader's batches follow from there
    leader_batch = build_batch([(b"key-1", b"from the leader", [], 9000)], base_offset=after.base_offset,
                               partition_leader_epoch=after.partition_leader_epoch)
    log.append_as_follower(leader_batch)
    assert records(log)[after.base_offset] == Written(b"key-1", b"from the leader", 9000)


def test_a_cleaning_planned_before_a_truncation_or_a_deletion_is_not_swapped_in(tmp_path: pathlib.Path) -> None:
    log, _ = compacted_log(tmp_path, 3000)
    before = batches(log)
    cleaning = log_cleaner.plan(log)
    assert cleaning is not None
    cleaning.run()
    log.truncate_to(log.log_end_offset - 1)
    assert cleaning.swap() is None and not cleaned_files(log)
    assert batches(log) == before[:-1]

    cleaning = log_cleaner.plan(log)
    assert cleaning is not None and len(cleaning.groups) > 2
    cleaning.run()
    second = cleaning.groups[1][0].base_offset
    log.delete_records_before(second)  # the first group's segments go; the others are swapped in
    size = log.size
    assert cleaning.swap() is not None and not cleaned_files(log)
    assert log.segments[0].base_offset == second and log.size < size



def test_an_aborted_cleaning_leaves_no_file(tmp_path: pathlib.Path) -> None:
    log, _ = compacted_log(tmp_path, 3000)
    cleaning = log_cleaner.plan(log)
    assert cleaning is not None
    cleaning.abort()
    cleaning.run()
    assert isinstance(cleaning.error, log_cleaner.CleaningAborted) and not cleaned_files(log)
    assert cleaning.swap() is None


def test_the_throttler_holds_to_the_rate() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    throttler = log_cleaner.Throttler(1000, sleep, lambda: now[0])
    throttler.throttle(500)
    now[0] += 0.2
    throttler.throttle(500)
    assert slept == [0.5, pytest.approx(0.3)]


def test_retention_never_deletes_a_compact_only_log_and_does_with_compact_delete(tmp_path: pathlib.Path) -> None:
    for policy, kept in ((frozenset({"compact"}), True), (frozenset({"compact", "delete"}), False)):
        config = LogConfig(segment_bytes=1024, retention_ms=1, cleanup_policy=policy)
        log = PartitionLog.open(str(tmp_path / "-".join(sorted(policy))), config)
        for i in range(20):
            log.append_as_leader(build_batch([(b"k", b"v" * 100, [], 1000 + i)]), leader_epoch=0)
        log.high_watermark = log.log_end_offset
        segments = len(log.segments)
        log.apply_retention(10**12)
        assert (len(log.segments) == segments) is kept


def test_the_manager_cleans_by_dirty_ratio_keeps_the_first_dirty_offset_and_returns_for_tombstones(
        tmp_path: pathlib.Path) -> None:
    clock = Clock()
    config = LogConfig(segment_bytes=16384, cleanup_policy=frozenset({"compact"}), delete_retention_ms=1000,
                       min_cleanable_dirty_ratio=0.9)
    manager = LogManager.open([str(tmp_path)], config, clock=clock)
    log = manager.get_or_create_log("t", 0)
    written = Updates(log)
    written.write(3000)
    log.append_as_leader(build_batch([(b"gone", None, [], clock.now)]), leader_epoch=0)
    written.write(1000)
    log.high_watermark = log.log_end_offset
    assert [tp for tp, _ in manager.cleanings()] == [("t", 0)]  # all dirty
    [stats] = manager.clean_now()
    first_dirty = log.first_dirty_offset
    assert stats.records_removed > 0 and first_dirty == log.active_segment.base_offset
    assert list(manager.cleanings()) == []  # nothing dirty, the tombstone not expired

    written.write(200)  # a little dirt: below min.cleanable.dirty.ratio
    log.roll()
    log.high_watermark = log.log_end_offset
    assert list(manager.cleanings()) == []
    clock.now += 1001  # the tombstone expired: cleaned again
    [(tp, cleaning)] = manager.cleanings()
    cleaning.run()
    assert manager.finish_cleaning(tp, cleaning) is not None
    assert b"gone" not in {r.key for r in records(log).values()}

    manager.shutdown()
    assert (tmp_path / CLEANER_OFFSET_FILE).read_text() == f"0\n1\nt 0 {log.first_dirty_offset}\n"
    reopened = LogManager.open([str(tmp_path)], config, clock=clock)
    assert reopened.logs[("t", 0)].first_dirty_offset == log.first_dirty_offset > first_dirty
