"""The broker as a process: epochs across restarts, bad input on the live server, durability, config errors."""

from __future__ import annotations

import asyncio
import socket
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

from epoch_broker.client.aio import KafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import fetch, list_offsets, metadata, offset_for_leader_epoch
from epoch_broker.protocol.records import iter_batches, iter_records
from tests.broker.conftest import batch, create_topic, produce_to
from tests.helpers import REPO, BrokerProcess, start_broker

FAST = {"offsets.topic.num.partitions": "1"}


async def connect(process: BrokerProcess) -> KafkaClient:
    client = await KafkaClient.connect(process.bootstrap)
    await client.negotiate()
    return client


async def fetch_one(client: KafkaClient, offset: int, *, current_leader_epoch: int = -1,
                    last_fetched_epoch: int = -1, version: int = 12) -> Any:
    request = fetch.REQUEST.cls(max_wait_ms=0, min_bytes=1, max_bytes=1 << 24, topics=[fetch.REQUEST.FetchTopic(
        topic="t", partitions=[fetch.REQUEST.FetchPartition(
            partition=0, current_leader_epoch=current_leader_epoch, fetch_offset=offset,
            last_fetched_epoch=last_fetched_epoch, partition_max_bytes=1 << 20)])])
    return (await client.request(fetch.API, version, request)).responses[0].partitions[0]


async def list_latest(client: KafkaClient, current_leader_epoch: int) -> Any:
    request = list_offsets.REQUEST.cls(replica_id=-1, topics=[list_offsets.REQUEST.ListOffsetsTopic(
        name="t", partitions=[list_offsets.REQUEST.ListOffsetsPartition(
            partition_index=0, timestamp=-1, current_leader_epoch=current_leader_epoch)])])
    return (await client.request(list_offsets.API, 7, request)).topics[0].partitions[0]


async def epoch_end(client: KafkaClient, current_leader_epoch: int, leader_epoch: int) -> Any:
    request = offset_for_leader_epoch.REQUEST.cls(topics=[offset_for_leader_epoch.REQUEST.OffsetForLeaderTopic(
        topic="t", partitions=[offset_for_leader_epoch.REQUEST.OffsetForLeaderPartition(
            partition=0, current_leader_epoch=current_leader_epoch, leader_epoch=leader_epoch)])])
    return (await client.request(offset_for_leader_epoch.API, 2, request)).topics[0].partitions[0]


async def test_each_restart_bumps_the_leader_epoch_and_checkpoints_its_start_offset(tmp_path: Path) -> None:
    process = start_broker(tmp_path, FAST)
    try:
        client = await connect(process)
        await create_topic(client, "t")
        await produce_to(client, "t", batch(b"a", b"b", b"c"))
        await client.close()
        process.restart()
        client = await connect(process)
        answer = await client.request(metadata.API, 12, metadata.REQUEST.cls(
            topics=[metadata.REQUEST.MetadataRequestTopic(name="t")]))
        assert answer.topics[0].partitions[0].leader_epoch == 1
        checkpoint = (tmp_path / "data" / "t-0" / "leader-epoch-checkpoint").read_text().split("\n")
        assert checkpoint[:4] == ["0", "2", "0 0", "1 3"]
        await produce_to(client, "t", batch(b"d"))
        data = await fetch_one(client, 0)
        payload = bytes(data.records)
        assert [h.partition_leader_epoch for _, h in iter_batches(payload)] == [0, 1]
        # KIP-320: a stale epoch is fenced, a future one unknown, for all three APIs.
        for stale, code in ((0, ErrorCode.FENCED_LEADER_EPOCH), (2, ErrorCode.UNKNOWN_LEADER_EPOCH)):
            assert (await fetch_one(client, 0, current_leader_epoch=stale)).error_code == code
            assert (await list_latest(client, stale)).error_code == code
            assert (await epoch_end(client, stale, 0)).error_code == code
        ended = await epoch_end(client, 1, 0)
        assert (ended.leader_epoch, ended.end_offset) == (0, 3)
        # A fetcher that believes epoch 0 went on past offset 3 has diverged: epoch 0 ended at 3 here.
        diverged = await fetch_one(client, 4, last_fetched_epoch=0, current_leader_epoch=1)
        assert (diverged.diverging_epoch.epoch, diverged.diverging_epoch.end_offset) == (0, 3)
        assert len(diverged.records) == 0
        in_line = await fetch_one(client, 3, last_fetched_epoch=0, current_leader_epoch=1)
        assert in_line.diverging_epoch.epoch == -1 and len(in_line.records) > 0
        await client.close()
    finally:
        assert process.stop() == 0


