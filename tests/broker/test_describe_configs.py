"""DescribeConfigs as Kafka answers it: each key's Kafka type (v3+), its source, and with include_synonyms every
source of its value in Kafka's order of precedence (the topic's override, the broker's key if set, the default)."""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.config import TOPIC_CONFIGS
from epoch_broker.broker.config.catalogue import CATALOGUE
from epoch_broker.client.aio import KafkaClient
from epoch_broker.protocol.messages import describe_configs
from tests.broker.conftest import create_topic

DYNAMIC_TOPIC, DYNAMIC_BROKER, STATIC_BROKER, DEFAULT = 1, 2, 4, 5
BOOLEAN, INT, LONG, LIST = 1, 3, 5, 7


async def describe(client: KafkaClient, resource_type: int, name: str, synonyms: bool) -> dict[str, Any]:
    request = describe_configs.REQUEST
    answer = await client.request(describe_configs.API, 4, request.cls(include_synonyms=synonyms, resources=[
        request.DescribeConfigsResource(resource_type=resource_type, resource_name=name, configuration_keys=None)]))
    (result,) = answer.results
    assert result.error_code == 0, result
    return {entry.name: entry for entry in result.configs}


async def test_a_topic_override_a_broker_setting_and_a_default_are_told_apart_with_their_types(
        client: KafkaClient) -> None:
    await create_topic(client, "orders", **{"retention.ms": "1000"})
    configs = await describe(client, 2, "orders", synonyms=True)
    retention = configs["retention.ms"]
    assert (retention.value, retention.config_source, retention.config_type) == ("1000", DYNAMIC_TOPIC, LONG)
    assert [(s.value, s.source) for s in retention.synonyms] == [("1000", DYNAMIC_TOPIC), ("604800000", DEFAULT)]
    assert retention.synonyms[1].name.startswith("log.retention")
    assert (configs["segment.bytes"].config_type, configs["segment.bytes"].config_source) == (INT, DEFAULT)
    assert configs["cleanup.policy"].config_type == LIST
    assert configs["unclean.leader.election.enable"].config_type == BOOLEAN
    assert not any(entry.read_only for entry in configs.values())  # topic configs are alterable
    assert all(entry.synonyms == [] for entry in (await describe(client, 2, "orders", synonyms=False)).values())


async def test_a_broker_key_set_away_from_its_default_is_static_with_the_default_as_synonym(
        client: KafkaClient) -> None:
    configs = await describe(client, 4, "", synonyms=True)
    partitions = configs["offsets.topic.num.partitions"]  # the test kit runs brokers with 1 (Kafka: 50)
    assert (partitions.value, partitions.config_source, partitions.config_type) == ("1", STATIC_BROKER, INT)
    assert [(s.value, s.source) for s in partitions.synonyms] == [("1", STATIC_BROKER), ("50", DEFAULT)]
    retention = configs["log.retention.ms"] if "log.retention.ms" in configs else configs["log.retention.hours"]
    assert retention.config_source == DEFAULT and retention.read_only


async def test_every_catalogued_key_is_described_with_its_type_and_secrets_are_null(client: KafkaClient) -> None:
    """The broker resource answers each key of the catalogue under its own name, the topic resource each topic key,
    both with the key's type; a PASSWORD key's value (and its synonyms') is null."""
    await create_topic(client, "t")
    broker, topic = await describe(client, 4, "", synonyms=True), await describe(client, 2, "t", synonyms=True)
    keys = {name: entry for name, entry in broker.items() if entry.config_source != DYNAMIC_BROKER}  # no hooks
    assert {name: entry.config_type for name, entry in keys.items()} == {
        key.name: key.type for key in CATALOGUE}
    assert {name: entry.config_type for name, entry in topic.items()} == {
        name: key.type for name, key in TOPIC_CONFIGS.items()}
    for key in CATALOGUE:
        entry = broker[key.name]
        assert entry.is_sensitive == key.sensitive
        if key.sensitive:
            assert entry.value is None and all(synonym.value is None for synonym in entry.synonyms)
