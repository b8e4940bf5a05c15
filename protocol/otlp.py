"""The OpenTelemetry metrics a KIP-714 client pushes (PushTelemetry's `metrics`): a reader of the protobuf wire
format for the fields a broker shows, without a protobuf runtime.

What is read, by field number (opentelemetry-proto `metrics/v1/metrics.proto`, `common/v1/common.proto`):

    MetricsData      1 resource_metrics (repeated ResourceMetrics)
    ResourceMetrics  1 resource (Resource: 1 attributes, repeated KeyValue)   2 scope_metrics (repeated)
    ScopeMetrics     2 metrics (repeated Metric)
    Metric           1 name   5 gauge   7 sum   (each: 1 data_points, repeated NumberDataPoint)
    NumberDataPoint  3 time_unix_nano (fixed64)   4 as_double (double)   6 as_int (sfixed64)
                     7 attributes (repeated KeyValue)
    KeyValue         1 key   2 value (AnyValue: 1 string, 2 bool, 3 int, 4 double; others shown as "")

Rules:
- Every other field is skipped by its wire type, as protobuf readers do: a newer client's additions (histograms,
  summaries, exemplars, the scope, units) cost nothing and break nothing.
- Bad input (a truncated field, a length past its message, wire types 3/4 or 6/7) raises `OtlpError`.
- Sans-IO: bytes in, `MetricPoint`s out.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

_DOUBLE = struct.Struct("<d")
_INT64 = struct.Struct("<q")
_UINT64 = struct.Struct("<Q")
_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5


class OtlpError(ValueError):
    """The payload is not protobuf-encoded MetricsData."""


class MetricPoint(NamedTuple):
    """One data point of a gauge or sum: its metric's name, the point's attributes (key, value) and value."""

    name: str
    attributes: tuple[tuple[str, str], ...]
    value: float
    time_unix_nano: int
    resource: tuple[tuple[str, str], ...]  # its resource's attributes (the client's identity)


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise OtlpError("truncated or overlong varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(buf: memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """(field number, wire type, value) of each field of a message: an int for varint and fixed fields (fixed
    ones as unsigned little-endian), a view for length-delimited ones."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire_type = key >> 3, key & 7
        value: int | memoryview
        if wire_type == _VARINT:
            value, pos = _varint(buf, pos)
        elif wire_type in (_FIXED64, _FIXED32):
            size = 8 if wire_type == _FIXED64 else 4
            if pos + size > len(buf):
                raise OtlpError(f"truncated fixed field {number}")
            value = int.from_bytes(buf[pos:pos + size], "little")
            pos += size
        elif wire_type == _LENGTH:
            length, pos = _varint(buf, pos)
            if pos + length > len(buf):
                raise OtlpError(f"field {number} runs past its message")
            value = buf[pos:pos + length]
            pos += length
        else:
            raise OtlpError(f"wire type {wire_type} of field {number} is not read")
        yield number, wire_type, value


def _text(value: int | memoryview) -> str:
    if not isinstance(value, memoryview):
        raise OtlpError("a string field with a numeric wire type")
    return bytes(value).decode("utf-8", "replace")


def _sub(value: int | memoryview) -> memoryview:
    if not isinstance(value, memoryview):
        raise OtlpError("a message field with a numeric wire type")
    return value


def _any_value(buf: memoryview) -> str:
    for number, _, value in _fields(buf):
        if number == 1:
            return _text(value)
        if number == 2 and isinstance(value, int):
            return "true" if value else "false"
        if number == 3 and isinstance(value, int):
            return str(value - (1 << 64) if value >= 1 << 63 else value)
        if number == 4 and isinstance(value, int):
            return repr(_DOUBLE.unpack(_UINT64.pack(value))[0])
    return ""


def _attributes(buf: memoryview, number_of_attributes: int) -> tuple[tuple[str, str], ...]:
    pairs = []
    for number, _, value in _fields(buf):
        if number == number_of_attributes:
            key, text = "", ""
            for kv_number, _, kv_value in _fields(_sub(value)):
                if kv_number == 1:
                    key = _text(kv_value)
                elif kv_number == 2:
                    text = _any_value(_sub(kv_value))
            pairs.append((key, text))
    return tuple(sorted(pairs))


def _data_points(name: str, data: memoryview, resource: tuple[tuple[str, str], ...]) -> Iterator[MetricPoint]:
    for number, _, point in _fields(data):
        if number != 1:
            continue
        value, when = 0.0, 0
        for field_number, _, field_value in _fields(_sub(point)):
            if field_number == 3 and isinstance(field_value, int):
                when = field_value
            elif field_number == 4 and isinstance(field_value, int):
                value = _DOUBLE.unpack(_UINT64.pack(field_value))[0]
            elif field_number == 6 and isinstance(field_value, int):
                value = float(_INT64.unpack(_UINT64.pack(field_value))[0])
        yield MetricPoint(name, _attributes(_sub(point), 7), value, when, resource)


def metric_points(payload: bytes | bytearray | memoryview) -> list[MetricPoint]:
    """Every gauge and sum data point of a MetricsData message, in order."""
    points: list[MetricPoint] = []
    for number, _, resource_metrics in _fields(memoryview(payload)):
        if number != 1:
            continue
        resource: tuple[tuple[str, str], ...] = ()
        scopes = []
        for rm_number, _, rm_value in _fields(_sub(resource_metrics)):
            if rm_number == 1:
                resource = _attributes(_sub(rm_value), 1)
            elif rm_number == 2:
                scopes.append(_sub(rm_value))
        for scope in scopes:
            for sm_number, _, metric in _fields(scope):
                if sm_number != 2:
                    continue
                name, data = "", []
                for m_number, _, m_value in _fields(_sub(metric)):
                    if m_number == 1:
                        name = _text(m_value)
                    elif m_number in (5, 7):  # gauge, sum
                        data.append(_sub(m_value))
                for datum in data:
                    points.extend(_data_points(name, datum, resource))
    return points
