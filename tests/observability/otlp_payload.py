"""A minimal OTLP MetricsData protobuf writer for the tests: what librdkafka and the Java client push, built
from (name, kind, value, attributes) so a test states the payload it sends."""

from __future__ import annotations

import struct


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def fixed64(number: int, raw: bytes) -> bytes:
    return _varint(number << 3 | 1) + raw


def varint_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def key_value(key: str, value: str) -> bytes:
    return field(1, key.encode()) + field(2, field(1, value.encode()))


def data_point(value: int | float, attributes: dict[str, str] | None = None, time_ns: int = 1) -> bytes:
    number = fixed64(4, struct.pack("<d", value)) if isinstance(value, float) else fixed64(6, struct.pack("<q", value))
    return (b"".join(field(7, key_value(k, v)) for k, v in (attributes or {}).items())
            + fixed64(3, struct.pack("<Q", time_ns)) + number)


def metric(name: str, kind: str, *points: bytes) -> bytes:
    """A gauge, a sum (delta, monotonic) or a histogram (which the broker skips) with its data points."""
    data = b"".join(field(1, point) for point in points)
    if kind == "sum":
        data += varint_field(2, 1) + varint_field(3, 1)
    return field(1, name.encode()) + field(2, b"a description") + field({"gauge": 5, "sum": 7, "histogram": 9}[kind],
                                                                        data)


def metrics_data(*metrics: bytes, resource: dict[str, str] | None = None) -> bytes:
    scope = field(1, field(1, b"librdkafka")) + b"".join(field(2, m) for m in metrics)
    resource_metrics = field(1, b"".join(field(1, key_value(k, v)) for k, v in (resource or {}).items()))
    return field(1, resource_metrics + field(2, scope))
