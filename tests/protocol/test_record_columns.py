"""protocol/record_columns.py runs compiled (Cython, setup.py) where the install could compile it and as plain Python
elsewhere: the two must give the same columns and the same errors on every input, and both the rows and errors of
the decoder they replace (`records.iter_records`) over a consumer's view of a log: every codec, null and empty keys
and values, headers, transactions (aborted batches and markers left out as client/completed_fetch.py decides),
ranges cutting batches, and bodies cut short or with a byte changed."""

from __future__ import annotations

import shutil
import struct
import sysconfig
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epoch_broker.client.completed_fetch import READ_COMMITTED, READ_UNCOMMITTED, fetched_batches
from epoch_broker.protocol import record_columns
from epoch_broker.protocol.errors import CorruptRecordError
from epoch_broker.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    Compression,
    EndTxnMarker,
    batch_body,
    build_batch,
    build_end_txn_marker,
    iter_records,
    parse_header,
    stamp,
)
from tests.protocol.builds import is_compiled, pure_python

PURE = pure_python(record_columns)
COMPILED = is_compiled(record_columns)
Row = tuple[int, int, int, int, bytes | None, bytes | None, list | None]  # offset, ms, type, epoch, key, value, headers
Bodies = list[tuple[bytes, BatchHeader]]
INT64 = range(-(1 << 63), 1 << 63)


def test_the_install_compiled_the_decoder_where_a_c_compiler_and_the_python_headers_exist() -> None:
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    assert (shutil.which(compiler) is not None and headers.is_file()) == COMPILED, record_columns.__file__


def rows_of(columns: record_columns.RecordColumns) -> list[Row]:
    """The columns read back row by row, as Arrow would read the buffers."""
    def cells(offsets: bytearray, data: bytearray, validity: bytearray | None) -> list[bytes | None]:
        ends = memoryview(offsets).cast("i")
        return [bytes(data[ends[i]:ends[i + 1]]) if validity is None or validity[i >> 3] >> (i & 7) & 1 else None
                for i in range(count)]

    count = columns.rows
    keys = cells(columns.key_offsets, columns.key_data, columns.key_validity)
    values = cells(columns.value_offsets, columns.value_data, columns.value_validity)
    assert (columns.key_nulls, columns.value_nulls) == (keys.count(None), values.count(None))
    headers = columns.headers if columns.headers is not None else [None] * count
    assert len(headers) == count
    return list(zip(memoryview(columns.offsets).cast("q")[:count].tolist(),
                    memoryview(columns.timestamps).cast("q")[:count].tolist(),
                    memoryview(columns.timestamp_types).cast("i")[:count].tolist(),
                    memoryview(columns.leader_epochs).cast("i")[:count].tolist(), keys, values, headers, strict=True))


def decoded(module: ModuleType, bodies: Bodies, start: int, end: int, with_headers: bool) -> tuple:
    try:
        return ("ok", rows_of(module.decode_columns(bodies, start, end, with_headers)))
    except CorruptRecordError:
        return ("CorruptRecordError",)


def by_iter_records(bodies: Bodies, start: int, end: int, with_headers: bool) -> tuple[tuple, bool]:
    """The old decoder's answer for the same bodies (each as an uncompressed batch: iter_records reads the body
    as it lies), and whether it met an offset or timestamp past 64 bits (which record_columns refuses)."""
    rows: list[Row] = []
    past_64_bits = False
    try:
        for body, header in bodies:
            plain = bytearray(BATCH_HEADER_SIZE) + body
            struct.pack_into(">qiibIhiqqqhii", plain, 0, *header._replace(
                batch_length=len(plain) - LOG_OVERHEAD, attributes=header.attributes & ~0x07))
            for record in iter_records(plain, 0, parse_header(plain)):
                past_64_bits |= record.offset not in INT64 or record.timestamp not in INT64
                if start <= record.offset < end:
                    rows.append((record.offset, record.timestamp, header.timestamp_type, header.partition_leader_epoch,
                                 record.key, record.value, record.headers if with_headers else None))
    except CorruptRecordError:
        return ("CorruptRecordError",), past_64_bits
    return ("ok", rows), past_64_bits


keys_or_values = st.one_of(st.none(), st.just(b""), st.binary(min_size=1, max_size=300))
records = st.lists(st.tuples(keys_or_values, keys_or_values,
                             st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=20))),
                                      max_size=2),
                             st.integers(0, 2**41)),
                   min_size=1, max_size=30)
# a data batch: its records, producer (-1: none; 1-2: transactional), codec, timestamp type; or a marker
batch_specs = st.lists(st.one_of(
    st.tuples(st.just("data"), records, st.sampled_from([-1, 1, 2]), st.sampled_from(list(Compression)),
              st.sampled_from([0, 1])),
    st.tuples(st.just("marker"), st.sampled_from([1, 2]), st.booleans())), min_size=1, max_size=6)


def log_of(specs: list) -> tuple[bytes, list[tuple[int, int]]]:
    """The batches back to back from offset 0 (epoch 3, then 4 from the third batch on), and the Fetch answer's
    aborted list for them: a producer's first batch after an abort marker (or the log start) opens a transaction."""
    log, aborted, offset, opened = bytearray(), [], 0, {}
    for index, spec in enumerate(specs):
        epoch = 3 if index < 2 else 4
        if spec[0] == "marker":
            _, producer, commit = spec
            batch = build_end_txn_marker(producer, 0, EndTxnMarker(commit, 1), 1_700_000_000_000)
            if not commit and producer in opened:
                aborted.append((producer, opened[producer]))
            opened.pop(producer, None)
            stamp(batch, 0, offset, epoch)
            offset += 1
        else:
            _, values, producer, codec, timestamp_type = spec
            batch = build_batch(values, base_offset=offset, partition_leader_epoch=epoch, producer_id=producer,
                                producer_epoch=0 if producer >= 0 else -1, base_sequence=0 if producer >= 0 else -1,
                                compression=codec, is_transactional=producer >= 0, timestamp_type=timestamp_type)
            if producer >= 0:
                opened.setdefault(producer, offset)
            offset += len(values)
        log += batch
    return bytes(log), aborted


