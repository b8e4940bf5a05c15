"""Logs worth reading: quiet about routine (connections, per-partition loads), a clean start says so, the state
changes that matter (fencing, elections, ISR changes) at INFO with their reason and timing, and `log.format=json`
for machines, its EVENT lines still parsed by `events.parse`. Real processes, their real stderr."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from confluent_kafka import Consumer, Producer

from epoch_broker.broker import events
from epoch_broker.client.aio import KafkaClient
from tests.broker.conftest import create_topic
from tests.cluster.support import create_topic as create_cluster_topic
from tests.cluster.support import start_cluster, wait_state
from tests.helpers import BrokerProcess, start_broker, wait_for

FAST = {"offsets.topic.num.partitions": "1"}
TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+: ")
CONTROLLER = 1000  # drill/launcher.py's CONTROLLER_NODE_ID


def log_of(process: BrokerProcess) -> str:
    return process.log_path.read_text(errors="replace")


def info_lines(text: str) -> list[str]:
    """The lines logged at INFO or above (a traceback's own lines are not log lines)."""
    return [line for line in text.splitlines() if (m := TEXT_LINE.match(line)) and m.group(1) != "DEBUG"]


async def created(process: BrokerProcess, topic: str) -> None:
    async with await KafkaClient.connect(process.bootstrap) as client:
        await client.negotiate()
        await create_topic(client, topic)


def test_a_fresh_start_on_an_empty_directory_says_so_and_recovers_nothing(tmp_path: Path) -> None:
    process = start_broker(tmp_path, FAST)
    try:
        text = log_of(process)
        assert f"no partition logs yet: a fresh start in {tmp_path / 'data'}" in text
        assert "recovered" not in text
    finally:
        assert process.stop() == 0


async def test_clients_that_connect_and_go_leave_no_info_line(tmp_path: Path) -> None:
    process = start_broker(tmp_path, {**FAST, "connections.max.idle.ms": "300"})
    try:
        await created(process, "t")
        await wait_for(lambda: "leading in epoch 0" in log_of(process), what="t-0 led")
        before = len(log_of(process))
        for i in range(3):  # librdkafka: ApiVersions v3 (client software), Metadata, Produce, then gone
            producer = Producer({"bootstrap.servers": process.bootstrap, "client.id": f"producer-{i}"})
            producer.produce("t", f"record {i}".encode())
            assert producer.flush(10) == 0
            del producer
        for _ in range(3):  # ours: ApiVersions v3 and away
            async with await KafkaClient.connect(process.bootstrap) as client:
                await client.negotiate()
        # one that says nothing: the broker closes it once idle (connections.max.idle.ms)
        reader, writer = await asyncio.open_connection("127.0.0.1", process.port)
        assert await asyncio.wait_for(reader.read(), 10) == b""
        writer.close()
        assert info_lines(log_of(process)[before:]) == []
    finally:
        assert process.stop() == 0


async def test_a_groups_first_use_loads_fifty_offsets_partitions_with_one_info_line(tmp_path: Path) -> None:
    process = start_broker(tmp_path)  # offsets.topic.num.partitions: Kafka's 50
    try:
        await created(process, "t")
        producer = Producer({"bootstrap.servers": process.bootstrap})
        producer.produce("t", b"hello")
        assert producer.flush(10) == 0
        consumer = Consumer({"bootstrap.servers": process.bootstrap, "group.id": "g",
                             "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe(["t"])
            message = await wait_for(lambda: consumer.poll(0.2), timeout=20, what="a record through group g")
            assert message.error() is None and message.value() == b"hello"
        finally:
            consumer.close()
        lines = info_lines(log_of(process))
        assert not [line for line in lines if re.search(r"__consumer_offsets-\d", line)]  # none per partition
        assert any(line.endswith("__consumer_offsets: leading 50 partitions: 0-49 in epoch 0 from offset 0")
                   for line in lines)
        loads = [line for line in lines if "__consumer_offsets" in line and "load" in line]
        assert len(loads) == 1, loads
        assert re.search(r"group coordinator loaded 50 __consumer_offsets partitions: 0 groups, 0 records in \d+ ms$",
                         loads[0]), loads
    finally:
        assert process.stop() == 0


async def test_json_logs_are_one_object_a_line_and_their_events_still_parse(tmp_path: Path) -> None:
    process = start_broker(tmp_path, {**FAST, "log.format": "json"})
    try:
        await created(process, "t")
        process.restart()  # its leadership of t-0 comes back in a new leader epoch: an EVENT line
    finally:
        assert process.stop() == 0
    lines = log_of(process).splitlines()
    assert lines
    objects = [json.loads(line) for line in lines]  # every line: one JSON object
    for line in objects:
        assert {"ts", "level", "logger", "msg"} <= line.keys(), line
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["ts"]), line
        assert line["node"] == 0
    assert any(line["msg"].startswith("no partition logs yet: a fresh start") for line in objects)
    parsed = [event for line in lines if (event := events.parse(line)) is not None]
    (leader,) = [e for e in parsed if e["kind"] == "leader" and e["topic"] == "t"]
    assert (leader["partition"], leader["leader"], leader["epoch"], leader["why"]) == ("0", "0", "1",
                                                                                      "broker 0 registered")
    # the quoted value (json.dumps escaped its quotes inside the msg string) comes back whole, as from text
    raw = next(o["msg"] for o in objects if o["logger"] == "epoch_broker.events" and "topic=t " in o["msg"])
    assert 'why="broker 0 registered"' in raw and events.parse(raw) == leader


async def test_a_killed_broker_is_fenced_and_its_partitions_move_on_with_reasons_and_timings(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path, 3)
    try:
        # t-p on [p, p+1, p+2]: broker 1 leads t-1 and follows t-0 and t-2
        await create_cluster_topic(cluster, "t", partitions=3)
        cluster.kill(1)  # SIGKILL: its heartbeat connection closes, the controller fences it after the grace
        await wait_state(cluster, "t", lambda s: s.leader == 2 and 1 not in s.isr, partition=1, what="t-1 led by 2")
        for p in (0, 2):
            await wait_state(cluster, "t", lambda s: 1 not in s.isr, partition=p, what=f"t-{p} without 1")
        lines = info_lines(cluster.log_text(CONTROLLER))
        fence = next(line for line in lines if "fencing broker 1 (" in line)
        why = re.search(r"fencing broker 1 \((.*)\)$", fence).group(1)  # type: ignore[union-attr]
        assert re.search(r"\d+ ms", why), fence
        assert any(line.endswith(f"t-1: leader 1 -> 2 in leader epoch 1, ISR [2, 0] ({why})") for line in lines), lines
        for p, before, after in ((0, [0, 1, 2], [0, 2]), (2, [2, 0, 1], [2, 0])):
            assert any(line.endswith(f"t-{p}: ISR {before} -> {after} in leader epoch 0 (broker 1 fenced)")
                       for line in lines), lines
        for node in (0, 2, CONTROLLER):  # a login per connection is routine: only a principal's first is INFO
            logins = re.findall(r"authenticated as (\S+) on (\w+)", "\n".join(info_lines(cluster.log_text(node))))
            assert logins and len(logins) == len(set(logins)), logins
    finally:
        cluster.stop()
