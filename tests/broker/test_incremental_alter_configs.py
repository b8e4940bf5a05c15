"""The fault catalogue (broker/faults.py) driven from outside with IncrementalAlterConfigs: flags, request
rules and disk faults on an in-process broker, and fault.power.loss on a real process (it exits, and only
fsynced records survive)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from epoch_broker import testing
from epoch_broker.broker.app import Broker
from epoch_broker.broker.faults import (
    CATALOGUE,
    CLOCK_OFFSET,
    DISK_FSYNC_FAILING,
    DISK_FULL,
    HIGH_WATERMARK_HELD,
    POWER_LOSS,
    POWER_LOSS_EXIT_STATUS,
    REPLICATION_PAUSED,
)
from epoch_broker.client.aio import ConnectionClosed, KafkaClient
from epoch_broker.drill.admin import alter_faults
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import alter_configs, incremental_alter_configs, list_offsets, metadata
from tests.broker.conftest import batch, create_topic, produce_to
from tests.helpers import start_broker

REQ = incremental_alter_configs.REQUEST
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


async def alter(client: KafkaClient, configs: list[tuple[str, int, str | None]], *, resource_type: int = 4,
                name: str = "0", validate_only: bool = False) -> Any:
    request = REQ.cls(validate_only=validate_only, resources=[REQ.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[REQ.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in configs])])
    return (await client.request(incremental_alter_configs.API, 1, request)).responses[0]


async def test_boolean_fault_hooks_are_set_and_cleared(broker: Broker, client: KafkaClient) -> None:
    answer = await alter(client, [(REPLICATION_PAUSED, SET, "true"), (HIGH_WATERMARK_HELD, SET, "TRUE")])
    assert (answer.error_code, answer.resource_name) == (ErrorCode.NONE, "0")
    assert broker.faults.replication_paused and broker.faults.high_watermark_held

    assert (await alter(client, [(REPLICATION_PAUSED, DELETE, None)], name="")).error_code == ErrorCode.NONE
    assert (await alter(client, [(HIGH_WATERMARK_HELD, SET, "false")])).error_code == ErrorCode.NONE
    assert not broker.faults.replication_paused and not broker.faults.high_watermark_held


async def test_a_request_rule_answers_its_error_at_every_level_for_count_requests(client: KafkaClient) -> None:
    await create_topic(client, "t")
    rule = "error=NOT_LEADER_OR_FOLLOWER,count=2"
    assert (await alter(client, [("fault.request.produce", SET, rule)])).error_code == ErrorCode.NONE
    for _ in range(2):
        faulted = await produce_to(client, "t", batch(b"a"))
        assert (faulted.index, faulted.error_code) == (0, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert (await produce_to(client, "t", batch(b"a"))).error_code == ErrorCode.NONE  # the count is spent


async def test_a_request_rule_can_drop_the_connection_until_cleared(broker: Broker, client: KafkaClient) -> None:
    assert (await alter(client, [("fault.request.3", SET, "drop")])).error_code == ErrorCode.NONE  # Metadata
    with pytest.raises(ConnectionClosed):
        await client.request(metadata.API, 1, metadata.REQUEST.cls(topics=[]))
    async with await KafkaClient.connect(f"127.0.0.1:{broker.advertised.port}") as other:
        assert (await alter(other, [("fault.request.metadata", DELETE, None)])).error_code == ErrorCode.NONE
        assert (await other.request(metadata.API, 1, metadata.REQUEST.cls(topics=[]))).brokers


async def test_a_full_disk_refuses_produces_and_keeps_the_log_as_it_was(client: KafkaClient) -> None:
    await create_topic(client, "t")
    assert (await produce_to(client, "t", batch(b"kept"))).error_code == ErrorCode.NONE
    assert (await alter(client, [(DISK_FULL, SET, "true")])).error_code == ErrorCode.NONE
    refused = await produce_to(client, "t", batch(b"lost"))
    assert refused.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert (await alter(client, [(DISK_FULL, DELETE, None)])).error_code == ErrorCode.NONE
    assert (await produce_to(client, "t", batch(b"after"))).base_offset == 1  # the refused batch left no trace


async def test_a_failing_fsync_takes_the_log_offline_until_restart(client: KafkaClient) -> None:
    await create_topic(client, "t", flush_messages="1")  # every append is fsynced
    assert (await produce_to(client, "t", batch(b"kept"))).error_code == ErrorCode.NONE
    assert (await alter(client, [(DISK_FSYNC_FAILING, SET, "true")])).error_code == ErrorCode.NONE
    assert (await produce_to(client, "t", batch(b"x"))).error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert (await alter(client, [(DISK_FSYNC_FAILING, DELETE, None)])).error_code == ErrorCode.NONE
    # Kafka's rule: a log whose fsync failed stays offline (what reached it may not be on disk)
    assert (await produce_to(client, "t", batch(b"y"))).error_code == ErrorCode.KAFKA_STORAGE_ERROR


async def test_a_clock_offset_moves_the_brokers_wall_clock_until_cleared(broker: Broker, client: KafkaClient) -> None:
    """fault.clock.offset.ms: a LogAppendTime topic is stamped an hour behind while it is set, and on time after."""
    await create_topic(client, "t", message_timestamp_type="LogAppendTime")
    hour_ms = 3_600_000
    assert (await alter(client, [(CLOCK_OFFSET, SET, str(-hour_ms))])).error_code == ErrorCode.NONE
    before = int(time.time() * 1000)  # whole milliseconds, as the broker stamps them
    behind = (await produce_to(client, "t", batch(b"skewed"))).log_append_time_ms
    assert before - hour_ms - 1000 <= behind <= int(time.time() * 1000) - hour_ms
    assert broker.faults.in_force()[CLOCK_OFFSET] == str(-hour_ms)

    assert (await alter(client, [(CLOCK_OFFSET, DELETE, None)])).error_code == ErrorCode.NONE
    on_time = (await produce_to(client, "t", batch(b"on time"))).log_append_time_ms
    assert on_time >= before and CLOCK_OFFSET not in broker.faults.in_force()
    for bad in ("soon", str(11 * 365 * 24 * 3600 * 1000)):
        refused = await alter(client, [(CLOCK_OFFSET, SET, bad)])
        assert refused.error_code == ErrorCode.INVALID_CONFIG and CLOCK_OFFSET in refused.error_message


async def test_a_topics_configs_are_set_and_deleted_and_the_partition_follows(broker: Broker,
                                                                             client: KafkaClient) -> None:
    """Topic resources (type 2): SET and DELETE through the controller; the partition applies them at once
    (max.message.bytes refuses a batch, then the default takes it again); bad keys, values and operations
    change nothing."""
    await create_topic(client, "t", retention_ms="86400000")
    big = batch(b"x" * 2000)
    assert (await alter(client, [("max.message.bytes", SET, "1000")], resource_type=2, name="t")).error_code == 0
    assert broker.metadata.topics_by_name["t"].configs == {"retention.ms": "86400000", "max.message.bytes": "1000"}
    assert (await produce_to(client, "t", big)).error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert (await alter(client, [("max.message.bytes", DELETE, None), ("retention.ms", SET, "60000")],
                        resource_type=2, name="t")).error_code == ErrorCode.NONE
    assert broker.metadata.topics_by_name["t"].configs == {"retention.ms": "60000"}
    assert (await produce_to(client, "t", big)).error_code == ErrorCode.NONE

    for change, code, words in [(("no.such.key", SET, "1"), ErrorCode.INVALID_CONFIG, "no.such.key"),
                                (("retention.ms", SET, "soon"), ErrorCode.INVALID_CONFIG, "retention.ms"),
                                (("retention.ms", APPEND, "5"), ErrorCode.INVALID_CONFIG, "not LIST"),
                                (("cleanup.policy", 9, "compact"), ErrorCode.INVALID_REQUEST, "operation 9")]:
        refused = await alter(client, [change], resource_type=2, name="t")
        assert refused.error_code == code and words in refused.error_message
    assert (await alter(client, [("retention.ms", SET, "1")], resource_type=2, name="t",
                        validate_only=True)).error_code == ErrorCode.NONE
    assert broker.metadata.topics_by_name["t"].configs == {"retention.ms": "60000"}  # nothing changed by those


async def test_append_and_subtract_change_a_list_config_from_its_current_value(broker: Broker,
                                                                             client: KafkaClient) -> None:
    """APPEND adds the items not there yet to the topic's value, the broker default while it has no override
    (cleanup.policy: delete); SUBTRACT removes them, all of them too (the empty list); the partition's log follows
    (compaction on, then off);
    confluent-kafka's AdminClient sends both as users do."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    await create_topic(client, "listed")
    log = broker.replica_manager.get("listed", 0).log
    appended = await alter(client, [("cleanup.policy", APPEND, "compact,delete")], resource_type=2, name="listed")
    assert appended.error_code == ErrorCode.NONE
    assert broker.metadata.topics_by_name["listed"].configs == {"cleanup.policy": "delete,compact"}
    assert log.config.cleanup_policy == {"delete", "compact"}
    subtracted = await alter(client, [("cleanup.policy", SUBTRACT, "delete,absent")], resource_type=2, name="listed")
    assert subtracted.error_code == ErrorCode.NONE
    assert broker.metadata.topics_by_name["listed"].configs == {"cleanup.policy": "compact"}
    assert log.config.cleanup_policy == {"compact"}

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.advertised.port}"})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "listed", incremental_configs=[
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND)])
    (future,) = admin.incremental_alter_configs([resource]).values()
    future.result(15)
    (described,) = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "listed")]).values()
    assert described.result(15)["cleanup.policy"].value == "compact,delete"

    # subtracting every policy leaves the empty list, as Kafka takes it: neither retention nor compaction
    emptied = await alter(client, [("cleanup.policy", SUBTRACT, "compact,delete")], resource_type=2, name="listed")
    assert emptied.error_code == ErrorCode.NONE
    assert log.config.cleanup_policy == frozenset()
    # file.delete.delay.ms (confluent-kafka-python's own suite sets it), the LogConfig's deleted-file delay
    delayed = await alter(client, [("file.delete.delay.ms", SET, "12345")], resource_type=2, name="listed")
    assert delayed.error_code == ErrorCode.NONE
    assert log.config.file_delete_delay_ms == 12345


