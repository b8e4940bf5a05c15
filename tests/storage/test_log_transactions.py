"""Transactions (KIP-98) in the storage layer: the last stable offset, the aborted-transaction index (`.txnindex`,
Kafka's 34-byte entries), the producer-state rules for transactional writes and markers, their persistence across
clean and unclean restarts (snapshot version 2, version 1 still read), truncation, segment deletion, and
replication to a follower."""

from __future__ import annotations

import pathlib
import struct

import crc32c
import pytest

from epoch_broker.protocol.errors import ErrorCode, InvalidRecordError, KafkaStorageError
from epoch_broker.protocol.records import EndTxnMarker, build_batch, build_end_txn_marker
from epoch_broker.storage.fs import FaultyFileSystem
from epoch_broker.storage.log import LogConfig, PartitionLog
from epoch_broker.storage.producer_state import Verdict
from epoch_broker.storage.transaction_index import AbortedTxn

CONFIG = LogConfig(index_interval_bytes=128)  # segments roll only when a test calls roll()
A, B, C = 1001, 1002, 1003  # producer ids


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def data(pid: int = -1, seq: int = -1, n: int = 1, epoch: int = 0, txn: bool = True) -> bytearray:
    """A batch of ``n`` records; transactional from ``pid`` unless ``txn`` is False or ``pid`` is -1."""
    return build_batch([(b"k", b"v" * 10, [], 1000 + i) for i in range(n)], producer_id=pid,
                       producer_epoch=epoch if pid >= 0 else -1, base_sequence=seq, is_transactional=txn and pid >= 0)


def append(log: PartitionLog, buf: bytearray) -> int:
    return log.append_as_leader(buf, leader_epoch=0).first_offset


