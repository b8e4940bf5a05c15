"""Kafka's limits on one broker process (issue 17, items 2-4, 8): partition counts per request, requests in
order and one at a time per connection, pipelining floods, connection churn, max.connections(.per.ip), the
open-files budget, and the environment errors that stop a start with one line and exit status 2."""

from __future__ import annotations

import asyncio
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from epoch_broker.client.aio import KafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import api_versions, create_partitions, create_topics, metadata
from epoch_broker.protocol.records import build_batch
from tests.broker.conftest import create_topic, produce_to
from tests.helpers import REPO, BrokerProcess, free_port, not_yet, start_broker, wait_for, wait_for_sync

MB = 1 << 20


def rss(process: BrokerProcess) -> int:
    return psutil.Process(process.pid).memory_info().rss


def client_connections(process: BrokerProcess) -> list[object]:
    """The connections the broker holds on its client listener (not yet closed on its side)."""
    return [c for c in psutil.Process(process.pid).net_connections("tcp")
            if c.laddr and c.laddr.port == process.port and c.status != psutil.CONN_LISTEN]


@pytest.fixture
def broker(tmp_path: Path) -> BrokerProcess:
    process = start_broker(tmp_path, {"offsets.topic.num.partitions": "1"})
    yield process
    process.stop()


async def connect(process: BrokerProcess) -> KafkaClient:
    client = await KafkaClient.connect(process.bootstrap)
    await client.negotiate()
    return client


# -- 2: partition counts ---------------------------------------------------------------------------------

@pytest.mark.parametrize("validate_only", [True, False])
async def test_two_billion_partitions_are_refused_at_once_and_cost_no_memory(broker: BrokerProcess,
                                                                            validate_only: bool) -> None:
    before = rss(broker)
    async with await connect(broker) as client:
        request = create_topics.REQUEST.cls(timeout_ms=10_000, validate_only=validate_only, topics=[
            create_topics.REQUEST.CreatableTopic(name="huge", num_partitions=2**31 - 1, replication_factor=1,
                                                 assignments=[], configs=[])])
        answer = await asyncio.wait_for(client.request(create_topics.API, 7, request), 10)
        assert answer.topics[0].error_code == ErrorCode.POLICY_VIOLATION
        await create_topic(client, "small")
        grow = create_partitions.REQUEST.cls(timeout_ms=10_000, validate_only=validate_only, topics=[
            create_partitions.REQUEST.CreatePartitionsTopic(name="small", count=2**31 - 1, assignments=None)])
        grown = await asyncio.wait_for(client.request(create_partitions.API, 3, grow), 10)
        assert grown.results[0].error_code == ErrorCode.POLICY_VIOLATION
        assert (await client.request(metadata.API, 12, metadata.REQUEST.cls(topics=None))).topics[0].name == "small"
    assert rss(broker) - before < 20 * MB
    assert not (broker.data_dir / "huge-0").exists()


# -- 3 and 8: one request at a time per connection, in order ----------------------------------------------

async def test_a_flood_of_pipelined_requests_never_read_keeps_memory_bounded_and_others_served(
        broker: BrokerProcess) -> None:
    header = struct.pack(">hhih", api_versions.API.key, 0, 1, -1)
    frame = struct.pack(">i", len(header)) + header
    flood = frame * 50_000
    before = rss(broker)
    with socket.create_connection(("127.0.0.1", broker.port)) as greedy:
        greedy.setblocking(False)
        sent = 0

        def flooded() -> object:  # up to 400,000 requests, never reading
            nonlocal sent
            try:
                sent += greedy.send(flood[sent % len(flood):])
            except BlockingIOError:  # the broker stopped reading us: what we wanted
                return True
            return sent >= len(flood) * 8 or not_yet(f"{sent} bytes sent")

        wait_for_sync(flooded, 20, interval=0, what="the broker to stop reading the flood, or all of it sent")
        async with await connect(broker) as other:  # another client is served while the flood sits there
            started = time.monotonic()
            await asyncio.wait_for(other.request(metadata.API, 12, metadata.REQUEST.cls(topics=None)), 10)
            served_s = time.monotonic() - started
        assert rss(broker) - before < 50 * MB, "the broker buffered the flood"
    assert served_s < 10  # a liveness bound, generous: the answer is not stuck behind the flood


def test_a_connection_reads_again_once_the_requests_pipelined_in_one_write_are_answered(
        broker: BrokerProcess) -> None:
    """Ten ApiVersions in one write: each is answered at once (no task), the next taken in a later callback with
    reading paused meanwhile; once the last is answered the connection reads again, so an eleventh is answered."""

    def api_versions_frame(correlation_id: int) -> bytes:
        header = struct.pack(">hhih", api_versions.API.key, 0, correlation_id, -1)
        return struct.pack(">i", len(header)) + header

    def read_answer(sock: socket.socket) -> int:
        size = struct.unpack(">i", _read_exactly(sock, 4))[0]
        return int(struct.unpack(">i", _read_exactly(sock, size)[:4])[0])

    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(b"".join(api_versions_frame(i) for i in range(10)))
        assert [read_answer(sock) for _ in range(10)] == list(range(10))
        sock.sendall(api_versions_frame(10))
        assert read_answer(sock) == 10


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return data