async def test_alter_configs_replaces_a_topics_whole_config_set_and_refuses_brokers(broker: Broker,
                                                                                    client: KafkaClient) -> None:
    """AlterConfigs (API 33), the legacy whole-set form: keys left out go back to their defaults."""
    await create_topic(client, "t", retention_ms="86400000", max_message_bytes="5000")
    request = alter_configs.REQUEST

    async def replace(resource_type: int, name: str, configs: dict[str, str]) -> Any:
        body = request.cls(validate_only=False, resources=[request.AlterConfigsResource(
            resource_type=resource_type, resource_name=name,
            configs=[request.AlterableConfig(name=k, value=v) for k, v in configs.items()])])
        return (await client.request(alter_configs.API, 2, body)).responses[0]

    assert (await replace(2, "t", {"retention.ms": "60000"})).error_code == ErrorCode.NONE
    assert broker.metadata.topics_by_name["t"].configs == {"retention.ms": "60000"}  # max.message.bytes: default
    refused = await replace(4, "0", {REPLICATION_PAUSED: "true"})
    assert refused.error_code == ErrorCode.INVALID_REQUEST and "IncrementalAlterConfigs" in refused.error_message
    assert not broker.faults.replication_paused


async def test_fault_hooks_are_off_unless_the_broker_was_started_with_them() -> None:
    """fault.hooks.enable defaults to false: a client that reaches the broker cannot pause its replication or
    cut its power (INVALID_CONFIG naming the switch); the broker goes on serving."""
    hooks = [(REPLICATION_PAUSED, "true"), (POWER_LOSS, "true"), ("fault.request.produce", "drop")]
    async with (testing.broker(fault_hooks_enable=False) as started,
                await KafkaClient.connect(started.bootstrap_servers) as client):
        for key, value in hooks:
            refused = await alter(client, [(key, SET, value)])
            assert refused.error_code == ErrorCode.INVALID_CONFIG
            assert "fault.hooks.enable=true" in refused.error_message
        assert not started.server.faults.replication_paused and not started.server.faults.requests
        await create_topic(client, "still-serving")


