"""broker/client_metrics.py, socket-free: subscriptions matched and merged as Kafka's ClientMetricsManager does,
pushes refused in Kafka's order, configs validated as ClientMetricsConfigs, instances expiring; a fake clock."""

from __future__ import annotations

import gzip
from typing import Any

import pytest

from epoch_broker.broker.client_metrics import (
    DEFAULT_INTERVAL_MS,
    TELEMETRY_MAX_BYTES,
    ClientMetricsManager,
    subscription_id,
    validate_client_metrics_configs,
)
from epoch_broker.protocol.errors import ErrorCode
from tests.observability.otlp_payload import data_point, metric, metrics_data

PRODUCER = "org.apache.kafka.producer."
SOURCE = "10.0.0.7:40001"
PAYLOAD = metrics_data(metric(PRODUCER + "record.queue.time.avg", "gauge", data_point(1.5)))


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000.0

    def __call__(self) -> float:
        return self.ms


def manager(subscriptions: dict[str, dict[str, str]]) -> tuple[ClientMetricsManager, Clock]:
    clock = Clock()
    return ClientMetricsManager(lambda: subscriptions, clock), clock


@pytest.mark.parametrize(("subscriptions", "client_id", "metrics", "interval"), [
    ({}, "p", [], DEFAULT_INTERVAL_MS),
    ({"s": {"metrics": PRODUCER, "interval.ms": "1000"}}, "p", [PRODUCER], 1000),
    ({"s": {"metrics": PRODUCER, "interval.ms": "1000", "match": "client_id=prod.*"}}, "p", [], DEFAULT_INTERVAL_MS),
    ({"s": {"metrics": PRODUCER, "match": "client_id=prod.*"}}, "producer-1", [PRODUCER], DEFAULT_INTERVAL_MS),
    ({"a": {"metrics": "b.,a.", "interval.ms": "5000"}, "b": {"metrics": "c.", "interval.ms": "2000"}}, "p",
     ["a.", "b.", "c."], 2000),
    ({"a": {"metrics": "b."}, "b": {"metrics": "*"}}, "p", ["*"], DEFAULT_INTERVAL_MS),
    ({"s": {"metrics": "x.", "match": "client_source_address=10\\.0\\..*,client_source_port=40001"}}, "p", ["x."],
     DEFAULT_INTERVAL_MS),
    ({"s": {"metrics": "x.", "match": "client_software_name=librdkafka"}}, "p", [], DEFAULT_INTERVAL_MS),
], ids=["no subscription: nothing", "one for all", "not matched", "matched by client id (whole)",
        "merged, lowest interval", "a * is all", "matched by source", "software name unknown: not matched"])
def test_an_instance_gets_the_subscriptions_it_matches(subscriptions: dict[str, dict[str, str]], client_id: str,
                                                       metrics: list[str], interval: int) -> None:
    clients, _ = manager(subscriptions)
    error, answer = clients.get_telemetry_subscriptions(bytes(16), client_id, SOURCE)
    assert error == ErrorCode.NONE
    assert answer.instance_id != bytes(16)
    assert (answer.metrics, answer.interval_ms) == (metrics, interval)
    assert answer.subscription_id == subscription_id(metrics, interval, answer.instance_id)


def test_the_subscription_id_is_kafkas_crc_of_the_set_and_interval_xor_the_id_hash() -> None:
    # Kafka: Crc32C("[a.]1000") ^ Uuid.hashCode(); a zero id's hash is 0, so the CRC alone
    assert subscription_id(["a."], 1000, bytes(16)) == subscription_id(["a."], 1000, bytes(16))
    assert subscription_id(["a."], 1000, bytes(16)) != subscription_id(["a."], 2000, bytes(16))
    assert subscription_id(["a."], 1000, bytes(16)) != subscription_id(["a."], 1000, bytes(15) + b"\x05")


def start(subscriptions: dict[str, dict[str, str]]) -> tuple[ClientMetricsManager, Clock, Any]:
    clients, clock = manager(subscriptions)
    _, answer = clients.get_telemetry_subscriptions(bytes(16), "p", SOURCE)
    return clients, clock, answer


SUBSCRIBED = {"s": {"metrics": PRODUCER, "interval.ms": "1000"}}


