"""RecordBatch v2: header, CRC32C, in-place stamping, codecs, real-client batches, malformed input."""

from __future__ import annotations

import contextlib
import pathlib
import struct
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epoch_broker.protocol.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    UnsupportedForMessageFormat,
)
from epoch_broker.protocol.record_scan import scan_records
from epoch_broker.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    Compression,
    Record,
    batch_body,
    build_batch,
    iter_batches,
    iter_records,
    parse_header,
    stamp,
    stamp_log_append_time,
    validate_batch,
)

GOLDEN = pathlib.Path(__file__).parent / "golden" / "records"
RECORDS = [
    (b"k1", b"v1" * 50, [("trace", b"abc"), ("empty", None)], 1_700_000_000_000),
    (None, b"only-value", [], 1_700_000_000_007),
    (b"k3", None, [], 1_699_999_999_999),
]


def only_batch(buf: bytes | bytearray) -> tuple[int, object]:
    [(pos, header)] = list(iter_batches(buf))
    return pos, header


def test_header_fields_and_derived_properties() -> None:
    buf = build_batch(RECORDS, base_offset=100, partition_leader_epoch=3, producer_id=7, producer_epoch=2,
                      base_sequence=10, compression=Compression.GZIP, is_transactional=True)
    header = parse_header(buf)
    assert len(buf) == header.total_size == header.batch_length + LOG_OVERHEAD
    assert (header.base_offset, header.partition_leader_epoch, header.magic) == (100, 3, 2)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 10)
    assert header.records_count == 3 and header.last_offset_delta == 2
    assert header.last_offset == 102 and header.next_offset == 103
    assert header.last_sequence == 12
    assert header.compression is Compression.GZIP
    assert header.is_transactional and not header.is_control and header.timestamp_type == 0
    assert header.base_timestamp == 1_699_999_999_999 and header.max_timestamp == 1_700_000_000_007


def test_a_built_batch_passes_its_crc_check() -> None:
    buf = build_batch(RECORDS)
    pos, header = only_batch(buf)
    validate_batch(buf, pos, header)


def test_the_crc32c_function_loads_without_the_package_metadata_lookup() -> None:
    """The crc32c package's __init__ imports importlib.metadata (12-80 ms on a broker's first produce)."""
    code = ("import sys; from epoch_broker.protocol.records import crc32c_of; "
            "print(hex(crc32c_of(b'123456789')), 'importlib.metadata' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["0xe3069283", "False"]  # the CRC-32C check value of the standard test vector


@pytest.mark.parametrize("byte", [21, 30, BATCH_HEADER_SIZE, -1])
def test_one_flipped_bit_covered_by_the_crc_is_rejected(byte: int) -> None:
    buf = build_batch(RECORDS)
    buf[byte] ^= 0x04
    header = parse_header(buf)
    with pytest.raises(CorruptRecordError) as info:
        validate_batch(buf, 0, header)
    assert info.value.code is ErrorCode.CORRUPT_MESSAGE


def test_stamping_sets_offset_and_epoch_and_keeps_the_crc_valid() -> None:
    buf = build_batch(RECORDS)
    view = memoryview(buf)
    stamp(view, 0, 1234, 9)
    header = parse_header(buf)
    assert (header.base_offset, header.partition_leader_epoch) == (1234, 9)
    validate_batch(buf, 0, header)
    assert [r.offset for r in iter_records(buf, 0, header)] == [1234, 1235, 1236]


def test_stamping_the_second_of_two_batches_leaves_the_first_alone() -> None:
    first, second = build_batch(RECORDS), build_batch(RECORDS[:1])
    buf = first + second
    stamp(buf, len(first), 50, 4)
    headers = [h for _, h in iter_batches(buf)]
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, -1), (50, 4)]
    for pos, header in iter_batches(buf):
        validate_batch(buf, pos, header)


def test_log_append_time_stamping_recomputes_the_crc_and_overrides_record_timestamps() -> None:
    buf = build_batch(RECORDS)
    stamp_log_append_time(buf, 0, 1_800_000_000_000)
    header = parse_header(buf)
    validate_batch(buf, 0, header)
    assert header.timestamp_type == 1 and header.max_timestamp == 1_800_000_000_000
    assert {r.timestamp for r in iter_records(buf, 0, header)} == {1_800_000_000_000}


@pytest.mark.parametrize("codec", list(Compression))
def test_records_round_trip_through_every_codec(codec: Compression) -> None:
    buf = build_batch(RECORDS, base_offset=5, compression=codec)
    pos, header = only_batch(buf)
    validate_batch(buf, pos, header)
    assert header.compression is codec
    assert list(iter_records(buf, pos, header)) == [
        Record(5 + i, ts, key, value, list(headers)) for i, (key, value, headers, ts) in enumerate(RECORDS)
    ]


def test_build_batch_accepts_record_objects() -> None:
    original = [Record(0, 10, b"k", b"v", [("h", b"1")])]
    buf = build_batch(original)
    assert list(iter_records(buf, 0, parse_header(buf))) == original