def test_every_catalogued_fault_is_listed_by_the_admin_help() -> None:
    result = subprocess.run([sys.executable, "-m", "epoch_broker", "admin", "fault", "--help"], capture_output=True,
                            text=True, timeout=60, check=True)
    for spec in CATALOGUE:
        assert spec.key in result.stdout


async def test_validate_only_and_rejected_changes_apply_nothing(broker: Broker, client: KafkaClient) -> None:
    assert (await alter(client, [(REPLICATION_PAUSED, SET, "true")], validate_only=True)).error_code == 0
    # the good first change of a resource is not applied when a later one is rejected
    bad_value = await alter(client, [(REPLICATION_PAUSED, SET, "true"), (HIGH_WATERMARK_HELD, SET, "yes")])
    assert bad_value.error_code == ErrorCode.INVALID_CONFIG and HIGH_WATERMARK_HELD in bad_value.error_message
    assert not broker.faults.replication_paused

    unknown = await alter(client, [("log.retention.ms", SET, "1")])
    assert unknown.error_code == ErrorCode.INVALID_CONFIG and "log.retention.ms" in unknown.error_message
    append = await alter(client, [(REPLICATION_PAUSED, APPEND, "true")])
    assert append.error_code == ErrorCode.INVALID_REQUEST and REPLICATION_PAUSED in append.error_message
    other_node = await alter(client, [(REPLICATION_PAUSED, SET, "true")], name="7")
    assert other_node.error_code == ErrorCode.INVALID_REQUEST and "'7'" in other_node.error_message
    topic = await alter(client, [("retention.ms", SET, "1")], resource_type=2, name="t")
    assert (topic.error_code, topic.error_message) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "topic 't' does not exist")
    assert not broker.faults.replication_paused and not broker.faults.high_watermark_held