@settings(max_examples=400, deadline=None)
@given(specs=batch_specs, isolation=st.sampled_from([READ_UNCOMMITTED, READ_COMMITTED]), data=st.data())
def test_compiled_pure_python_and_iter_records_agree_on_a_consumers_view_of_a_log(specs: list, isolation: int,
                                                                                  data: st.DataObject) -> None:
    log, aborted = log_of(specs)
    bodies = [(bytes(batch_body(log, position, header)), header)
              for position, header, visible in fetched_batches(log, isolation, aborted) if visible]
    last = sum(len(spec[1]) if spec[0] == "data" else 1 for spec in specs)
    start = data.draw(st.integers(0, last + 1))
    end = data.draw(st.integers(start, last + 2))
    if bodies and data.draw(st.booleans()):  # a body cut short or with a byte changed
        which = data.draw(st.integers(0, len(bodies) - 1))
        body, header = bodies[which]
        mutated = bytearray(body)
        if data.draw(st.booleans()):
            mutated = mutated[:data.draw(st.integers(0, len(mutated)))]
        else:
            mutated[data.draw(st.integers(0, len(mutated) - 1))] = data.draw(st.integers(0, 255))
        bodies[which] = (bytes(mutated), header)
    with_headers = data.draw(st.booleans())
    answer = decoded(record_columns, bodies, start, end, with_headers)
    assert answer == decoded(PURE, bodies, start, end, with_headers)
    expected, past_64_bits = by_iter_records(bodies, start, end, with_headers)
    if past_64_bits:  # the one point where record_columns is stricter (see its rules)
        assert answer == ("CorruptRecordError",)
    else:
        assert answer == expected


def one_batch(values: list, **kwargs: int) -> Bodies:
    batch = build_batch(values, **kwargs)
    header = parse_header(batch)
    return [(bytes(batch_body(batch, 0, header)), header)]


@pytest.mark.parametrize("module", [record_columns, PURE], ids=["installed", "pure"])
@pytest.mark.parametrize(("case", "bodies", "end", "answer"), [
    ("nothing to decode", [], 100, ("ok", [])),
    ("a range ending before the batch's last record",
     one_batch([(b"k", b"v", [], 5), (None, None, [], 6)], base_offset=10, partition_leader_epoch=2), 11,
     ("ok", [(10, 5, 0, 2, b"k", b"v", None)])),
    ("log-append time: every row has the batch's max timestamp",
     one_batch([(b"", b"", [], 5), (b"", b"", [], 9)], timestamp_type=1), 100,
     ("ok", [(0, 9, 1, -1, b"", b"", None), (1, 9, 1, -1, b"", b"", None)])),
])
def test_rows_are_the_records_in_range_with_their_batch_fields(module: ModuleType, case: str, bodies: Bodies,
                                                                end: int, answer: tuple) -> None:
    assert decoded(module, bodies, 0, end, False) == answer, case


@pytest.mark.parametrize("module", [record_columns, PURE], ids=["installed", "pure"])
@pytest.mark.parametrize(("case", "change"), [
    ("a header claiming 2^31 - 1 records of a 20-byte body: refused, no 2^31-row buffers allocated",
     lambda header: header._replace(records_count=2**31 - 1)),
    ("more records claimed than the body holds", lambda header: header._replace(records_count=2)),
    ("fewer records claimed than the body holds: bytes after the last one", lambda header: header._replace(
        records_count=0)),
])
def test_a_record_count_that_does_not_match_the_body_is_corrupt(module: ModuleType, case: str,
                                                                 change: Callable[[BatchHeader], BatchHeader]) -> None:
    [(body, header)] = one_batch([(None, b"value-of-a-record", [], 1)])
    assert decoded(module, [(body, change(header))], 0, 100, False) == ("CorruptRecordError",), case


@pytest.mark.parametrize("module", [record_columns, PURE], ids=["installed", "pure"])
@pytest.mark.parametrize(("case", "varint"), [
    ("an offset delta past 64 bits", b"\xfe" + b"\xff" * 8 + b"\x7f"),
    ("a varint of 11 bytes", b"\xff" * 10 + b"\x01"),
])
def test_values_past_64_bits_are_corrupt_in_both_builds(module: ModuleType, case: str, varint: bytes) -> None:
    record = b"\x00\x00" + varint + b"\x01\x01\x00"  # attributes, timestamp delta, offset delta, null key/value
    body = bytes([len(record) << 1]) + record
    [(_, header)] = one_batch([(None, None, [], 1)])
    assert decoded(module, [(body, header)], 0, 100, False) == ("CorruptRecordError",), case


@pytest.mark.parametrize("module", [record_columns, PURE], ids=["installed", "pure"])
@pytest.mark.parametrize("field", ["base_offset", "base_timestamp"])
def test_a_base_plus_a_delta_past_64_bits_is_corrupt_in_both_builds(module: ModuleType, field: str) -> None:
    [(body, header)] = one_batch([(None, b"v", [], 0), (None, b"v", [], 1)])  # deltas 0 and 1 of both
    bodies = [(body, header._replace(**{field: 2**63 - 1}))]
    assert decoded(module, bodies, 0, 2**63 - 1, False) == ("CorruptRecordError",)
