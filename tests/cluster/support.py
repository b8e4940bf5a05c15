"""Real cluster processes for integration tests: `start_cluster(tmp_path, brokers=3, overrides) -> Cluster`.

A controller and N brokers run as a user runs them, through drill/launcher.py's code (the same that
`epoch-broker cluster` and `epoch-broker admin` use), on free loopback ports, with their data, logs and
cluster.json under tmp_path/cluster. Processes are signalled and stopped by the pids in cluster.json: only
those this harness started. Requests go through drill/admin.py's helpers and client/aio.py's KafkaClient.

The helpers the cluster tests share live here too: creating a topic (and waiting for its leaders and ISRs),
a partition's state as one broker or any running broker answers Metadata, exact requests (Produce,
ListOffsets, Fetch, OffsetForLeaderEpoch), clearing a fault, and reading a replica's segment files.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from epoch_broker import testing
from epoch_broker.broker.config import BROKER_USER
from epoch_broker.client.aio import KafkaClient, Security
from epoch_broker.drill import admin, launcher
from epoch_broker.drill.admin import PartitionState
from epoch_broker.drill.replicas import whole_prefix
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import create_topics, fetch, find_coordinator, list_offsets, offset_for_leader_epoch
from epoch_broker.protocol.records import iter_batches, iter_records
from tests.broker.conftest import batch, produce_to
from tests.helpers import REPO, not_yet, wait_for, wait_for_sync

# A test parametrized by `metadata_store` runs with each controller store (tests/cluster/conftest.py).
METADATA_STORES = ["file", "zookeeper"]


class Cluster(testing.Cluster):
    """The shared cluster (epoch_broker/testing.py, what users get), with what the project's cluster tests add:
    process specs, raw clients per node, Metadata as one node answers it, the admin CLI, process logs."""

    def __init__(self, directory: Path, brokers: int, overrides: dict[str, str], metrics: bool = False,
                 controllers: int = 1, zookeeper: str = "") -> None:
        super().__init__(brokers, directory, overrides, metrics, controllers, zookeeper)
        self.directory = directory

    @property
    def bootstrap(self) -> str:
        return self.bootstrap_servers

    @property
    def controller(self) -> str:
        """The address of the active controller."""
        return self.controller_address()

    def broker(self, node: int) -> launcher.ProcessSpec:
        return self._cluster_file().process(node)

    def admin(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`epoch-broker admin --cluster DIR *args` as a user runs it."""
        return subprocess.run([sys.executable, "-m", "epoch_broker", "admin", "--cluster", str(self.directory), *args],
                              capture_output=True, text=True, timeout=60, cwd=REPO)

    async def set_fault(self, node: int, key: str, value: str) -> str:
        return await admin.alter_faults(self.broker(node).address, node, {key: value})

    @contextlib.asynccontextmanager
    async def client(self, node: int) -> AsyncIterator[KafkaClient]:
        """A KafkaClient to one node (broker or controller), versions negotiated."""
        async with await KafkaClient.connect(self.broker(node).address) as connected:
            await connected.negotiate()
            yield connected

    @contextlib.asynccontextmanager
    async def internal_client(self, node: int) -> AsyncIterator[KafkaClient]:
        """A KafkaClient to a broker's INTERNAL listener, logged in as the cluster's brokers are (its secret): to
        send what only brokers may send (a replica's fetch)."""
        port = int(re.findall(r"listener INTERNAL \(\w+\) on [\d.]+:(\d+)", self.log_text(node))[-1])
        security = Security(sasl_mechanism="SCRAM-SHA-512", username=BROKER_USER,
                            password=self._cluster_file().secret)
        async with await KafkaClient.connect(f"{self.broker(node).host}:{port}", security=security) as connected:
            await connected.negotiate()
            yield connected

    async def metadata(self) -> dict[tuple[str, int], admin.PartitionState]:
        """Leader, leader epoch, replicas and ISR of every partition, from the first running broker."""
        return (await admin.fetch_metadata(admin.running_brokers(self._cluster_file()))).partitions

    async def metadata_of(self, node: int) -> admin.ClusterMetadata:
        """Metadata v12 from one broker (its own cache), not from whichever answers first."""
        return await admin.fetch_metadata([self.broker(node).address], timeout_s=3.0)

    def log_text(self, node: int) -> str:
        """The whole log (stdout and stderr) of one process, broker or controller."""
        return Path(self.broker(node).log).read_text(errors="replace")

    def log_tails(self) -> str:
        return "\n".join(f"--- {spec.log} ---\n{launcher.log_tail(spec.log)}"
                         for spec in self._cluster_file().processes)