async def latest_offset(client: KafkaClient, topic: str) -> int:
    request = list_offsets.REQUEST.cls(replica_id=-1, topics=[list_offsets.REQUEST.ListOffsetsTopic(
        name=topic, partitions=[list_offsets.REQUEST.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    answer = (await client.request(list_offsets.API, 7, request)).topics[0].partitions[0]
    assert answer.error_code == ErrorCode.NONE, answer
    return answer.offset


async def test_power_loss_exits_137_and_keeps_only_what_was_fsynced(tmp_path: Path) -> None:
    process = start_broker(tmp_path)
    try:
        async with await KafkaClient.connect(process.bootstrap) as client:
            await client.negotiate()
            await create_topic(client, "synced", flush_messages="1")  # fsync after every append
            await create_topic(client, "unsynced")  # never fsynced before the cut
            for topic in ("synced", "unsynced"):
                for i in range(3):
                    assert (await produce_to(client, topic, batch(b"v%d" % i), acks=1)).error_code == 0
        assert await alter_faults(process.bootstrap, 0, {POWER_LOSS: "now"}) == "connection closed"
        assert process.proc is not None and process.proc.wait(10) == POWER_LOSS_EXIT_STATUS
        process.proc = None

        process.start()
        async with await KafkaClient.connect(process.bootstrap) as client:
            assert await latest_offset(client, "synced") == 3
            assert await latest_offset(client, "unsynced") == 0
        assert "no clean-shutdown marker" in process.log_path.read_text()
    finally:
        process.stop()
