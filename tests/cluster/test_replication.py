"""Replication between brokers in one event loop: one Controller, two or three Brokers on loopback ports, each
with its own log dir, all on the controller through an EmbeddedChannel (every broker sees every record at once).

Produce goes through the wire (KafkaClient), so the handlers' acks=all path is what is tested; the fault hooks
are set directly on `broker.faults`, as IncrementalAlterConfigs would. No fixed sleeps: a test waits for the
condition it asserts next (tests/helpers.py `wait_for`), and where nothing more may happen it checks that the
condition holds for a window (`holds`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from epoch_broker.broker.app import Broker
from epoch_broker.broker.config import BrokerConfig, Endpoint
from epoch_broker.broker.controller.channel import EmbeddedChannel, OnRecords
from epoch_broker.broker.controller.controller import Controller
from epoch_broker.broker.controller.replication_control import NewTopic
from epoch_broker.broker.controller.store.file import FileMetadataStore
from epoch_broker.broker.replica.partition import Partition
from epoch_broker.client.aio import KafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import fetch, list_offsets, produce
from tests.broker.conftest import batch
from tests.helpers import holds, wait_for

TOPIC = "replicated"


class SharedChannel(EmbeddedChannel):
    """Several brokers on one controller: a broker that stops unsubscribes and leaves the controller open."""

    def __init__(self, controller: Controller) -> None:
        super().__init__(controller)
        self._on_records: OnRecords | None = None

    async def start(self, on_records: OnRecords) -> None:
        self._on_records = on_records
        await super().start(on_records)

    async def close(self) -> None:
        self.controller.subscribers.remove(self._on_records)


class InProcessCluster:
    def __init__(self, tmp_path: Path, brokers: int, lag_ms: int) -> None:
        self.tmp_path = tmp_path
        self.controller = Controller(
            dataclasses.replace(BrokerConfig(), node_id=1000, log_dirs=(str(tmp_path / "controller"),)),
            FileMetadataStore(str(tmp_path / "controller")))
        self.controller.start()
        self.configs = [dataclasses.replace(
            BrokerConfig(), node_id=i, process_roles=frozenset({"broker"}), log_dirs=(str(tmp_path / f"broker-{i}"),),
            listeners=(Endpoint("PLAINTEXT", "127.0.0.1", 0),), replica_lag_time_max_ms=lag_ms)
            for i in range(brokers)]
        self.brokers: list[Broker] = []
        self.clients: list[KafkaClient] = []

    async def start(self) -> None:
        for config in self.configs:
            broker = Broker(config, channel=SharedChannel(self.controller))
            endpoint = await broker.start()
            self.brokers.append(broker)
            self.clients.append(await KafkaClient.connect(f"{endpoint.host}:{endpoint.port}"))

    async def stop(self) -> None:
        for client in self.clients:
            await client.close()
        for broker in self.brokers:
            await broker.stop()
        self.controller.close()

    def create_topic(self, replicas: list[int], **configs: str) -> bytes:
        (result,) = self.controller.create_topics([NewTopic(TOPIC, -1, -1, {0: replicas}, configs)])
        assert result.error_code == ErrorCode.NONE, result
        return self.controller.image.topics_by_name[TOPIC].topic_id

    def partition(self, node: int) -> Partition:
        partition = self.brokers[node].replica_manager.get(TOPIC, 0)
        assert partition is not None
        return partition

    def pause_replication(self, node: int) -> None:
        """fault.replication.paused on `node`, in effect at once, so nothing to wait for: its fetcher drops any
        fetch answer that arrives once the flag is set (replica_fetcher.py's rule; a fetch in flight may not
        land), and that fetch told the leader only the log end the follower has."""
        self.brokers[node].faults.replication_paused = True

    def isr(self) -> tuple[int, ...]:
        return self.controller.image.topics_by_name[TOPIC].partitions[0].isr

    async def produce(self, node: int, *values: bytes, acks: int = -1, timeout_ms: int = 5000) -> Any:
        request = produce.REQUEST.cls(acks=acks, timeout_ms=timeout_ms, topic_data=[
            produce.REQUEST.TopicProduceData(name=TOPIC, partition_data=[
                produce.REQUEST.PartitionProduceData(index=0, records=batch(*values))])])
        response = await self.clients[node].request(produce.API, 10, request)
        return response.responses[0].partition_responses[0]

    def log_bytes(self, node: int) -> bytes:
        log = self.partition(node).log
        return log.read_bytes(0, 1 << 24) if log.log_end_offset else b""


@pytest.fixture
async def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[InProcessCluster]:
    options = {"brokers": 2, "lag_ms": 30000, **getattr(request, "param", {})}
    cluster = InProcessCluster(tmp_path, **options)
    try:
        await cluster.start()
        yield cluster
    finally:
        await cluster.stop()


async def test_follower_catches_up_and_the_high_watermark_advances(cluster: InProcessCluster) -> None:
    cluster.create_topic([0, 1])
    answer = await cluster.produce(0, b"a", b"b", acks=-1)
    assert answer.error_code == ErrorCode.NONE and answer.base_offset == 0
    leader, follower = cluster.partition(0), cluster.partition(1)
    assert leader.log.high_watermark == 2  # acks=all answered: the follower had fetched both
    await wait_for(lambda: follower.log.high_watermark == 2, what="the follower's high watermark at 2")
    assert cluster.log_bytes(1) == cluster.log_bytes(0)
    assert follower.log.epoch_cache.entries == leader.log.epoch_cache.entries

    # Paused replication: the follower falls behind, and catches up when resumed.
    cluster.pause_replication(1)
    assert (await cluster.produce(0, b"c", acks=1)).error_code == ErrorCode.NONE
    await holds(lambda: (follower.log.log_end_offset, leader.log.high_watermark) == (2, 2), 0.3,
                what="the paused follower at 2 and the high watermark with it")
    cluster.brokers[1].faults.replication_paused = False
    await wait_for(lambda: leader.log.high_watermark == 3 and follower.log.high_watermark == 3,
                   what="both high watermarks at 3 after the resume")
    assert cluster.log_bytes(1) == cluster.log_bytes(0)


@pytest.mark.parametrize("cluster", [{"brokers": 3}], indirect=True)
async def test_follower_truncates_by_leader_epoch_after_an_election_not_to_its_high_watermark(
        cluster: InProcessCluster) -> None:
    cluster.create_topic([0, 1, 2])
    cluster.brokers[0].faults.high_watermark_held = True  # followers never learn the high watermark
    assert (await cluster.produce(0, b"a", b"b", b"c")).error_code == ErrorCode.NONE
    f1, f2 = cluster.partition(1), cluster.partition(2)
    await wait_for(lambda: f1.log.log_end_offset == 3 and f2.log.log_end_offset == 3, what="both followers at 3")
    assert f1.log.high_watermark == 0 and f2.log.high_watermark == 0
    # A record only broker 0 and 1 have, at offset 3 (epoch 0).
    cluster.pause_replication(2)
    assert (await cluster.produce(0, b"lost", acks=1)).error_code == ErrorCode.NONE
    await wait_for(lambda: f1.log.log_end_offset == 4, what="broker 1 at 4")
    assert f2.log.log_end_offset == 3

    [(_, _, error, _)] = cluster.controller.elect_leaders([(TOPIC, 0)], False, 2)
    assert error == ErrorCode.NONE and f2.is_leader and f2.leader_epoch == 1
    # KIP-207: the new leader's offsets are not available before its high watermark reaches its log end (3).
    response = await cluster.clients[2].request(list_offsets.API, 7, list_offsets.REQUEST.cls(
        replica_id=-1, topics=[list_offsets.REQUEST.ListOffsetsTopic(name=TOPIC, partitions=[
            list_offsets.REQUEST.ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
    assert response.topics[0].partitions[0].error_code in (ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.NONE)
    cluster.brokers[2].faults.replication_paused = False
    # Epoch 0 ends at 3 on the new leader: both followers cut the divergent record there, far above their
    # high watermarks (0 for broker 1), and keep the three committed records.
    leader0 = cluster.partition(0)
    await wait_for(lambda: f1.log.log_end_offset == 3 and leader0.log.log_end_offset == 3,
                   what="the divergent record cut on brokers 0 and 1")
    assert (await cluster.produce(2, b"d", b"e")).error_code == ErrorCode.NONE
    await wait_for(lambda: f1.log.log_end_offset == 5 and leader0.log.log_end_offset == 5, what="brokers 0 and 1 at 5")
    assert cluster.log_bytes(0) == cluster.log_bytes(1) == cluster.log_bytes(2)
    assert [e.epoch for e in f1.log.epoch_cache.entries] == [0, 1]
    assert f1.log.epoch_cache.entries[1].start_offset == 3


async def test_diverging_epoch_in_a_fetch_answer_truncates_instead_of_appending(cluster: InProcessCluster) -> None:
    topic_id = cluster.create_topic([0, 1])
    assert (await cluster.produce(0, b"a", b"b")).error_code == ErrorCode.NONE
    assert (await cluster.produce(0, b"c")).error_code == ErrorCode.NONE
    follower = cluster.partition(1)
    await wait_for(lambda: follower.log.log_end_offset == 3, what="the follower at 3")
    cluster.pause_replication(1)
    fetcher = cluster.brokers[1].replica_manager.fetchers.fetchers[0]
    state = fetcher.states[(topic_id, 0)]
    answer = fetch.RESPONSE.PartitionData(partition_index=0, high_watermark=3, records=b"batch not to append",
                                          diverging_epoch=fetch.RESPONSE.EpochEndOffset(epoch=0, end_offset=2))
    fetcher._apply(state, 3, answer)
    assert follower.log.log_end_offset == 2  # cut to the batch boundary before offset 2; nothing appended
    cluster.brokers[1].faults.replication_paused = False
    await wait_for(lambda: follower.log.log_end_offset == 3, what="the follower back at 3")
    assert cluster.log_bytes(1) == cluster.log_bytes(0)


@pytest.mark.parametrize("cluster", [{"lag_ms": 600}], indirect=True)
async def test_isr_shrinks_after_lag_and_expands_after_catching_up(cluster: InProcessCluster) -> None:
    cluster.create_topic([0, 1])
    assert (await cluster.produce(0, b"a")).error_code == ErrorCode.NONE
    leader = cluster.partition(0)
    cluster.pause_replication(1)
    assert (await cluster.produce(0, b"b", acks=1)).error_code == ErrorCode.NONE
    assert cluster.isr() == (0, 1)
    await wait_for(lambda: cluster.isr() == (0,) and leader.isr == (0,), what="the ISR shrunk to the leader")
    assert leader.log.high_watermark == 2  # the lagging follower no longer holds it back
    cluster.brokers[1].faults.replication_paused = False
    await wait_for(lambda: cluster.isr() == (0, 1) and leader.isr == (0, 1), what="the follower back in the ISR")
    assert cluster.partition(1).log.log_end_offset == 2


@pytest.mark.parametrize("cluster", [{"lag_ms": 800}], indirect=True)
async def test_acks_all_waits_for_the_follower_and_honours_min_insync_replicas(cluster: InProcessCluster) -> None:
    cluster.create_topic([0, 1], **{"min.insync.replicas": "2"})
    assert (await cluster.produce(0, b"a")).error_code == ErrorCode.NONE
    cluster.pause_replication(1)
    # The follower is still in the ISR but not fetching: the produce waits for it.
    assert (await cluster.produce(0, b"b", timeout_ms=150)).error_code == ErrorCode.REQUEST_TIMED_OUT
    waiting = asyncio.create_task(cluster.produce(0, b"c", timeout_ms=10000))
    await wait_for(lambda: cluster.partition(0).log.log_end_offset == 3, what="c appended on the leader")
    assert not waiting.done()  # appended, and its answer waits for the follower
    # The ISR shrinks below min.insync.replicas while it waits.
    assert (await waiting).error_code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert cluster.isr() == (0,)
    end = cluster.partition(0).log.log_end_offset
    assert (await cluster.produce(0, b"d")).error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert cluster.partition(0).log.log_end_offset == end  # nothing appended
    assert (await cluster.produce(0, b"e", acks=1)).error_code == ErrorCode.NONE
    # Back in the ISR: acks=all is answered once the follower has the record.
    cluster.brokers[1].faults.replication_paused = False
    await wait_for(lambda: cluster.isr() == (0, 1), what="the follower back in the ISR")
    answer = await cluster.produce(0, b"f")
    assert answer.error_code == ErrorCode.NONE
    assert cluster.partition(1).log.log_end_offset > answer.base_offset


async def test_acks_all_waiter_gets_not_leader_when_leadership_moves(cluster: InProcessCluster) -> None:
    cluster.create_topic([0, 1])
    assert (await cluster.produce(0, b"a")).error_code == ErrorCode.NONE
    cluster.pause_replication(1)
    waiting = asyncio.create_task(cluster.produce(0, b"b", timeout_ms=10000))
    await wait_for(lambda: cluster.partition(0).log.log_end_offset == 2, what="b appended on the leader")
    assert not waiting.done()  # its answer waits for the paused follower
    [(_, _, error, _)] = cluster.controller.elect_leaders([(TOPIC, 0)], False, 1)
    assert error == ErrorCode.NONE
    assert (await waiting).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    cluster.brokers[1].faults.replication_paused = False
    # The unreplicated record is truncated away on the old leader.
    await wait_for(lambda: cluster.partition(0).log.log_end_offset == 1, what="the old leader truncated to 1")


async def test_high_watermark_hold_freezes_what_followers_see(cluster: InProcessCluster) -> None:
    cluster.create_topic([0, 1])
    assert (await cluster.produce(0, b"a")).error_code == ErrorCode.NONE
    leader, follower = cluster.partition(0), cluster.partition(1)
    await wait_for(lambda: follower.log.high_watermark == 1, what="the follower's high watermark at 1")
    cluster.brokers[0].faults.high_watermark_held = True
    assert (await cluster.produce(0, b"b", b"c")).error_code == ErrorCode.NONE
    assert leader.log.high_watermark == 3  # committed: clients see it
    await wait_for(lambda: follower.log.log_end_offset == 3, what="the follower at 3")
    await holds(lambda: follower.log.high_watermark == 1, 0.3, what="the follower's high watermark frozen at 1")
    cluster.brokers[0].faults.high_watermark_held = False
    assert (await cluster.produce(0, b"d")).error_code == ErrorCode.NONE
    await wait_for(lambda: follower.log.high_watermark == 4, what="the follower's high watermark at 4 after the hold")
