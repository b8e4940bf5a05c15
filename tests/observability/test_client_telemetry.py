"""KIP-714 client telemetry end to end: a client-metrics subscription set with IncrementalAlterConfigs (stored in
the metadata log, so a restart keeps it), a confluent-kafka producer pushing its metrics, which /metrics and the
status page show; exact requests for each refusal and for compressed payloads."""

from __future__ import annotations

import gzip
import json
import urllib.request
from typing import Any

import cramjam
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from epoch_broker import testing
from epoch_broker.client.blocking import BlockingKafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import (
    describe_configs,
    get_telemetry_subscriptions,
    incremental_alter_configs,
    push_telemetry,
)
from tests.helpers import wait_for_sync
from tests.observability.otlp_payload import data_point, metric, metrics_data

CLIENT_METRICS = 16
SET, DELETE = 0, 1
PRODUCER = "org.apache.kafka.producer."


def alter(client: BlockingKafkaClient, name: str, configs: dict[str, str | None]) -> tuple[int, str | None]:
    request = incremental_alter_configs.REQUEST
    body = request.cls(validate_only=False, resources=[request.AlterConfigsResource(
        resource_type=CLIENT_METRICS, resource_name=name,
        configs=[request.AlterableConfig(name=k, config_operation=DELETE if v is None else SET, value=v)
                 for k, v in configs.items()])])
    (result,) = client.request(incremental_alter_configs.API, 1, body).responses
    return result.error_code, result.error_message


def describe(client: BlockingKafkaClient, name: str) -> dict[str, tuple[str, int]]:
    request = describe_configs.REQUEST
    body = request.cls(resources=[request.DescribeConfigsResource(resource_type=CLIENT_METRICS, resource_name=name,
                                                                  configuration_keys=None)],
                       include_synonyms=False, include_documentation=False)
    (result,) = client.request(describe_configs.API, 4, body).results
    assert result.error_code == ErrorCode.NONE
    return {c.name: (c.value, c.config_source) for c in result.configs}


def connect(broker: Any, client_id: str = "raw-telemetry") -> BlockingKafkaClient:
    client = BlockingKafkaClient.connect(broker.bootstrap_servers, client_id)
    client.negotiate()
    return client


def subscriptions(client: BlockingKafkaClient, instance_id: bytes = bytes(16)) -> Any:
    return client.request(get_telemetry_subscriptions.API, 0,
                          get_telemetry_subscriptions.REQUEST.cls(client_instance_id=instance_id))


def push(client: BlockingKafkaClient, answer: Any, payload: bytes, compression_type: int = 0, **fields: Any) -> int:
    body = push_telemetry.REQUEST.cls(**{
        "client_instance_id": answer.client_instance_id, "subscription_id": answer.subscription_id,
        "terminating": False, "compression_type": compression_type, "metrics": payload, **fields})
    return client.request(push_telemetry.API, 0, body).error_code


