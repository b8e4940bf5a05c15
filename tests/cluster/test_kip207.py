"""KIP-207 (offsets of a new leader never go backwards) and min.insync.replicas, on real processes.

A controller and three brokers (tests/cluster/conftest.py). Topics are created with the explicit assignment
[0, 1, 2], so broker 0 leads first and broker 1 is the first in line after it. Exact requests go through the
internal KafkaClient; the failover poll uses confluent-kafka as an application would.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from epoch_broker.broker.faults import HIGH_WATERMARK_HELD, REPLICATION_PAUSED
from epoch_broker.broker.replica.partition import DEBUGGING
from epoch_broker.protocol.errors import ErrorCode
from tests.broker.conftest import batch, produce_to
from tests.cluster.support import (
    EARLIEST,
    Cluster,
    clear_fault,
    create_topic,
    list_offset,
    partition_state,
    produce,
    wait_for,
)

pytestmark = pytest.mark.slow

# The ISR must not shrink while a follower is paused on purpose: only the election and the pause move things.
NO_ISR_SHRINK = {"replica.lag.time.max.ms": 60000}


@pytest.mark.cluster(overrides=NO_ISR_SHRINK)
async def test_a_new_leader_behind_on_its_high_watermark_refuses_client_offsets_until_it_catches_up(
        cluster: Cluster) -> None:
    """KIP-207: a leader elected with its log end beyond its high watermark answers OFFSET_NOT_AVAILABLE (78)
    to ListOffsets v5+ and LEADER_NOT_AVAILABLE (5) to v1-v4 until the high watermark reaches that log end;
    a replica's own request (replica_id >= 0) is answered meanwhile, and afterwards clients get the offset."""
    await create_topic(cluster, "kip207")
    # Broker 0 leads and keeps the followers' view of the high watermark at 0: they replicate all 5 records
    # (acks=all) without learning that they are committed.
    assert await cluster.set_fault(0, HIGH_WATERMARK_HELD, "true") == "applied"
    answer = await produce(cluster, 0, "kip207", b"a", b"b", b"c", b"d", b"e")
    assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 0)
    async with cluster.client(0) as old_leader:
        seen = await list_offset(old_leader, "kip207", 7)
    assert (seen.error_code, seen.offset) == (ErrorCode.NONE, 5)  # what clients saw before the election

    # Broker 2 stops fetching, so broker 1, once elected, cannot learn that the ISR has its 5 records.
    assert await cluster.set_fault(2, REPLICATION_PAUSED, "true") == "applied"
    assert await asyncio.to_thread(cluster.elect, "kip207", 0, leader=1) == "elected"
    state = await wait_for(lambda: partition_state(cluster, "kip207", 0, lambda s: s.leader == 1),
                           what="broker 1 leading")
    assert sorted(state.isr) == [0, 1, 2]  # nothing shrank: only the leadership moved

    async with cluster.client(1) as new_leader:
        first = await wait_for(
            lambda: _not_error(list_offset(new_leader, "kip207", 7), ErrorCode.NOT_LEADER_OR_FOLLOWER),
            what="broker 1 applying its election")
        assert first.error_code == ErrorCode.OFFSET_NOT_AVAILABLE
        for version in range(1, 10):
            refused = await list_offset(new_leader, "kip207", version)
            expected = ErrorCode.OFFSET_NOT_AVAILABLE if version >= 5 else ErrorCode.LEADER_NOT_AVAILABLE
            assert (version, refused.error_code, refused.offset) == (version, expected, -1)
        # Every client lookup is refused in the window, not only LATEST (the KIP treats them all alike).
        assert (await list_offset(new_leader, "kip207", 7, timestamp=EARLIEST)).error_code == \
            ErrorCode.OFFSET_NOT_AVAILABLE
        # A replica's own request is answered: brokers compare logs with it (the KIP's replica_id rule).
        for version in (1, 4, 7, 9):
            replica = await list_offset(new_leader, "kip207", version, replica_id=2)
            assert (version, replica.error_code) == (version, ErrorCode.NONE)
            assert replica.offset == 5, replica  # the log end: the new leader has all 5 records
        assert (await list_offset(new_leader, "kip207", 7, replica_id=0)).error_code == ErrorCode.NONE
        debugging = await list_offset(new_leader, "kip207", 7, replica_id=DEBUGGING)
        assert (debugging.error_code, debugging.offset) == (ErrorCode.NONE, 5)  # Kafka's -2: not a consumer
    async with cluster.client(2) as paused_follower:  # -2 reads a follower's own log, after the epoch check
        follower_log = await list_offset(paused_follower, "kip207", 7, replica_id=DEBUGGING)
        assert (follower_log.error_code, follower_log.offset) == (ErrorCode.NONE, 5)
        consumer = await list_offset(paused_follower, "kip207", 7)
        assert consumer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    async with cluster.client(1) as new_leader:

        # Broker 2 fetches again: the high watermark reaches 5 and clients get it, never anything lower.
        await clear_fault(cluster, 2, REPLICATION_PAUSED)
        caught_up = await wait_for(lambda: _not_error(list_offset(new_leader, "kip207", 7),
                                                      ErrorCode.OFFSET_NOT_AVAILABLE),
                                   what="the new leader's high watermark reaching its log end")
        assert (caught_up.error_code, caught_up.offset, caught_up.leader_epoch) == \
            (ErrorCode.NONE, 5, state.leader_epoch)
        for version in range(1, 10):
            answer = await list_offset(new_leader, "kip207", version)
            assert (version, answer.error_code, answer.offset) == (version, ErrorCode.NONE, 5)
        assert (await list_offset(new_leader, "kip207", 7, timestamp=EARLIEST)).offset == 0


