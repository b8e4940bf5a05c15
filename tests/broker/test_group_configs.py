"""Group config resources (ConfigResource type GROUP, 32): set, described and deleted with confluent-kafka's
AdminClient as Kafka 4.2 answers them, refused with Kafka's INVALID_CONFIG messages, stored by the controller and
seen by every broker; the checks themselves (Kafka's GroupConfig.validate) socket-free."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from epoch_broker import testing
from epoch_broker.broker.config import BrokerConfig, validate_group_configs
from epoch_broker.broker.config.catalogue import GROUP_CONFIGS
from epoch_broker.client.blocking import BlockingKafkaClient
from epoch_broker.protocol.messages import describe_configs
from tests.helpers import wait_for_sync

GROUP = "orders-workers"
RESET = "share.auto.offset.reset"


def alter(admin: AdminClient, *changes: tuple[str, str | None, AlterConfigOpType], group: str = GROUP) -> None:
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=operation) for name, value, operation in changes])
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)


def describe(admin: AdminClient, group: str = GROUP) -> dict[str, Any]:
    resource = ConfigResource(ResourceType.GROUP, group)
    return dict(admin.describe_configs([resource])[resource].result(timeout=30))


@pytest.fixture(scope="module")
def admin() -> Iterator[AdminClient]:
    with testing.broker(config={"group.share.heartbeat.interval.ms": 500}) as started:
        yield AdminClient({"bootstrap.servers": started.bootstrap_servers})


def test_a_set_key_is_described_as_the_groups_and_deleting_it_brings_back_its_default(admin: AdminClient) -> None:
    alter(admin, (RESET, "earliest", AlterConfigOpType.SET))
    described = describe(admin)
    assert set(described) == {key.name for key in GROUP_CONFIGS}
    assert (described[RESET].value, described[RESET].source) == ("earliest", ConfigSource.GROUP_CONFIG.value)
    assert not described[RESET].is_default and not described[RESET].is_read_only
    # unset keys: the broker key backing them (this broker's own value), or the key's own default
    heartbeat = described["share.heartbeat.interval.ms"]
    assert (heartbeat.value, heartbeat.source, heartbeat.is_default) == ("500", ConfigSource.DEFAULT_CONFIG.value,
                                                                         True)
    assert described["share.isolation.level"].value == "read_uncommitted"

    alter(admin, (RESET, None, AlterConfigOpType.DELETE))
    reset = describe(admin)[RESET]
    assert (reset.value, reset.source) == ("latest", ConfigSource.DEFAULT_CONFIG.value)


def test_a_duration_reset_and_several_keys_are_set_at_once(admin: AdminClient) -> None:
    alter(admin, (RESET, "by_duration:PT1H", AlterConfigOpType.SET),
          ("share.record.lock.duration.ms", "15000", AlterConfigOpType.SET), group="hourly")
    described = describe(admin, "hourly")
    assert (described[RESET].value, described["share.record.lock.duration.ms"].value) == ("by_duration:PT1H", "15000")


@pytest.mark.parametrize(("name", "value", "message"), [
    (RESET, "soon", "Invalid value soon for configuration share.auto.offset.reset: Invalid value `soon` for "
     "configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format "
     "'by_duration:<PnDTnHnMn.nS.>'."),
    ("share.fetch.wait.ms", "10", "Unknown group config name: share.fetch.wait.ms"),
], ids=["a bad value", "an unknown key"])
def test_a_bad_value_or_an_unknown_key_is_refused_and_changes_nothing(admin: AdminClient, name: str, value: str,
                                                                      message: str) -> None:
    with pytest.raises(KafkaException) as refused:
        alter(admin, (name, value, AlterConfigOpType.SET), group="refused")
    error = refused.value.args[0]
    assert (error.code(), error.str()) == (KafkaError.INVALID_CONFIG, message)
    assert describe(admin, "refused")[RESET].source == ConfigSource.DEFAULT_CONFIG.value


def test_a_second_broker_sees_the_group_config() -> None:
    with testing.cluster(2) as cluster, BlockingKafkaClient.connect(cluster.address(1)) as second:
        second.negotiate()
        alter(AdminClient({"bootstrap.servers": cluster.address(0)}), (RESET, "earliest", AlterConfigOpType.SET))
        request = describe_configs.REQUEST

        def described_by_broker_1() -> Any:
            answer = second.request(describe_configs.API, 4, request.cls(resources=[request.DescribeConfigsResource(
                resource_type=32, resource_name=GROUP, configuration_keys=[RESET])]))
            (result,) = answer.results
            return [(c.value, c.config_source) for c in result.configs]

        wait_for_sync(lambda: described_by_broker_1() == [("earliest", ConfigSource.GROUP_CONFIG.value)],
                      what="broker 1 has the group config")


@pytest.mark.parametrize(("configs", "problem"), [
    ({RESET: "latest", "share.isolation.level": "read_committed"}, None),
    ({RESET: "by_duration:P1DT2H0.5S"}, None),
    ({RESET: "by_duration:-PT1H"}, "Invalid value by_duration:-PT1H for configuration share.auto.offset.reset: "
     "Invalid value `by_duration:-PT1H` for configuration share.auto.offset.reset. The value must be either "
     "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'."),
    ({RESET: "by_duration:PT"}, "Invalid value by_duration:PT for configuration share.auto.offset.reset: "
     "Invalid value `by_duration:PT` for configuration share.auto.offset.reset. The value must be either "
     "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'."),
    ({"share.isolation.level": "serializable"}, "Invalid value serializable for configuration share.isolation.level: "
     "String must be one of: read_committed, read_uncommitted"),
    ({"share.session.timeout.ms": "soon"}, "Invalid value soon for configuration share.session.timeout.ms: "
     "Not a number of type INT"),
    ({"share.record.lock.duration.ms": "999"}, "Invalid value 999 for configuration share.record.lock.duration.ms: "
     "Value must be at least 1000"),
    ({"share.record.lock.duration.ms": "60001"}, "share.record.lock.duration.ms must be an integer from 1000 to "
     "60000, as group.share.record.lock.duration.ms is"),
    ({"share.delivery.count.limit": "11"}, "share.delivery.count.limit must be an integer from 2 to 10, as "
     "group.share.delivery.count.limit is"),
    ({"consumer.session.timeout.ms": "5000"}, "consumer.session.timeout.ms must be greater than "
     "consumer.heartbeat.interval.ms"),
    ({"share.session.timeout.ms": "3000", "share.heartbeat.interval.ms": "2000"}, None),
], ids=["known values", "a duration", "a negative duration", "an empty duration", "an isolation level unknown",
        "not a number", "below Kafka's minimum", "above the broker key's range", "above the broker key's range 2",
        "a session timeout not above the broker's heartbeat", "a session timeout above the group's heartbeat"])
def test_group_configs_are_checked_as_kafkas_group_config(configs: dict[str, str], problem: str | None) -> None:
    assert validate_group_configs(BrokerConfig(), configs) == problem