async def test_pipelined_requests_take_effect_in_the_order_sent(broker: BrokerProcess) -> None:
    """Without waiting for answers, 200 produces to one partition on one connection: their offsets follow the
    order sent (Kafka handles one request per connection at a time)."""
    async with await connect(broker) as client:
        await create_topic(client, "ordered")
        values = [b"%d" % i for i in range(200)]
        answers = await asyncio.gather(*(produce_to(client, "ordered", build_batch([(None, v, [], None)]), acks=1)
                                         for v in values))
    assert [a.base_offset for a in answers] == list(range(200))


# -- 4: connections ------------------------------------------------------------------------------------------

async def test_closed_connections_leave_nothing_behind(broker: BrokerProcess) -> None:
    for _ in range(300):  # warm up allocator pools
        socket.create_connection(("127.0.0.1", broker.port)).close()

    def all_closed() -> object:
        held = client_connections(broker)
        return not held or not_yet(f"{len(held)} held")

    await wait_for(all_closed, what="the broker to have closed the warm-up connections")  # before measuring
    before = rss(broker)
    for _ in range(5_000):
        with socket.create_connection(("127.0.0.1", broker.port)) as sock:
            sock.sendall(struct.pack(">i", 10) + struct.pack(">hhih", api_versions.API.key, 0, 1, -1))
            sock.recv(1024)
    async with await connect(broker) as client:
        await client.request(metadata.API, 12, metadata.REQUEST.cls(topics=None))
    assert rss(broker) - before < 10 * MB


def accepted(port: int, count: int) -> list[socket.socket]:
    """Open `count` connections; returns those the broker kept and answered (it closes a refused one at once)."""
    sockets = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
    kept = []
    for sock in sockets:
        sock.settimeout(5)
        try:
            sock.sendall(struct.pack(">i", 10) + struct.pack(">hhih", api_versions.API.key, 0, 1, -1))
            answered = bool(sock.recv(4096))
        except OSError:  # reset by the broker
            answered = False
        if answered:
            kept.append(sock)
        else:
            sock.close()
    return kept


@pytest.mark.parametrize("key", ["max.connections", "max.connections.per.ip"])
async def test_connections_past_the_limit_are_closed_at_once(tmp_path: Path, key: str) -> None:
    process = start_broker(tmp_path, {key: "5"})
    try:
        kept = accepted(process.port, 8)
        assert len(kept) == 5
        for sock in kept:
            sock.close()
        # the places are freed as the broker sees the closes: a new connection is kept again
        await wait_for(lambda: [s.close() for s in accepted(process.port, 1)], timeout=30,
                       what="a freed place taken")
    finally:
        process.stop()
    assert "refusing connection" in process.log_path.read_text()


async def test_idle_connections_cannot_starve_the_logs_of_file_descriptors(tmp_path: Path) -> None:
    process = start_broker(tmp_path, {"offsets.topic.num.partitions": "1"}, open_files_limit=400)
    try:
        async with await connect(process) as client:
            await create_topic(client, "t", partitions=10)
            kept = accepted(process.port, 450)  # more than the process may open
            assert 0 < len(kept) < 400
            for partition in range(10):  # creating, appending and checkpointing go on
                answer = await produce_to(client, "t", build_batch([(None, b"v", [], None)]), partition=partition)
                assert answer.error_code == ErrorCode.NONE
            for sock in kept:
                sock.close()
    finally:
        assert process.stop() == 0  # a clean shutdown: every checkpoint written
    text = process.log_path.read_text()
    assert "file-descriptor budget" in text and "Too many open files" not in text


def test_logs_that_need_more_files_than_the_limit_stop_the_start_with_one_line(tmp_path: Path) -> None:
    process = start_broker(tmp_path, {"offsets.topic.num.partitions": "1"})
    try:
        async def make() -> None:
            async with await connect(process) as client:
                await create_topic(client, "many", partitions=100)  # 300 open files

        asyncio.run(make())
    finally:
        process.stop()
    limited = BrokerProcess(tmp_path, process.overrides, 0, open_files_limit=256)
    limited.port = process.port
    result = run_serve(tmp_path, limited, open_files_limit=256)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("epoch-broker: the partition logs hold 300 open files")


def run_serve(cwd: Path, process: BrokerProcess, open_files_limit: int | None = None,
              **overrides: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "epoch_broker", "serve"]
    for key, value in {**process.overrides, **overrides}.items():
        command += ["--override", f"{key}={value}"]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
                          preexec_fn=process._limit_open_files if open_files_limit else None)


def test_a_port_in_use_stops_the_start_with_one_line_and_status_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        process = BrokerProcess(tmp_path, {}, 0)
        result = run_serve(tmp_path, process, listeners=f"PLAINTEXT://127.0.0.1:{taken.getsockname()[1]}")
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("epoch-broker: cannot start:") and "address already in use" in last


def test_a_data_dir_that_is_a_file_stops_the_start_with_one_line_and_status_2(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    process = BrokerProcess(tmp_path, {}, 0)
    result = run_serve(tmp_path, process, listeners=f"PLAINTEXT://127.0.0.1:{free_port()}",
                       **{"log.dirs": str(blocker)})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("epoch-broker: ") and str(blocker) in result.stderr