def client_metrics(url: str) -> list[dict[str, Any]]:
    """The epoch_broker_client_metric samples' labels (with the value as "value")."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return [{**sample.labels, "value": sample.value}
            for family in text_string_to_metric_families(text) if family.name == "epoch_broker_client_metric"
            for sample in family.samples]


def status(url: str) -> Any:
    with urllib.request.urlopen(f"{url}/api/status", timeout=10) as answer:
        return json.loads(answer.read())


def test_a_producer_pushes_the_metrics_a_subscription_asks_for_and_the_broker_shows_them() -> None:
    with testing.broker(config={"metrics.listener": "http://127.0.0.1:0"}) as broker:
        topic = broker.create_topic("telemetry")
        with connect(broker) as admin:
            assert alter(admin, "producers", {"metrics": PRODUCER, "interval.ms": "500"}) == (ErrorCode.NONE, None)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "telemetry-producer",
                             "linger.ms": 5})

        def pushed() -> list[dict[str, Any]]:
            producer.produce(topic, b"a record")
            producer.poll(0)
            return [s for s in client_metrics(broker.metrics_url) if s["client_id"] == "telemetry-producer"]

        samples = wait_for_sync(pushed, timeout=60, interval=0.2, what="the producer's pushed metrics on /metrics")
        assert all(s["name"].startswith(PRODUCER) for s in samples), samples
        assert len({s["client_instance_id"] for s in samples}) == 1
        (instance,) = [c for c in status(broker.metrics_url)["client_instances"]
                       if c["client_id"] == "telemetry-producer"]
        assert instance["requested_metrics"] == [PRODUCER] and instance["push_interval_ms"] == 500
        assert instance["metric_count"] > 0 and instance["pushes"] >= 1 and instance["last_push_ms"]
        assert producer.flush(30) == 0


def test_without_a_subscription_a_client_is_asked_for_nothing() -> None:
    with testing.broker() as broker, connect(broker) as client:
        answer = subscriptions(client)
        assert answer.error_code == ErrorCode.NONE and answer.client_instance_id != bytes(16)
        assert answer.requested_metrics == [] and answer.push_interval_ms == 300_000
        assert answer.delta_temporality and answer.telemetry_max_bytes == 1 << 20
        assert answer.accepted_compression_types == [4, 3, 1, 2]  # zstd, lz4, gzip, snappy: Kafka's order


def test_a_subscription_matches_the_software_name_and_version_the_client_gave_in_api_versions() -> None:
    with testing.broker() as broker, connect(broker) as admin:
        # our client's ApiVersions v3 says it is "epoch-broker" "0" (client/connection.py)
        assert alter(admin, "ours", {"metrics": PRODUCER, "match": "client_software_name=epoch-broker,"
                                                                    "client_software_version=0"})[0] == ErrorCode.NONE
        assert alter(admin, "java", {"metrics": "org.apache.kafka.consumer.",
                                     "match": "client_software_name=apache-kafka-java"})[0] == ErrorCode.NONE
        with connect(broker) as client:
            assert subscriptions(client).requested_metrics == [PRODUCER]
        with BlockingKafkaClient.connect(broker.bootstrap_servers, "no-api-versions") as silent:
            assert subscriptions(silent).requested_metrics == []  # gave no software name: matches neither


def test_pushes_are_refused_as_kafka_refuses_them_and_read_in_every_codec() -> None:
    payload = metrics_data(metric(PRODUCER + "record.queue.time.avg", "gauge", data_point(2.0, {"node.id": "1"})))
    codecs = {0: payload, 1: gzip.compress(payload), 2: bytes(cramjam.snappy.compress_raw(payload)),
              3: bytes(cramjam.lz4.compress(payload)), 4: bytes(cramjam.zstd.compress(payload))}
    with testing.broker(config={"metrics.listener": "http://127.0.0.1:0"}) as broker, connect(broker) as client:
        assert alter(client, "all", {"metrics": "*", "interval.ms": "100"}) == (ErrorCode.NONE, None)
        assert alter(client, "bad", {"interval.ms": "50"})[0] == ErrorCode.INVALID_REQUEST
        assert alter(client, "bad", {"match": "colour=red"})[0] == ErrorCode.INVALID_CONFIG
        answer = subscriptions(client)
        assert answer.requested_metrics == ["*"] and answer.push_interval_ms == 100
        assert subscriptions(client, answer.client_instance_id).error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        assert push(client, answer, payload, subscription_id=answer.subscription_id + 1) == (
            ErrorCode.UNKNOWN_SUBSCRIPTION_ID)
        for codec, compressed in codecs.items():
            fresh = wait_for_sync(lambda: (a := subscriptions(client, answer.client_instance_id)).error_code == 0
                                  and a, what="the push interval to pass")
            assert push(client, fresh, compressed, codec) == ErrorCode.NONE, codec
            assert push(client, fresh, compressed, codec) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        fresh = wait_for_sync(lambda: (a := subscriptions(client, answer.client_instance_id)).error_code == 0 and a)
        assert push(client, fresh, payload, 9) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        fresh = wait_for_sync(lambda: (a := subscriptions(client, answer.client_instance_id)).error_code == 0 and a)
        assert push(client, fresh, bytes((1 << 20) + 1)) == ErrorCode.TELEMETRY_TOO_LARGE
        fresh = wait_for_sync(lambda: (a := subscriptions(client, answer.client_instance_id)).error_code == 0 and a)
        assert push(client, fresh, b"\x0a\x09broken") == ErrorCode.INVALID_RECORD
        assert push(client, fresh, b"", terminating=True) == ErrorCode.NONE
        assert push(client, fresh, payload, terminating=True) == ErrorCode.INVALID_REQUEST
        assert push(client, fresh, payload, client_instance_id=bytes(16)) == ErrorCode.INVALID_REQUEST
        (sample,) = client_metrics(broker.metrics_url)
        assert sample["client_id"] == "raw-telemetry" and sample["attributes"] == "node.id=1"
        assert sample["name"] == PRODUCER + "record.queue.time.avg" and sample["value"] == 2.0


def test_subscriptions_are_metadata_a_restart_keeps() -> None:
    with testing.broker() as broker:
        with connect(broker) as client:
            assert alter(client, "kept", {"metrics": PRODUCER, "match": "client_id=raw-.*"}) == (ErrorCode.NONE, None)
            assert alter(client, "gone", {"metrics": "x."}) == (ErrorCode.NONE, None)
            assert alter(client, "gone", {"metrics": None}) == (ErrorCode.NONE, None)
        broker.restart()
        with connect(broker) as client:
            assert describe(client, "kept") == {"metrics": (PRODUCER, 7), "match": ("client_id=raw-.*", 7)}
            assert describe(client, "gone") == {}
            assert subscriptions(client).requested_metrics == [PRODUCER]
        with connect(broker, "someone-else") as client:
            assert subscriptions(client).requested_metrics == []


def test_in_a_cluster_a_subscription_set_on_one_broker_reaches_every_broker() -> None:
    with testing.cluster(brokers=2) as cluster:
        first, second = (BlockingKafkaClient.connect(cluster.address(node), "raw-telemetry") for node in (0, 1))
        with first, second:
            first.negotiate()
            second.negotiate()
            # forwarded to the controller, answered once the broker that was asked has the record
            assert alter(first, "everywhere", {"metrics": PRODUCER}) == (ErrorCode.NONE, None)
            assert describe(first, "everywhere") == {"metrics": (PRODUCER, 7)}
            wait_for_sync(lambda: subscriptions(second).requested_metrics == [PRODUCER], timeout=30,
                          what="the subscription on the other broker")
