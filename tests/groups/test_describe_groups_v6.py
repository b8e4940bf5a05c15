"""DescribeGroups v6 (Kafka 4.0, KIP-1043): a group unknown here or of another type (a KIP-848 consumer group) is
answered GROUP_ID_NOT_FOUND with Kafka's words; v5 still describes it as Dead with no error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer

from epoch_broker import testing
from epoch_broker.client.blocking import BlockingKafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import describe_groups, find_coordinator
from tests.helpers import wait_for_sync


def describe(client: BlockingKafkaClient, version: int, group: str) -> Any:
    (described,) = client.request(describe_groups.API, version, describe_groups.REQUEST.cls(groups=[group])).groups
    return described


def test_unknown_and_consumer_groups_are_not_found_in_v6_and_dead_before(tmp_path: Path) -> None:
    with testing.broker(data_dir=tmp_path) as started:
        started.create_topic("t")
        producer = Producer({"bootstrap.servers": started.bootstrap_servers})
        producer.produce("t", b"x")
        assert producer.flush(10) == 0
        consumer = Consumer({"bootstrap.servers": started.bootstrap_servers, "group.id": "modern",
                             "group.protocol": "consumer", "auto.offset.reset": "earliest"})
        consumer.subscribe(["t"])
        wait_for_sync(lambda: consumer.poll(0.2) is not None, timeout=30)
        with BlockingKafkaClient.connect(started.bootstrap_servers) as client:
            client.request(find_coordinator.API, 3, find_coordinator.REQUEST.cls(key="modern"))
            for group, message in (("nope", "Group nope not found."),
                                   ("modern", "Group modern is not a classic group.")):
                old = describe(client, 5, group)
                assert (old.error_code, old.group_state, old.members) == (ErrorCode.NONE, "Dead", [])
                new = describe(client, 6, group)
                assert (new.error_code, new.error_message, new.group_state) == (
                    ErrorCode.GROUP_ID_NOT_FOUND, message, "Dead")
        consumer.close()