@pytest.mark.parametrize(("steps", "expected"), [
    ([("push", 0, {})], ErrorCode.NONE),
    ([("push", 0, {}), ("push", 500, {})], ErrorCode.THROTTLING_QUOTA_EXCEEDED),
    ([("push", 0, {}), ("push", 1000, {})], ErrorCode.NONE),
    ([("push", 0, {}), ("push", 500, {"terminating": True})], ErrorCode.NONE),
    ([("push", 0, {"terminating": True}), ("push", 5000, {})], ErrorCode.INVALID_REQUEST),
    ([("push", 0, {"subscription": 12345})], ErrorCode.UNKNOWN_SUBSCRIPTION_ID),
    ([("push", 0, {"compression_type": 9})], ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    ([("push", 0, {"payload": bytes(TELEMETRY_MAX_BYTES + 1)})], ErrorCode.TELEMETRY_TOO_LARGE),
    ([("push", 0, {"payload": b"\x0a\x09broken"})], ErrorCode.INVALID_RECORD),
    ([("push", 0, {"payload": b"not gzip", "compression_type": 1})], ErrorCode.INVALID_RECORD),
    ([("push", 0, {"instance_id": bytes(16)})], ErrorCode.INVALID_REQUEST),
    ([("get", 500, {})], ErrorCode.THROTTLING_QUOTA_EXCEEDED),
    ([("get", 1000, {})], ErrorCode.NONE),
    ([("push", 0, {"subscription": 1}), ("get", 10, {})], ErrorCode.NONE),
], ids=["first push", "too early", "after the interval", "terminating early", "after terminating",
        "stale subscription", "unknown codec", "too large", "not protobuf", "not gzip", "zero id", "get too early",
        "get after the interval", "get after a stale subscription"])
def test_requests_are_checked_as_kafka_checks_them(steps: list[tuple[str, int, dict[str, Any]]],
                                                   expected: ErrorCode) -> None:
    clients, clock, answer = start(SUBSCRIBED)
    base, error = clock.ms, None
    for kind, at_ms, overrides in steps:
        clock.ms = base + at_ms
        if kind == "get":
            error, _ = clients.get_telemetry_subscriptions(answer.instance_id, "p", SOURCE)
            continue
        push: dict[str, Any] = {"instance_id": answer.instance_id, "subscription": answer.subscription_id,
                                "terminating": False, "compression_type": 0, "payload": PAYLOAD, **overrides}
        error = clients.push_telemetry(push["instance_id"], "p", SOURCE, push["subscription"], push["terminating"],
                                       push["compression_type"], push["payload"])
    assert error == expected


def test_a_push_keeps_the_latest_metrics_and_a_gzip_one_is_read() -> None:
    clients, clock, answer = start(SUBSCRIBED)
    assert clients.push_telemetry(answer.instance_id, "p", SOURCE, answer.subscription_id, False, 1,
                                  gzip.compress(PAYLOAD)) == ErrorCode.NONE
    (instance,) = clients.live_instances()
    assert [(p.name, p.value) for p in instance.points] == [(PRODUCER + "record.queue.time.avg", 1.5)]
    clock.ms += 60_000  # Kafka's cache: max(60 s, 3 x the interval) after the last request
    assert clients.live_instances() == []


def test_a_changed_subscription_makes_the_next_push_stale() -> None:
    subscriptions = dict(SUBSCRIBED)
    clients, clock, answer = start(subscriptions)
    subscriptions["t"] = {"metrics": "org.apache.kafka.consumer."}
    clock.ms += 1000
    assert clients.push_telemetry(answer.instance_id, "p", SOURCE, answer.subscription_id, False, 0,
                                  PAYLOAD) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    error, again = clients.get_telemetry_subscriptions(answer.instance_id, "p", SOURCE)
    assert error == ErrorCode.NONE
    assert again.metrics == ["org.apache.kafka.consumer.", PRODUCER]


@pytest.mark.parametrize(("name", "configs", "expected"), [
    ("s", {"metrics": "a.,b.", "interval.ms": "100", "match": "client_id=x.*"}, None),
    ("", {"metrics": "a."}, ErrorCode.INVALID_REQUEST),
    ("s", {"retention.ms": "1"}, ErrorCode.INVALID_REQUEST),
    ("s", {"interval.ms": "99"}, ErrorCode.INVALID_REQUEST),
    ("s", {"interval.ms": "3600001"}, ErrorCode.INVALID_REQUEST),
    ("s", {"interval.ms": "soon"}, ErrorCode.INVALID_CONFIG),
    ("s", {"match": "client_colour=red"}, ErrorCode.INVALID_CONFIG),
    ("s", {"match": "client_id"}, ErrorCode.INVALID_CONFIG),
    ("s", {"match": "client_id=("}, ErrorCode.INVALID_CONFIG),
], ids=["valid", "no name", "unknown key", "interval too short", "interval too long", "interval not a number",
        "unknown selector", "no regex", "bad regex"])
def test_configs_are_validated_as_client_metrics_configs(name: str, configs: dict[str, str],
                                                         expected: ErrorCode | None) -> None:
    problem = validate_client_metrics_configs(name, configs)
    assert (problem and problem[0]) == expected