def start_cluster(tmp_path: Path, brokers: int = 3, overrides: dict[str, Any] | None = None,
                  metrics: bool = False, controllers: int = 1, zookeeper: str = "") -> Cluster:
    cluster = Cluster(Path(tmp_path) / "cluster", brokers,
                      {key: str(value) for key, value in (overrides or {}).items()}, metrics, controllers, zookeeper)
    cluster._start()
    return cluster


# --- topics and partition state -------------------------------------------------------------------------------

async def create_topic(cluster: Cluster, name: str, *, partitions: int = 1, assignments: list[list[int]] | None = None,
                       replication_factor: int | None = None, configs: dict[str, str] | None = None,
                       wait: bool = True) -> None:
    """CreateTopics v7, sent to the first replica of partition 0 (broker 0 without an assignment).

    Replicas: `assignments` (one replica list per partition, the first replica leads); or, with
    `replication_factor`, `partitions` placed by the controller; or by default `partitions` on every broker,
    rotated per partition (partition p on [p, p+1, ...] modulo the broker count) so that leaders spread.
    With `wait`, returns once every partition is led by its first replica with all its replicas in the ISR (as
    any running broker answers; with `replication_factor`: led by any broker with an ISR of that size)."""
    brokers = sorted(spec.node_id for spec in cluster.file.brokers)
    if replication_factor is not None:
        assert assignments is None, "either assignments or replication_factor"
        placed: list[list[int]] = []
    elif assignments is not None:
        placed, partitions = assignments, len(assignments)
    else:
        placed = [[brokers[(p + i) % len(brokers)] for i in range(len(brokers))] for p in range(partitions)]
    request = create_topics.REQUEST.cls(timeout_ms=10000, topics=[create_topics.REQUEST.CreatableTopic(
        name=name, num_partitions=-1 if placed else partitions,
        replication_factor=-1 if placed else replication_factor,
        assignments=[create_topics.REQUEST.CreatableReplicaAssignment(partition_index=p, broker_ids=replicas)
                     for p, replicas in enumerate(placed)],
        configs=[create_topics.REQUEST.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])])
    async with cluster.client(placed[0][0] if placed else brokers[0]) as client:
        answer = await client.request(create_topics.API, 7, request)
    assert answer.topics[0].error_code == ErrorCode.NONE, answer
    if not wait:
        return
    for p in range(partitions):
        leader, size = (placed[p][0], len(placed[p])) if placed else (None, replication_factor)
        await wait_state(cluster, name, lambda s, leader=leader, size=size: len(s.isr) == size and (
            s.leader == leader if leader is not None else s.leader >= 0),
            partition=p, what=f"{name}-{p} led by {'a broker' if leader is None else leader} with an ISR of {size}")


async def coordinator_of(cluster: Cluster, node: int, group: str) -> int:
    """The group's coordinator as broker `node` names it (FindCoordinator v4), -1 while it names none."""
    async with cluster.client(node) as client:
        answer = await client.request(find_coordinator.API, 4, find_coordinator.REQUEST.cls(
            key_type=0, coordinator_keys=[group]))
    (coordinator,) = answer.coordinators
    return coordinator.node_id if coordinator.error_code == ErrorCode.NONE else -1


async def partition_state(cluster: Cluster, topic: str, partition: int = 0,
                          accept: Callable[[PartitionState], bool] | None = None, *,
                          node: int | None = None) -> PartitionState | None:
    """`topic`-`partition` as broker `node` answers Metadata (by default: the first running broker that answers);
    None when unknown there or when `accept` refuses it."""
    partitions = (await cluster.metadata_of(node)).partitions if node is not None else await cluster.metadata()
    state = partitions.get((topic, partition))
    return state if state is not None and (accept is None or accept(state)) else None


async def wait_state(cluster: Cluster, topic: str, accept: Callable[[PartitionState], bool], *, what: str,
                     partition: int = 0, node: int | None = None, timeout: float = 10.0) -> PartitionState:
    """Poll `partition_state` until `accept` takes it, and return it."""
    return await wait_for(lambda: partition_state(cluster, topic, partition, accept, node=node), timeout=timeout,
                          what=what)


async def clear_fault(cluster: Cluster, node: int, key: str) -> None:
    assert await admin.alter_faults(cluster.broker(node).address, node, {}, clear=[key]) == "applied"


# --- exact requests (the answer of the one partition asked about) ---------------------------------------------

LATEST, EARLIEST = -1, -2  # ListOffsets timestamps
CONSUMER = -1  # the replica_id of a client's (not a broker's) request