async def _not_error(pending: Any, error: ErrorCode) -> Any:
    answer = await pending
    return None if answer.error_code == error else answer


@dataclass
class LatestPoller:
    """A confluent-kafka consumer asking the partition's high watermark (LATEST) in a loop, in a thread, as a
    monitoring application would; every answer and every failure is kept with the time it was asked."""

    bootstrap: str
    topic: str
    answers: list[tuple[float, int]] = field(default_factory=list)
    failures: list[tuple[float, int]] = field(default_factory=list)  # (asked at, librdkafka error code)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "kip207-poller",
                             "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 500})
        try:
            while not self.stop.is_set():
                asked = time.monotonic()
                try:
                    _, high = consumer.get_watermark_offsets(TopicPartition(self.topic, 0), timeout=1.0,
                                                             cached=False)
                except KafkaException as exc:
                    self.failures.append((asked, exc.args[0].code()))
                else:
                    self.answers.append((asked, high))
                self.stop.wait(0.02)  # paces the poller, which waits for nothing: it records every answer
        finally:
            consumer.close()

    def highest(self) -> int:
        return max((high for _, high in self.answers), default=-1)


@pytest.mark.cluster(overrides=NO_ISR_SHRINK)
async def test_latest_offsets_polled_by_a_client_never_go_backwards_across_a_sigkill_failover(
        cluster: Cluster) -> None:
    """KIP-207: LATEST offsets that a client (confluent-kafka's get_watermark_offsets) polls while the leader
    is SIGKILLed and another replica takes over never decrease; in between the new leader refuses."""
    await create_topic(cluster, "polled")
    assert (await produce(cluster, 0, "polled", b"a", b"b", b"c")).error_code == ErrorCode.NONE
    # From here the followers' high watermark stays at most 3 while the leader's reaches 8.
    assert await cluster.set_fault(0, HIGH_WATERMARK_HELD, "true") == "applied"
    assert (await produce(cluster, 0, "polled", *[b"x"] * 5)).error_code == ErrorCode.NONE

    poller = LatestPoller(cluster.bootstrap, "polled")
    thread = threading.Thread(target=poller.run, name="latest-poller")
    thread.start()
    try:
        await wait_for(lambda: len(poller.answers) >= 3 and poller.highest() == 8,
                       what="the poller seeing LATEST 8", timeout=15)
        # Broker 2 stops fetching: after the failover, broker 1 cannot advance its high watermark (3 at most)
        # to its log end (8) until it is resumed, which keeps the KIP-207 window open for the poller.
        assert await cluster.set_fault(2, REPLICATION_PAUSED, "true") == "applied"
        killed_at = time.monotonic()
        cluster.kill(0)
        state = await wait_for(lambda: partition_state(cluster, "polled", 0, lambda s: s.leader == 1),
                               what="broker 1 leading after the SIGKILL", timeout=15)
        elected_at = time.monotonic()
        assert 0 not in state.isr
        async with cluster.client(1) as new_leader:
            refused = await wait_for(
                lambda: _not_error(list_offset(new_leader, "polled", 7), ErrorCode.NOT_LEADER_OR_FOLLOWER),
                what="broker 1 applying its election")
            assert refused.error_code == ErrorCode.OFFSET_NOT_AVAILABLE
            replica = await list_offset(new_leader, "polled", 7, replica_id=2)
            assert (replica.error_code, replica.offset) == (ErrorCode.NONE, 8)
        # The poller asks the new leader during the window and is refused (not answered 3 or less).
        await wait_for(lambda: any(asked > elected_at and code == ErrorCode.OFFSET_NOT_AVAILABLE
                                   for asked, code in poller.failures),
                       what="the poller refused by the new leader with OFFSET_NOT_AVAILABLE", timeout=10)
        await clear_fault(cluster, 2, REPLICATION_PAUSED)
        await wait_for(lambda: any(asked > elected_at for asked, _ in poller.answers),
                       what="the poller answered by the new leader", timeout=15)
        # And it follows the new leader's high watermark up.
        assert (await produce(cluster, 1, "polled", b"y", b"z")).error_code == ErrorCode.NONE
        await wait_for(lambda: poller.highest() == 10, what="the poller seeing LATEST 10", timeout=15)
    finally:
        poller.stop.set()
        await asyncio.to_thread(thread.join, 10)
    highs = [high for _, high in poller.answers]
    after = [high for asked, high in poller.answers if asked > killed_at]
    print(f"LATEST answers: {len(highs)} (from {highs[0]} to {highs[-1]}), refused or failed: "
          f"{len(poller.failures)}; new leader in Metadata {elected_at - killed_at:.2f} s after the SIGKILL")
    assert highs == sorted(highs), highs
    assert highs[0] == 8 and after and min(after) == 8 and highs[-1] == 10


