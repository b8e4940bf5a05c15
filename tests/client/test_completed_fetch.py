"""Which batches of a Fetch answer a consumer returns, by isolation level (client/completed_fetch.py): plain
bytes built with protocol/records.py, no socket. A log is written as a line of batches:

    "t1:0-1" a transactional batch of producer 1 at offsets 0..1; "d:4" a plain batch; "i1:4" an idempotent,
    non-transactional batch of producer 1; "C1:2" / "A1:2" producer 1's commit / abort marker at offset 2;
    "@3" after any of them: in leader epoch 3 (else 5)
"""

from __future__ import annotations

import struct

import pytest

from epoch_broker.client.completed_fetch import READ_COMMITTED, READ_UNCOMMITTED, fetched_batches
from epoch_broker.protocol.errors import CorruptRecordError
from epoch_broker.protocol.records import EndTxnMarker, build_batch, build_end_txn_marker, stamp


def batch(spec: str) -> bytearray:
    spec, _, in_epoch = spec.partition("@")
    epoch = int(in_epoch or 5)
    kind, _, offsets = spec.partition(":")
    first, _, last = offsets.partition("-")
    base, count = int(first), int(last or first) - int(first) + 1
    producer = int(kind[1:]) if len(kind) > 1 else -1
    if kind[0] in "CA":
        data = build_end_txn_marker(producer, 0, EndTxnMarker(kind[0] == "C", 3), 1_700_000_000_000)
        stamp(data, 0, base, epoch)
        return data
    records = [(None, f"v{base + i}".encode(), (), 1_700_000_000_000) for i in range(count)]
    return build_batch(records, base_offset=base, partition_leader_epoch=epoch, producer_id=producer,
                       producer_epoch=0 if producer >= 0 else -1, base_sequence=0 if producer >= 0 else -1,
                       is_transactional=kind[0] == "t")


def log_of(line: str) -> bytes:
    return b"".join(bytes(batch(spec)) for spec in line.split())


def visible(line: str, isolation: int, aborted: list[tuple[int, int]] | None) -> list[int]:
    """The base offsets of the batches returned."""
    return [header.base_offset for _, header, shown in fetched_batches(log_of(line), isolation, aborted) if shown]


@pytest.mark.parametrize(("line", "aborted", "uncommitted", "committed"), [
    pytest.param("t1:0-1 C1:2 t2:3-4 A2:5 t1:6-7 C1:8", [(2, 3)], [0, 3, 6], [0, 6],
                 id="committed, aborted, committed: the aborted batch is skipped, markers never shown"),
    pytest.param("t1:0 t2:1 t1:2 A1:3 t2:4 C2:5", [(1, 0)], [0, 1, 2, 4], [1, 4],
                 id="interleaved producers: only the aborting one's batches are skipped"),
    pytest.param("t1:0 A1:1 t1:2 C1:3 t1:4 A1:5", [(1, 0), (1, 4)], [0, 2, 4], [2],
                 id="one producer aborts, commits, aborts: its abort marker ends the aborted span"),
    pytest.param("t1:4 A1:5 t1:6 C1:7", [(1, 4), (2, 9)][::-1], [4, 6], [6],
                 id="the aborted list in any order"),
    pytest.param("t1:10-11 A1:12 d:13", [(1, 5)], [10, 13], [13],
                 id="a fetch starting inside an aborted transaction skips its tail"),
    pytest.param("i1:0 t1:1 A1:2 i1:3", [(1, 1)], [0, 1, 3], [0, 3],
                 id="idempotent batches of a producer are never aborted, only transactional ones"),
    pytest.param("d:0-2 t1:3 C1:4", None, [0, 3], [0, 3],
                 id="no aborted list (the broker's null): every data batch"),
    pytest.param("t1:0 t1:1 A1:2", [(1, 0)], [0, 1], [],
                 id="an aborted transaction spanning batches is skipped whole"),
    pytest.param("t1:0 A1:1 t1:2", [(1, 0)], [0, 2], [2],
                 id="a transaction after an abort marker is visible until listed as aborted"),
])
def test_a_consumer_returns_the_batches_its_isolation_level_allows(
        line: str, aborted: list[tuple[int, int]] | None, uncommitted: list[int], committed: list[int]) -> None:
    assert visible(line, READ_UNCOMMITTED, aborted) == uncommitted
    assert visible(line, READ_COMMITTED, aborted) == committed


def test_every_batch_is_yielded_so_a_reader_advances_past_skipped_records_and_markers() -> None:
    line = "t1:0-1 C1:2 t2:3-4 A2:5"
    batches = list(fetched_batches(log_of(line), READ_COMMITTED, [(2, 3)]))
    assert [(h.base_offset, h.next_offset, h.partition_leader_epoch, shown) for _, h, shown in batches] == [
        (0, 2, 5, True), (2, 3, 5, False), (3, 5, 5, False), (5, 6, 5, False)]


@pytest.mark.parametrize(("key", "problem"), [
    (b"\x00", "too short"),
    (struct.pack(">hh", -1, 0), "version -1"),
])
def test_a_malformed_control_record_is_corrupt(key: bytes, problem: str) -> None:
    control = build_batch([(key, b"", (), 0)], producer_id=1, producer_epoch=0, is_transactional=True,
                          is_control=True)
    with pytest.raises(CorruptRecordError, match=problem):
        list(fetched_batches(bytes(control), READ_COMMITTED, [(1, 0)]))


def test_a_control_record_of_another_type_does_not_end_an_aborted_transaction() -> None:
    leader_change = build_batch([(struct.pack(">hh", 0, 2), b"", (), 0)], base_offset=1, producer_id=1,
                                producer_epoch=0, is_transactional=True, is_control=True)
    data = bytes(batch("t1:0")) + bytes(leader_change) + bytes(batch("t1:2"))
    assert [h.base_offset for _, h, shown in fetched_batches(data, READ_COMMITTED, [(1, 0)]) if shown] == []