async def produce(cluster: Cluster, node: int, topic: str, *values: bytes, partition: int = 0, acks: int = -1,
                  version: int = 10, current_leader_epoch: int = -1) -> Any:
    """One batch of `values` to `node` in one Produce request (tests/broker/conftest.py's produce_to)."""
    async with cluster.client(node) as client:
        return await produce_to(client, topic, batch(*values), partition=partition, acks=acks, version=version,
                                current_leader_epoch=current_leader_epoch)


async def produce_offset(cluster: Cluster, node: int, topic: str, *values: bytes, acks: int = -1) -> int:
    """`produce`, asserting that it succeeded; returns the batch's base offset."""
    answer = await produce(cluster, node, topic, *values, acks=acks)
    assert answer.error_code == ErrorCode.NONE, answer
    return answer.base_offset


async def list_offset(client: KafkaClient, topic: str, version: int, *, replica_id: int = CONSUMER,
                      timestamp: int = LATEST, partition: int = 0, current_leader_epoch: int = -1) -> Any:
    request = list_offsets.REQUEST.cls(replica_id=replica_id, isolation_level=0, topics=[
        list_offsets.REQUEST.ListOffsetsTopic(name=topic, partitions=[list_offsets.REQUEST.ListOffsetsPartition(
            partition_index=partition, current_leader_epoch=current_leader_epoch, timestamp=timestamp)])])
    return (await client.request(list_offsets.API, version, request)).topics[0].partitions[0]


async def fetch_request(client: KafkaClient, topic: str, *, version: int = 12, current_leader_epoch: int = -1,
                        fetch_offset: int = 0, last_fetched_epoch: int = -1) -> Any:
    """A consumer's Fetch of partition 0 (topic names, as kafka-python sends v12), without waiting."""
    request = fetch.REQUEST.cls(
        replica_id=CONSUMER, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, forgotten_topics_data=[], rack_id="",
        topics=[fetch.REQUEST.FetchTopic(topic=topic, partitions=[fetch.REQUEST.FetchPartition(
            partition=0, current_leader_epoch=current_leader_epoch, fetch_offset=fetch_offset,
            last_fetched_epoch=last_fetched_epoch, log_start_offset=-1, partition_max_bytes=1 << 20)])])
    return (await client.request(fetch.API, version, request)).responses[0].partitions[0]


async def offset_for_leader_epoch_request(client: KafkaClient, topic: str, *, version: int,
                                          current_leader_epoch: int, leader_epoch: int) -> Any:
    request = offset_for_leader_epoch.REQUEST.cls(replica_id=CONSUMER, topics=[
        offset_for_leader_epoch.REQUEST.OffsetForLeaderTopic(topic=topic, partitions=[
            offset_for_leader_epoch.REQUEST.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=current_leader_epoch, leader_epoch=leader_epoch)])])
    return (await client.request(offset_for_leader_epoch.API, version, request)).topics[0].partitions[0]


# --- a replica's segment files --------------------------------------------------------------------------------

class DiskBatch(NamedTuple):
    base_offset: int
    last_offset: int
    leader_epoch: int  # the batch's partition leader epoch
    values: list[bytes | None]


def partition_dir(cluster: Cluster, node: int, topic: str, partition: int = 0) -> Path:
    return Path(cluster.broker(node).data_dir) / f"{topic}-{partition}"


def segment_bytes(cluster: Cluster, node: int, topic: str, partition: int = 0) -> bytes:
    """The partition's segment files, in offset order: every byte a restart would find."""
    return b"".join(path.read_bytes() for path in sorted(partition_dir(cluster, node, topic, partition).glob("*.log")))


def parse_batches(data: bytes) -> list[DiskBatch]:
    """The whole batches in `data` (segment files or a Fetch answer's records), as drill/replicas.py reads them."""
    whole = whole_prefix(data)
    return [DiskBatch(h.base_offset, h.base_offset + h.last_offset_delta, h.partition_leader_epoch,
                      [r.value for r in iter_records(whole, position, h)]) for position, h in iter_batches(whole)]


def disk_batches(cluster: Cluster, node: int, topic: str, partition: int = 0) -> list[DiskBatch]:
    """Every whole batch in a replica's segment files, read as another process sees them."""
    return parse_batches(segment_bytes(cluster, node, topic, partition))


def disk_log_end(cluster: Cluster, node: int, topic: str, partition: int = 0) -> int:
    batches = disk_batches(cluster, node, topic, partition)
    return batches[-1].last_offset + 1 if batches else 0


# --- a numbered idempotent producer and its check ------------------------------------------------------------