@pytest.mark.cluster(brokers=3)
async def test_acks_all_is_refused_with_two_of_three_brokers_down_and_succeeds_when_the_isr_is_back(
        cluster: Cluster) -> None:
    """min.insync.replicas (docs/cluster.md, acks=all): with the ISR down to the leader, acks=all gets
    NOT_ENOUGH_REPLICAS (19) and nothing is appended, acks=1 succeeds; once the SIGKILLed followers are
    restarted and back in the ISR, acks=all succeeds again, from the internal client and from confluent-kafka."""
    await create_topic(cluster, "guarded", configs={"min.insync.replicas": "2"})
    assert (await produce(cluster, 0, "guarded", b"a")).error_code == ErrorCode.NONE
    cluster.kill(1)
    cluster.kill(2)
    # The controller fences them after broker.session.timeout.ms and drops them from the ISR.
    await wait_for(lambda: partition_state(cluster, "guarded", 0, lambda s: s.isr == (0,) and s.leader == 0),
                   what="the ISR shrinking to the leader", timeout=15)
    async with cluster.client(0) as leader:
        end = await list_offset(leader, "guarded", 7)
        refused = await produce_to(leader, "guarded", batch(b"refused"))
        assert refused.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert (await list_offset(leader, "guarded", 7, replica_id=0)).offset == end.offset  # nothing appended
        accepted = await produce_to(leader, "guarded", batch(b"one"), acks=1)
        assert (accepted.error_code, accepted.base_offset) == (ErrorCode.NONE, end.offset)
        assert (await list_offset(leader, "guarded", 7)).offset == end.offset + 1

    cluster.restart(1)
    cluster.restart(2)
    await wait_for(lambda: partition_state(cluster, "guarded", 0, lambda s: len(s.isr) == 3),
                   what="the ISR growing back to 3", timeout=20)
    async with cluster.client(0) as leader:
        answer = await wait_for(lambda: _not_error(produce_to(leader, "guarded", batch(b"all")),
                                                   ErrorCode.NOT_ENOUGH_REPLICAS),
                                what="the leader applying the ISR growth")
        assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, end.offset + 1)

    delivered: list[Any] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "message.timeout.ms": 10000})
    producer.produce("guarded", b"confluent", partition=0, on_delivery=lambda err, msg: delivered.append((err, msg)))
    assert await asyncio.to_thread(producer.flush, 15) == 0
    [(error, message)] = delivered
    assert error is None and message.offset() == end.offset + 2