def test_snappy_batches_decode_with_and_without_xerial_framing() -> None:
    framed = build_batch(RECORDS, compression=Compression.SNAPPY)
    assert bytes(framed[BATCH_HEADER_SIZE : BATCH_HEADER_SIZE + 8]) == b"\x82SNAPPY\x00"
    raw = (GOLDEN / "confluent-snappy.bin").read_bytes()
    assert not raw[BATCH_HEADER_SIZE:].startswith(b"\x82SNAPPY")
    for buf in (framed, raw):
        pos, header = only_batch(buf)
        assert len(list(iter_records(buf, pos, header))) == header.records_count


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.bin")), ids=lambda p: p.stem)
def test_batches_produced_by_confluent_kafka_parse_and_validate(path: pathlib.Path) -> None:
    buf = path.read_bytes()
    batches = list(iter_batches(buf))
    assert batches
    codec = path.stem.split("-")[1]
    records: list[Record] = []
    for pos, header in batches:
        validate_batch(buf, pos, header)
        assert header.compression.name.lower() == codec
        assert (header.producer_id >= 0) == path.stem.endswith("idempotent")
        records += iter_records(buf, pos, header)
    assert [r.key for r in records] == [f"key-{i}".encode() for i in range(20)]
    assert records[3].value == b"value-3" * 20
    assert records[3].headers == [("h", b"3"), ("null", None)]
    assert records[3].timestamp == 1_700_000_000_003


@pytest.mark.parametrize("magic", [0, 1])
def test_old_message_formats_are_rejected(magic: int) -> None:
    buf = build_batch(RECORDS)
    buf[16] = magic
    with pytest.raises(UnsupportedForMessageFormat) as info:
        list(iter_batches(buf))
    assert info.value.code is ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


def test_a_batch_length_below_the_header_size_is_corrupt() -> None:
    buf = build_batch(RECORDS)
    struct.pack_into(">i", buf, 8, 48)
    with pytest.raises(CorruptRecordError):
        list(iter_batches(buf))


def test_a_batch_length_past_the_buffer_end_is_corrupt() -> None:
    buf = build_batch(RECORDS)
    struct.pack_into(">i", buf, 8, len(buf))
    with pytest.raises(CorruptRecordError):
        list(iter_batches(buf))


def test_an_empty_buffer_holds_no_batches() -> None:
    assert list(iter_batches(b"")) == []


def _decode_all(buf: bytes) -> None:
    for pos, header in iter_batches(buf):
        validate_batch(buf, pos, header)
        list(iter_records(buf, pos, header))


@settings(max_examples=300, deadline=None)
@given(codec=st.sampled_from(list(Compression)), data=st.data())
def test_truncated_buffers_raise_corrupt_record_error_only(codec: Compression, data: st.DataObject) -> None:
    whole = bytes(build_batch(RECORDS, compression=codec)) * 2
    cut = data.draw(st.integers(1, len(whole) - 1).filter(lambda n: n != len(whole) // 2))
    with pytest.raises(CorruptRecordError):
        _decode_all(whole[:cut])


@settings(max_examples=300, deadline=None)
@given(codec=st.sampled_from(list(Compression)), data=st.data())
def test_mutated_bytes_never_escape_as_another_exception(codec: Compression, data: st.DataObject) -> None:
    buf = bytearray(build_batch(RECORDS, compression=codec))
    pos = data.draw(st.integers(0, len(buf) - 1))
    buf[pos] = data.draw(st.integers(0, 255))
    with contextlib.suppress(CorruptRecordError, UnsupportedForMessageFormat):
        _decode_all(bytes(buf))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_never_escape_as_another_exception(raw: bytes) -> None:
    with contextlib.suppress(CorruptRecordError, UnsupportedForMessageFormat):
        _decode_all(raw)


def test_records_of_a_corrupt_body_with_a_matching_crc_still_raise_corrupt_record_error() -> None:
    # A producer bug, not line noise: the CRC matches, but a record length lies.
    buf = build_batch(RECORDS)
    buf[BATCH_HEADER_SIZE] = 0x7E
    header = parse_header(buf)
    with pytest.raises(CorruptRecordError):
        list(iter_records(buf, 0, header))


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=300)), st.binary(max_size=3000),
                                 st.lists(st.tuples(st.text(max_size=5), st.binary(max_size=20)), max_size=3)),
                       min_size=1, max_size=20),
       codec=st.sampled_from(list(Compression)))
def test_the_record_scanner_agrees_with_the_decoder(values: list, codec: Compression) -> None:
    buf = build_batch([(key, value, headers, None) for key, value, headers in values], compression=codec)
    [(pos, header)] = list(iter_batches(buf))
    scan = scan_records(batch_body(buf, pos, header), header)
    decoded = list(iter_records(buf, pos, header))
    assert scan.count == len(decoded) and scan.null_key == any(r.key is None for r in decoded)


@settings(max_examples=500, deadline=None)
@given(codec=st.sampled_from(list(Compression)), data=st.data())
def test_the_record_scanner_raises_only_kafka_errors_on_mutated_bodies(codec: Compression,
                                                                       data: st.DataObject) -> None:
    buf = bytearray(build_batch(RECORDS, compression=codec))
    header = parse_header(buf, 0)
    body = bytearray(batch_body(buf, 0, header))
    if data.draw(st.booleans()):
        body = body[:data.draw(st.integers(0, len(body)))]
    else:
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(CorruptRecordError, InvalidRecordError):
        scan_records(bytes(body), header)
