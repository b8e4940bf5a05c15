"""Fault hooks set with IncrementalAlterConfigs (broker/handlers/incremental_alter_configs.py): the boolean
hooks on an in-process broker, and fault.power.loss on a real process (it exits, and only fsynced records
survive)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from epoch_broker.broker.app import Broker
from epoch_broker.broker.faults import HIGH_WATERMARK_HELD, POWER_LOSS, POWER_LOSS_EXIT_STATUS, REPLICATION_PAUSED
from epoch_broker.client.aio import KafkaClient
from epoch_broker.drill.admin import alter_faults
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import incremental_alter_configs, list_offsets

from tests.broker.conftest import batch, create_topic, produce_to
from tests.helpers import start_broker

REQ = incremental_alter_configs.REQUEST
SET, DELETE, APPEND = 0, 1, 2


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
    assert (topic.error_code, topic.error_message) == (ErrorCode.INVALID_REQUEST, "topic configs are not alterable yet")
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