def end_txn(log: PartitionLog, pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> int:
    """The coordinator's marker, appended by the broker itself; returns its offset."""
    marker = build_end_txn_marker(pid, epoch, EndTxnMarker(commit, coordinator_epoch), 2000)
    return log.append_as_leader(marker, leader_epoch=0, from_client=False).first_offset


def txnindex(log: PartitionLog, base: int) -> pathlib.Path:
    return pathlib.Path(log.directory, f"{base:020d}.txnindex")


def entry_bytes(*entries: AbortedTxn) -> bytes:
    return b"".join(struct.pack(">hqqqq", 0, *e) for e in entries)


@pytest.fixture
def log(tmp_path: pathlib.Path) -> PartitionLog:
    return PartitionLog.open(str(tmp_path / "t-0"), CONFIG)


def reopen_clean(log: PartitionLog, high_watermark: int) -> PartitionLog:
    log.close()
    return PartitionLog.open(log.directory, CONFIG, clean_shutdown=True, recovery_point=log.log_end_offset,
                             high_watermark=high_watermark)


# --- last stable offset ------------------------------------------------------------------------------------------

def test_an_open_transaction_holds_the_lso_until_its_marker_is_below_the_high_watermark(log: PartitionLog) -> None:
    append(log, data())  # 0, not transactional
    assert append(log, data(A, seq=0, n=2)) == 1  # 1..2
    append(log, data())  # 3
    log.high_watermark = 0
    assert log.last_stable_offset == 0  # never above the high watermark
    log.high_watermark = 4
    assert log.last_stable_offset == 1  # the high watermark is above the open transaction: held at its start
    assert end_txn(log, A, commit=True) == 4
    assert log.last_stable_offset == 1  # committed, but the marker is not replicated yet
    log.high_watermark = 5
    assert log.last_stable_offset == log.high_watermark == 5


def test_overlapping_transactions_hold_the_lso_at_the_first_one_still_unstable(log: PartitionLog) -> None:
    append(log, data(A, seq=0))  # 0
    append(log, data(B, seq=0))  # 1
    assert end_txn(log, B, commit=True) == 2
    log.high_watermark = 3
    assert log.last_stable_offset == 0  # B is done, A is still open
    append(log, data(A, seq=1))  # 3
    assert end_txn(log, A, commit=True) == 4
    log.high_watermark = 4
    assert log.last_stable_offset == 0
    log.high_watermark = 5
    assert log.last_stable_offset == 5


# --- aborted-transaction index ---------------------------------------------------------------------------------

def test_an_abort_is_listed_for_fetch_ranges_overlapping_it_and_a_commit_never(log: PartitionLog) -> None:
    append(log, data())  # 0
    append(log, data(A, seq=0, n=2))  # 1..2
    append(log, data(B, seq=0))  # 3
    assert end_txn(log, A, commit=False) == 4
    assert end_txn(log, B, commit=True) == 5
    append(log, data())  # 6
    aborted = AbortedTxn(A, 1, 4, 3)  # the LSO once A was aborted: B's first offset, still open
    for start, end in [(0, 7), (0, 2), (2, 3), (3, 4), (4, 5)]:
        assert log.aborted_transactions(start, end) == [aborted], (start, end)
    assert log.aborted_transactions(0, 1) == []  # wholly before A's first offset
    assert log.aborted_transactions(5, 7) == []  # wholly after its marker (and B's commit is never listed)


def test_an_abort_with_no_data_is_indexed_at_the_markers_own_offset(log: PartitionLog) -> None:
    append(log, data(n=2))  # 0..1
    assert end_txn(log, C, commit=False) == 2
    assert log.aborted_transactions(0, 3) == [AbortedTxn(C, 2, 2, 3)]
    assert log.aborted_transactions(0, 2) == []
    assert log.last_stable_offset == log.high_watermark


# --- the .txnindex file ----------------------------------------------------------------------------------------

def test_the_txnindex_holds_kafkas_entries_only_in_the_marker_segment_and_survives_a_clean_reopen(
    log: PartitionLog,
) -> None:
    append(log, data(A, seq=0))  # 0
    log.roll()
    append(log, data(B, seq=0))  # 1
    assert end_txn(log, A, commit=False) == 2
    append(log, data())  # 3
    expected = entry_bytes(AbortedTxn(A, 0, 2, 1))
    assert expected == bytes.fromhex("0000" "00000000000003e9" "0000000000000000" "0000000000000002"
                                     "0000000000000001")
    assert txnindex(log, 1).read_bytes() == expected
    assert not txnindex(log, 0).exists()
    reopened = reopen_clean(log, high_watermark=4)
    assert reopened.aborted_transactions(0, 4) == [AbortedTxn(A, 0, 2, 1)]
    assert txnindex(reopened, 1).read_bytes() == expected and not txnindex(reopened, 0).exists()
    assert reopened.last_stable_offset == 1  # B is still open


def test_truncating_below_an_abort_marker_drops_its_entry_and_reopens_the_transaction(log: PartitionLog) -> None:
    append(log, data())  # 0
    append(log, data(A, seq=0))  # 1
    assert end_txn(log, A, commit=False) == 2
    append(log, data())  # 3
    log.high_watermark = 4
    assert (log.last_stable_offset, log.aborted_transactions(0, 4)) == (4, [AbortedTxn(A, 1, 2, 3)])
    log.truncate_to(2)
    assert log.aborted_transactions(0, 2) == []
    assert not txnindex(log, 0).exists() or txnindex(log, 0).stat().st_size == 0
    assert log.producer_state.open_txns == {A: 1}
    assert log.last_stable_offset == 1 and log.high_watermark == 2
    assert log.producer_state.check_and_update(A, 0, 1, 1, transactional=False).verdict is Verdict.INVALID_TXN_STATE
    assert end_txn(log, A, commit=False) == 2  # the new leader's marker ends it again
    assert txnindex(log, 0).read_bytes() == entry_bytes(AbortedTxn(A, 1, 2, 3))


def test_segments_deleted_by_delete_records_or_retention_take_their_txnindex_with_them(
    tmp_path: pathlib.Path,
) -> None:
    clock = Clock()
    log = PartitionLog.open(str(tmp_path / "t-0"), CONFIG, clock=clock)
    append(log, data(A, seq=0))  # 0
    end_txn(log, A, commit=False)  # 1
    log.roll()
    append(log, data(B, seq=0))  # 2
    end_txn(log, B, commit=False)  # 3
    log.roll()
    append(log, data())  # 4
    log.high_watermark = 5
    assert txnindex(log, 0).exists() and txnindex(log, 2).exists()
    log.delete_records_before(2)
    assert not txnindex(log, 0).exists() and txnindex(log, 2).exists()
    assert log.aborted_transactions(2, 5) == [AbortedTxn(B, 2, 3, 4)]
    log.config = LogConfig(retention_bytes=0, retention_ms=-1)
    assert log.apply_retention(clock.now) == 1
    assert not txnindex(log, 2).exists() and [s.base_offset for s in log.segments] == [4]
    assert log.aborted_transactions(4, 5) == []


# --- producer-state rules --------------------------------------------------------------------------------------

def test_a_producer_in_a_transaction_may_not_write_outside_it_and_stale_markers_are_refused(
    log: PartitionLog,
) -> None:
    state = log.producer_state
    append(log, data(A, seq=0, epoch=2))
    assert state.check_and_update(A, 2, 1, 1, transactional=False).verdict is Verdict.INVALID_TXN_STATE
    assert state.check_and_update(A, 2, 1, 1, transactional=True).verdict is Verdict.OK
    end_txn(log, A, commit=True, epoch=2, coordinator_epoch=5)
    assert state.check_and_update(A, 2, 1, 1, transactional=False).verdict is Verdict.OK  # the transaction ended
    assert state.check_marker(A, 2, 4) is Verdict.COORDINATOR_FENCED  # older coordinator than the last marker's
    assert state.check_marker(A, 1, 5) is Verdict.INVALID_PRODUCER_EPOCH  # older producer epoch
    assert state.check_marker(A, 2, 5) is Verdict.OK and state.check_marker(A, 3, 6) is Verdict.OK
    assert state.check_marker(C, 0, 0) is Verdict.OK  # unknown producer


def test_a_batch_without_sequence_from_a_known_producer_is_judged_only_by_its_epoch(log: PartitionLog) -> None:
    state = log.producer_state
    append(log, data(A, seq=0, n=3, epoch=3, txn=False))
    assert state.check_and_update(A, 3, 10, 10).verdict is Verdict.OUT_OF_ORDER_SEQUENCE  # with a sequence: judged
    assert state.check_and_update(A, 3, -1, -1).verdict is Verdict.OK
    assert state.check_and_update(A, 4, -1, -1).verdict is Verdict.OK
    assert state.check_and_update(A, 2, -1, -1).verdict is Verdict.INVALID_PRODUCER_EPOCH


# --- persistence -----------------------------------------------------------------------------------------------

def test_an_open_transaction_survives_a_clean_close_in_a_version_2_snapshot(log: PartitionLog) -> None:
    append(log, data())  # 0
    append(log, data(A, seq=0, epoch=1))  # 1
    append(log, data())  # 2
    log.high_watermark = 3
    assert log.last_stable_offset == 1
    log.close()
    raw = pathlib.Path(log.directory, f"{3:020d}.snapshot").read_bytes()
    version, crc, count = struct.unpack_from(">hIi", raw)
    assert (version, crc, count) == (2, crc32c.crc32c(raw[6:]), 1)
    assert struct.unpack_from(">qhbiq", raw, 10) == (A, 1, 1, -1, 1)  # id, epoch, batches, coordinator, txn first
    reopened = PartitionLog.open(log.directory, CONFIG, clean_shutdown=True, recovery_point=3, high_watermark=3)
    assert reopened.producer_state.open_txns == {A: 1}
    assert reopened.last_stable_offset == 1
    assert end_txn(reopened, A, commit=False, epoch=1) == 3
    assert reopened.aborted_transactions(0, 4) == [AbortedTxn(A, 1, 3, 4)]


@pytest.mark.parametrize("corrupt_marker", [False, True])
def test_a_crash_replays_the_recovered_segments_even_past_a_newer_producer_snapshot(
    log: PartitionLog, corrupt_marker: bool
) -> None:
    append(log, data(A, seq=0))  # 0
    append(log, data(B, seq=0))  # 1
    log.roll()  # snapshot at 2: A and B open
    append(log, data())  # 2
    assert end_txn(log, A, commit=False) == 3
    log.roll()  # snapshot at 4: A aborted, B open
    append(log, data())  # 4
    assert sorted(log.producer_state.snapshot_offsets()) == [2, 4]
    assert log.recovery_point == 0  # nothing flushed: the snapshots are newer than the recovery point
    log.close_without_flush()
    if corrupt_marker:  # the marker's bytes never made it whole: recovery cuts segment 2 there
        segment = pathlib.Path(log.directory, f"{2:020d}.log")
        raw = bytearray(segment.read_bytes())
        raw[-3] ^= 0xFF
        segment.write_bytes(raw)
    crashed = PartitionLog.open(log.directory, CONFIG, clean_shutdown=False, recovery_point=0, high_watermark=5)
    if corrupt_marker:
        assert crashed.log_end_offset == 3
        assert crashed.producer_state.open_txns == {A: 0, B: 1}
        assert crashed.aborted_transactions(0, 3) == [] and txnindex(crashed, 2).read_bytes() == b""
        assert crashed.last_stable_offset == 0
    else:
        assert crashed.log_end_offset == 5
        assert crashed.producer_state.open_txns == {B: 1}
        assert crashed.aborted_transactions(0, 5) == [AbortedTxn(A, 0, 3, 1)]
        assert txnindex(crashed, 2).read_bytes() == entry_bytes(AbortedTxn(A, 0, 3, 1))  # rebuilt once, not twice
        assert crashed.last_stable_offset == 1


def test_a_version_1_snapshot_is_still_loaded_with_no_open_transaction(log: PartitionLog) -> None:
    append(log, data(A, seq=0, n=3, epoch=1, txn=False))  # 0..2
    log.close()
    body = struct.pack(">i", 2)
    body += struct.pack(">qhb", A, 1, 1) + struct.pack(">iiqq", 0, 2, 2, 1002)
    body += struct.pack(">qhb", C, 4, 1) + struct.pack(">iiqq", 7, 8, 1, 55)  # known only to the snapshot
    pathlib.Path(log.directory, f"{3:020d}.snapshot").write_bytes(struct.pack(">hI", 1, crc32c.crc32c(body)) + body)
    reopened = PartitionLog.open(log.directory, CONFIG, clean_shutdown=True, recovery_point=3, high_watermark=3)
    state = reopened.producer_state
    assert state.check_and_update(A, 1, 0, 2) == (Verdict.DUPLICATE, 0, 2, 1002)
    assert state.check_and_update(C, 4, 7, 8) == (Verdict.DUPLICATE, 0, 1, 55)
    assert state.check_and_update(C, 4, 9, 9).verdict is Verdict.OK
    assert (state.producers[C].coordinator_epoch, state.producers[C].txn_first_offset) == (-1, -1)
    assert state.open_txns == {} and reopened.last_stable_offset == 3


# --- replication and the client/broker boundary ----------------------------------------------------------------

def test_a_follower_copying_the_leaders_batches_gets_the_same_aborted_index_and_lso(tmp_path: pathlib.Path) -> None:
    leader = PartitionLog.open(str(tmp_path / "leader" / "t-0"), CONFIG)
    append(leader, data())  # 0
    append(leader, data(A, seq=0, n=2))  # 1..2
    append(leader, data(B, seq=0))  # 3
    end_txn(leader, A, commit=False)  # 4
    end_txn(leader, C, commit=False)  # 5: an abort with no data
    append(leader, data(B, seq=1))  # 6
    leader.flush()
    copied = bytearray(pathlib.Path(leader.segments[0].log_path).read_bytes())
    follower = PartitionLog.open(str(tmp_path / "follower" / "t-0"), CONFIG)
    follower.append_as_follower(copied)
    leader.high_watermark = follower.high_watermark = 7
    expected = [AbortedTxn(A, 1, 4, 3), AbortedTxn(C, 5, 5, 3)]
    assert leader.aborted_transactions(0, 7) == follower.aborted_transactions(0, 7) == expected
    assert txnindex(follower, 0).read_bytes() == txnindex(leader, 0).read_bytes() == entry_bytes(*expected)
    assert follower.last_stable_offset == leader.last_stable_offset == 3  # B is still open on both
    assert follower.producer_state.open_txns == {B: 3}


def test_only_the_broker_may_append_a_transaction_marker(log: PartitionLog) -> None:
    append(log, data(A, seq=0))
    marker = build_end_txn_marker(A, 0, EndTxnMarker(commit=False, coordinator_epoch=0), 2000)
    with pytest.raises(InvalidRecordError) as refused:
        log.append_as_leader(bytearray(marker), leader_epoch=0)  # from_client defaults to True
    assert refused.value.code is ErrorCode.INVALID_RECORD
    assert log.log_end_offset == 1 and log.producer_state.open_txns == {A: 0}
    assert log.append_as_leader(marker, leader_epoch=0, from_client=False).first_offset == 1
    assert log.producer_state.open_txns == {} and log.aborted_transactions(0, 2) == [AbortedTxn(A, 0, 1, 2)]


# --- failures: all or nothing, and durable ----------------------------------------------------------------------

def test_a_full_disk_while_indexing_an_abort_never_exposes_the_aborted_records(tmp_path: pathlib.Path) -> None:
    fs = FaultyFileSystem()
    log = PartitionLog.open(str(tmp_path / "t-0"), CONFIG, fs)
    append(log, data(A, seq=0))  # 0
    marker = build_end_txn_marker(A, 0, EndTxnMarker(commit=False, coordinator_epoch=0), 2000)
    fs.space_left = len(marker)  # the marker fits in the segment, the 34-byte index entry does not
    with pytest.raises((OSError, KafkaStorageError)) as failed:
        log.append_as_leader(marker, leader_epoch=0, from_client=False)
    fs.space_left = None
    log.high_watermark = log.log_end_offset
    indexed = log.aborted_transactions(0, log.log_end_offset) == [AbortedTxn(A, 0, 1, 2)]
    undone = log.log_end_offset == 1 and log.producer_state.open_txns == {A: 0}
    assert indexed or undone, "offset 0 (aborted) is below the LSO with no aborted-transaction entry"
    assert isinstance(failed.value, KafkaStorageError)


def test_aborted_entries_rebuilt_by_a_recovery_are_durable_once_flushed(tmp_path: pathlib.Path) -> None:
    fs = FaultyFileSystem()
    path = str(tmp_path / "t-0")
    log = PartitionLog.open(path, CONFIG, fs)
    append(log, data(A, seq=0))  # 0
    end_txn(log, A, commit=False)  # 1
    log.roll()
    append(log, data())  # 2
    log.close_without_flush()  # the process is killed: the page cache survives
    log = PartitionLog.open(path, CONFIG, fs, recovery_point=0)
    assert log.aborted_transactions(0, 3) == [AbortedTxn(A, 0, 1, 2)]
    log.roll()  # snapshot at 3
    append(log, data())  # 3
    log.flush()  # everything is durable up to here
    recovery_point = log.recovery_point
    log.close_without_flush()
    fs.crash()  # power loss: only what was fsynced survives
    again = PartitionLog.open(path, CONFIG, fs, recovery_point=recovery_point, high_watermark=4)
    assert again.aborted_transactions(0, 4) == [AbortedTxn(A, 0, 1, 2)]
