"""Kafka primitive types through the plain construct API, against hand-computed bytes."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epoch_broker.protocol import primitives as p


@pytest.mark.parametrize(
    ("construct", "value", "wire"),
    [
        (p.Int8, -1, b"\xff"),
        (p.Int16, 258, b"\x01\x02"),
        (p.Int32, -2, b"\xff\xff\xff\xfe"),
        (p.Int64, 1, b"\x00" * 7 + b"\x01"),
        (p.UInt16, 65535, b"\xff\xff"),
        (p.UInt32, 4294967295, b"\xff\xff\xff\xff"),
        (p.Float64, 1.5, b"\x3f\xf8" + b"\x00" * 6),
        (p.Boolean, True, b"\x01"),
        (p.Uuid, bytes(range(16)), bytes(range(16))),
        (p.UVarInt, 300, b"\xac\x02"),
        (p.VarInt, -1, b"\x01"),
        (p.VarInt, 1, b"\x02"),
        (p.VarLong, -(2**63), b"\xff" * 9 + b"\x01"),
        (p.String, "kafka", b"\x00\x05kafka"),
        (p.NullableString, None, b"\xff\xff"),
        (p.CompactString, "kafka", b"\x06kafka"),
        (p.CompactNullableString, None, b"\x00"),
        (p.CompactString, "", b"\x01"),
        (p.Bytes, b"\x00\x01", b"\x00\x00\x00\x02\x00\x01"),
        (p.NullableBytes, None, b"\xff\xff\xff\xff"),
        (p.CompactBytes, b"ab", b"\x03ab"),
        (p.CompactNullableBytes, None, b"\x00"),
    ],
)
def test_primitive_encodes_to_the_documented_bytes(construct: p.KafkaConstruct, value: object, wire: bytes) -> None:
    assert construct.build(value) == wire
    assert construct.parse(wire) == value


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_unsigned_varint_round_trips(value: int) -> None:
    assert p.UVarInt.parse(p.UVarInt.build(value)) == value


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varlong_round_trips(value: int) -> None:
    assert p.VarLong.parse(p.VarLong.build(value)) == value


def test_unsigned_varint_longer_than_five_bytes_is_malformed() -> None:
    with pytest.raises(p.DecodeError):
        p.read_uvarint(memoryview(b"\xff\xff\xff\xff\xff\x01"), 0)


def test_null_in_a_non_nullable_string_is_malformed() -> None:
    with pytest.raises(p.DecodeError):
        p.read_string(memoryview(b"\xff\xff"), 0)
    with pytest.raises(p.DecodeError):
        p.read_compact_string(memoryview(b"\x00"), 0)


def test_length_past_the_end_is_malformed_not_a_short_read() -> None:
    with pytest.raises(p.DecodeError):
        p.read_string(memoryview(b"\x00\x05abc"), 0)
    with pytest.raises(p.DecodeError):
        p.read_records(memoryview(b"\x00\x00\x10\x00abc"), 0)


def test_array_count_larger_than_the_frame_is_refused_before_looping() -> None:
    with pytest.raises(p.DecodeError):
        p.read_array_length(memoryview(b"\x7f\xff\xff\xff\x00"), 0)


def test_records_decode_to_a_view_of_the_frame() -> None:
    frame = bytearray(b"\x00\x00\x00\x03abc")
    records, end = p.read_records(memoryview(frame), 0)
    assert end == 7 and bytes(records) == b"abc"
    frame[4] = ord("z")
    assert bytes(records) == b"zbc"  # same memory: no copy was made
