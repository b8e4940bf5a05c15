"""ListConfigResources (74): v0 lists the client-metrics resources, v1 the resources of the types asked for (all
when none, groups with a config set among them), and kafka-python's list_config_resources reads them."""

from __future__ import annotations

from pathlib import Path

from kafka import KafkaAdminClient

from epoch_broker import testing
from epoch_broker.client.blocking import BlockingKafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import incremental_alter_configs, list_config_resources

Q = list_config_resources.REQUEST


def test_resources_are_listed_by_type(tmp_path: Path) -> None:
    with (testing.broker(data_dir=tmp_path) as started,
          BlockingKafkaClient.connect(started.bootstrap_servers) as client):
        client.negotiate()
        started.create_topic("orders")
        alter = incremental_alter_configs.REQUEST
        client.request(incremental_alter_configs.API, 1, alter.cls(resources=[alter.AlterConfigsResource(
            resource_type=16, resource_name="producers", configs=[alter.AlterableConfig(
                name="metrics", config_operation=0, value="org.apache.kafka.producer.")]),
            alter.AlterConfigsResource(resource_type=32, resource_name="workers", configs=[alter.AlterableConfig(
                name="share.auto.offset.reset", config_operation=0, value="earliest")])]))

        def listed(version: int, types: list[int]) -> tuple[int, list[tuple[int, str]]]:
            answer = client.request(list_config_resources.API, version, Q.cls(resource_types=types))
            return answer.error_code, [(r.resource_type, r.resource_name) for r in answer.config_resources]

        assert listed(0, []) == (ErrorCode.NONE, [(16, "producers")])
        error, everything = listed(1, [])
        assert error == ErrorCode.NONE and {(2, "orders"), (4, "0"), (16, "producers"), (32, "workers")} <= set(
            everything)
        assert listed(1, [4]) == (ErrorCode.NONE, [(4, "0")])
        assert listed(1, [32]) == (ErrorCode.NONE, [(32, "workers")])  # the groups with a config set
        assert listed(1, [8]) == (ErrorCode.INVALID_REQUEST, [])
        admin = KafkaAdminClient(bootstrap_servers=started.bootstrap_servers)
        try:
            result = admin.list_config_resources()
        finally:
            admin.close()
        assert "orders" in str(result["topic"]) and "0" in str(result["broker"])