@dataclass
class NumberedProducer:
    """An idempotent acks=all confluent-kafka producer writing "<partition>:<n>" to each partition of `topic` in
    turn, n counting up per partition, in a thread, until stopped; the delivery callbacks are kept."""

    bootstrap: str
    topic: str
    partitions: int
    acked: dict[int, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))  # p: (n, offset)
    failed: list[tuple[int, int, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # fatal errors reported by the client
    sent: list[int] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    producer: Any = None
    thread: threading.Thread | None = None

    def acked_count(self) -> int:
        return sum(len(records) for records in self.acked.values())

    def _delivered(self, error: KafkaError | None, message: Any) -> None:
        partition, number = (int(part) for part in message.value().decode().split(":"))
        if error is None:
            self.acked[partition].append((number, message.offset()))
        else:
            self.failed.append((partition, number, str(error)))

    def _error(self, error: KafkaError) -> None:
        if error.fatal():
            self.errors.append(str(error))

    def start(self) -> NumberedProducer:
        self.sent = [0] * self.partitions
        self.thread = threading.Thread(target=self.run, name="numbered-producer")
        self.thread.start()
        return self

    async def stop_sending(self) -> None:
        """Stop, and settle what was sent while the cluster still runs (called in a `finally`: a failed test's
        producer left with records in flight would hold up the test process's exit in librdkafka's destroy)."""
        self.stop.set()
        if self.thread is not None:
            await asyncio.to_thread(self.thread.join, 10)
        if self.producer is not None:
            await asyncio.to_thread(self._settle)

    def _settle(self) -> None:
        if self.producer.flush(60):
            self.producer.purge()  # each purged record reaches `failed` through its callback
            self.producer.poll(0)

    async def flush_and_check(self) -> None:
        """Every record sent was delivered, and the client reported no error."""
        assert self.producer is not None
        assert await asyncio.to_thread(self.producer.flush, 60) == 0
        assert self.errors == [] and self.failed == []

    def run(self) -> None:
        self.producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5, "message.timeout.ms": 60000,
                                  "topic.metadata.refresh.interval.ms": 1000, "error_cb": self._error})
        n = 0
        while not self.stop.is_set():
            partition = n % self.partitions
            value = f"{partition}:{self.sent[partition]}".encode()
            try:
                self.producer.produce(self.topic, value, partition=partition, on_delivery=self._delivered)
            except BufferError:
                self.producer.poll(0.1)
                continue
            self.sent[partition] += 1
            n += 1
            self.producer.poll(0)
            time.sleep(0.002)  # a few hundred records a second: a steady load, not a flood on two cores


def consume_numbered(bootstrap: str, topic: str, ends: dict[int, int]) -> dict[int, list[tuple[int, int]]]:
    """Every record NumberedProducer wrote to each partition of `ends`, from the beginning up to its high
    watermark (`ends`): partition -> [(n, offset)]."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "durability-check",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        records: dict[int, list[tuple[int, int]]] = {p: [] for p in ends}
        positions = dict.fromkeys(ends, 0)

        def read() -> object:
            if all(positions[p] >= ends[p] for p in ends):
                return True
            for message in consumer.consume(num_messages=1000, timeout=1.0):
                assert message.error() is None, message.error()
                partition, number = (int(part) for part in message.value().decode().split(":"))
                assert partition == message.partition()
                records[partition].append((number, message.offset()))
                positions[partition] = message.offset() + 1
            return not_yet(f"consumed up to {positions}")

        wait_for_sync(read, 30, interval=0, what=f"every partition consumed up to its high watermark {ends}")
        return records
    finally:
        consumer.close()


async def leaders_high_watermarks(cluster: Cluster, topic: str, partitions: int) -> dict[int, int]:
    """LATEST of every partition, asked of its leader (a raw client: exact answers, no client retries)."""
    states = await cluster.metadata()
    ends = {}
    for p in range(partitions):
        async with cluster.client(states[(topic, p)].leader) as client:
            answer = await list_offset(client, topic, 7, partition=p)
        assert answer.error_code == ErrorCode.NONE, answer
        ends[p] = answer.offset
    return ends


def check_numbered(writer: NumberedProducer, consumed: dict[int, list[tuple[int, int]]]) -> None:
    """Every record the writer sent (all acknowledged) is in its partition once, in order, at the offset it was
    acknowledged with, and nothing else is."""
    for partition, records in consumed.items():
        numbers = [number for number, _ in records]
        assert numbers == list(range(writer.sent[partition])), first_difference(numbers, writer.sent[partition])
        at_offset = {offset: number for number, offset in records}
        assert all(at_offset.get(offset) == number for number, offset in writer.acked[partition])


def first_difference(numbers: list[int], sent: int) -> str:
    for index, number in enumerate(numbers):
        if number != index:
            return f"at position {index}: {numbers[max(0, index - 3):index + 4]} (sent {sent}, consumed {len(numbers)})"
    return f"consumed {len(numbers)} of {sent}"