async def raw_exchange(port: int, data: bytes) -> bytes:
    """Send bytes, return whatever comes back before the broker closes the connection (or 1 s passes)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    try:
        return await asyncio.wait_for(reader.read(), 1.0)
    except (TimeoutError, ConnectionError):
        return b"?"
    finally:
        writer.close()


async def test_bad_input_closes_the_connection_and_the_broker_keeps_serving(tmp_path: Path) -> None:
    process = start_broker(tmp_path, {**FAST, "socket.request.max.bytes": "65536"})
    try:
        client = await connect(process)
        await create_topic(client, "t")
        await produce_to(client, "t", batch(b"a"))
        header = struct.pack(">hhih", 3, 12, 1, -1)
        bad_inputs = {
            "garbage": b"\x00\x00\x00\x10" + b"\xde\xad\xbe\xef" * 4,
            "over the limit": struct.pack(">i", 1 << 20) + b"x" * 100,
            "negative size": struct.pack(">i", -5),
            "truncated request": struct.pack(">i", len(header) + 1) + header + b"\x05",
            "unknown api key": struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 1, -1),
            "unsupported version": struct.pack(">i", 10) + struct.pack(">hhih", 0, 99, 1, -1),
        }
        for name, data in bad_inputs.items():
            assert await raw_exchange(process.port, data) == b"", name
        assert (await produce_to(client, "t", batch(b"b"), acks=2)).error_code == ErrorCode.INVALID_REQUIRED_ACKS
        corrupt = batch(b"c")
        corrupt[-2] ^= 0x55
        assert (await produce_to(client, "t", corrupt)).error_code == ErrorCode.CORRUPT_MESSAGE
        other = await connect(process)
        latest = await list_latest(other, -1)
        assert (latest.error_code, latest.offset) == (0, 1)  # the log is unchanged
        await other.close()
        await client.close()
    finally:
        process.stop()


async def test_acknowledged_records_survive_kill_9_with_fsync_every_append(tmp_path: Path) -> None:
    process = start_broker(tmp_path, {**FAST, "log.flush.every.append": "true"})
    try:
        client = await connect(process)
        await create_topic(client, "t")
        acknowledged = []
        for i in range(50):
            response = await produce_to(client, "t", batch(f"m{i}".encode()))
            assert response.error_code == 0
            acknowledged.append(f"m{i}".encode())
        await client.close()
        process.kill()
        process.start()
        client = await connect(process)
        data = await fetch_one(client, 0)
        payload = bytes(data.records)
        values = [r.value for pos, h in iter_batches(payload) for r in iter_records(payload, pos, h)]
        assert values == acknowledged
        await client.close()
    finally:
        process.stop()


def test_a_bad_config_value_exits_2_with_one_line_naming_the_key(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "epoch_broker", "serve", "--override", "num.partitions=x"],
                            capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(REPO)}, timeout=30)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines == ["epoch-broker: invalid value for num.partitions: 'x' (expected an integer >= 1)"]


def test_environment_errors_exit_2_with_one_line_naming_them_and_no_traceback(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    data, a_file = f"log.dirs={tmp_path / 'data'}", tmp_path / "a-file"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cases = {
            f"('127.0.0.1', {port}): address already in use": [f"listeners=PLAINTEXT://127.0.0.1:{port}", data],
            f"log dir {a_file} is not a directory": ["listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={a_file}"],
            f"log dir {a_file / 'logs'} cannot be created: Not a directory": [
                "listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={a_file / 'logs'}"],
        }
        for message, overrides in cases.items():
            _assert_one_line_and_2(tmp_path, ["serve", *[arg for item in overrides for arg in ("--override", item)]],
                                   message)
    _assert_one_line_and_2(tmp_path, ["serve", "--log-level", "LOUD"],
                           "unknown --log-level 'LOUD' (one of DEBUG, INFO, WARNING, ERROR)")


def test_a_listener_it_cannot_serve_as_asked_is_refused_at_start_never_served_as_plaintext(tmp_path: Path) -> None:
    data = f"log.dirs={tmp_path / 'data'}"
    cases = {
        "listener SSL uses SSL but has no certificate: set ssl.keystore.location": ["listeners=SSL://127.0.0.1:0"],
        "listener EXTERNAL uses SASL_SSL but has no certificate": [
            "listeners=EXTERNAL://127.0.0.1:0", "listener.security.protocol.map=EXTERNAL:SASL_SSL"],
        "listener INTERNAL has no security protocol": ["listeners=INTERNAL://127.0.0.1:0"],
        "sasl.enabled.mechanisms for listener SASL_PLAINTEXT: GSSAPI,OAUTHBEARER not supported": [
            "listeners=SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=GSSAPI,OAUTHBEARER"],
        "listener.security.protocol.map: unknown security protocol in A:TLS": [
            "listeners=A://127.0.0.1:0", "listener.security.protocol.map=A:TLS"],
        "listeners: two listeners share a port": ["listeners=PLAINTEXT://127.0.0.1:9,B://127.0.0.1:9",
                                                  "listener.security.protocol.map=B:PLAINTEXT"],
        "ssl.keystore.location /nonexistent.pem: not a readable file": [
            "listeners=SSL://127.0.0.1:0", "ssl.keystore.location=/nonexistent.pem"],
        "listener.name.plaintext.plain.sasl.jaas.config: JAAS config entry not terminated by semi-colon": [
            "listener.name.plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
            "required user_a=\"b\""],
        "listener.name.outside.ssl.client.auth: no listener named OUTSIDE": [
            "listener.name.outside.ssl.client.auth=none"],
    }
    for message, overrides in cases.items():
        _assert_one_line_and_2(tmp_path, ["serve", *[arg for item in [*overrides, data]
                                                     for arg in ("--override", item)]], message)
    named = BrokerProcess(tmp_path, {**FAST, "listener.security.protocol.map": "INTERNAL:PLAINTEXT"}, 0)
    named.overrides["listeners"] = f"INTERNAL://127.0.0.1:{named.port}"  # a named plaintext listener is fine
    named.start()
    try:
        with socket.create_connection(("127.0.0.1", named.port), timeout=5):
            pass
    finally:
        assert named.stop() == 0


def _assert_one_line_and_2(cwd: Path, argv: list[str], message: str) -> None:
    result = subprocess.run([sys.executable, "-m", "epoch_broker", *argv], capture_output=True, text=True, cwd=cwd,
                            env={"PYTHONPATH": str(REPO)}, timeout=30)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("epoch-broker: ") and message in last, result.stderr


def test_unknown_keys_are_warned_about_and_the_ready_line_names_the_port(tmp_path: Path) -> None:
    process = start_broker(tmp_path, {**FAST, "some.unknown.key": "1"})
    try:
        with socket.create_connection(("127.0.0.1", process.port), timeout=5):
            pass
    finally:
        assert process.stop() == 0
    assert "ignoring unknown config key some.unknown.key" in process.log_path.read_text()


async def test_topic_configs_altered_at_run_time_survive_a_restart(tmp_path: Path) -> None:
    """Altered while the broker runs, applied at once, and still in force (and described) after a restart: the
    controller keeps them in its metadata log."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

    from tests.broker.test_incremental_alter_configs import SET, alter

    process = start_broker(tmp_path, FAST)
    try:
        client = await connect(process)
        await create_topic(client, "t")
        big = batch(b"x" * 2000)
        changed = await alter(client, [("max.message.bytes", SET, "1000"), ("cleanup.policy", SET, "compact,delete")],
                              resource_type=2, name="t")
        assert changed.error_code == ErrorCode.NONE
        assert (await produce_to(client, "t", big)).error_code == ErrorCode.MESSAGE_TOO_LARGE
        await client.close()
        process.restart()
        client = await connect(process)
        assert (await produce_to(client, "t", big)).error_code == ErrorCode.MESSAGE_TOO_LARGE
        await client.close()
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        (future,) = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "t")]).values()
        described = await asyncio.to_thread(future.result, 30)
        for key, value in (("max.message.bytes", "1000"), ("cleanup.policy", "compact,delete")):
            assert (described[key].value, described[key].source) == (value, ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    finally:
        assert process.stop() == 0
