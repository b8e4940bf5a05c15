"""protocol/otlp.py: the gauge and sum points of OTLP MetricsData, read from protobuf bytes; what it does not read
is skipped, and broken bytes are OtlpError."""

from __future__ import annotations

import pytest

from epoch_broker.protocol.otlp import MetricPoint, OtlpError, metric_points
from tests.observability.otlp_payload import data_point, field, metric, metrics_data

LATENCY = "org.apache.kafka.producer.node.request.latency.avg"


@pytest.mark.parametrize(("payload", "expected"), [
    (metrics_data(), []),
    (metrics_data(metric(LATENCY, "gauge", data_point(2.5, {"node.id": "1"}, 7)), resource={"client_id": "p"}),
     [MetricPoint(LATENCY, (("node.id", "1"),), 2.5, 7, (("client_id", "p"),))]),
    (metrics_data(metric("org.apache.kafka.producer.record.queue.time.max", "sum", data_point(-3), data_point(4))),
     [MetricPoint("org.apache.kafka.producer.record.queue.time.max", (), -3.0, 1, ()),
      MetricPoint("org.apache.kafka.producer.record.queue.time.max", (), 4.0, 1, ())]),
    (metrics_data(metric("h", "histogram", data_point(1)), metric("g", "gauge", data_point(1, {"b": "2", "a": "1"}))),
     [MetricPoint("g", (("a", "1"), ("b", "2")), 1.0, 1, ())]),
    (metrics_data(metric("g", "gauge", data_point(1))) + field(9, b"a later field"),
     [MetricPoint("g", (), 1.0, 1, ())]),
], ids=["empty", "a gauge with attributes and resource", "a sum's int points", "a histogram is skipped",
        "unknown fields are skipped"])
def test_gauge_and_sum_points_are_read(payload: bytes, expected: list[MetricPoint]) -> None:
    assert metric_points(payload) == expected


@pytest.mark.parametrize("payload", [
    b"\x0a\x05ab",  # a length past the message
    b"\x0a",  # a key without its length
    b"\x0b",  # wire type 3 (a group)
    b"\x09\x00\x00",  # a truncated fixed64
    b"\x08\x01",  # resource_metrics as a number
], ids=["length past the end", "truncated length", "group wire type", "truncated fixed64", "wrong wire type"])
def test_broken_payloads_are_refused(payload: bytes) -> None:
    with pytest.raises(OtlpError):
        metric_points(payload)
