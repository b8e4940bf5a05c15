"""Leadership moved A -> B -> A with the two elections milliseconds apart, under an idempotent acks=all producer:
every replica catches up and is back in the ISR within seconds, each time, and the producer never sees a fatal
error (issue 17.1: a broker that led for a moment kept the epoch it assigned and appended nothing, and as a
follower asked about it forever; KIP-279, Kafka's UnifiedLog.truncateTo)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer

from tests.cluster.support import Cluster, create_topic, disk_log_end, partition_state, wait_for

pytestmark = pytest.mark.slow

TOPIC = "flapping"
ROUNDS = 10
CATCH_UP_S = 15.0


class SteadyProducer:
    """An idempotent acks=all confluent-kafka producer in a thread; keeps fatal errors and failed deliveries."""

    def __init__(self, bootstrap: str) -> None:
        self.fatal: list[str] = []
        self.failed: list[str] = []
        self.acked = 0
        self.stop = threading.Event()
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 2, "message.timeout.ms": 60000,
                                  "topic.metadata.refresh.interval.ms": 500, "error_cb": self._error})
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _error(self, error: KafkaError) -> None:
        if error.fatal():
            self.fatal.append(str(error))

    def _delivered(self, error: KafkaError | None, _message: Any) -> None:
        if error is None:
            self.acked += 1
        else:
            self.failed.append(str(error))

    def _run(self) -> None:
        n = 0
        while not self.stop.is_set():
            try:
                self.producer.produce(TOPIC, b"%d" % n, on_delivery=self._delivered)
                n += 1
            except BufferError:
                pass
            self.producer.poll(0.002)  # a few hundred records a second: a steady load on two cores
        self.producer.flush(60)

    def __enter__(self) -> SteadyProducer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(90)


async def flap_and_check(cluster: Cluster, replicas: list[int]) -> None:
    await create_topic(cluster, TOPIC, assignments=[replicas])
    with SteadyProducer(cluster.bootstrap) as producer:
        await wait_for(lambda: producer.acked > 50, timeout=30, what="the producer under way")
        for round_number in range(ROUNDS):
            state = await partition_state(cluster, TOPIC)
            assert state is not None
            a = state.leader
            b = next(r for r in state.isr if r != a)
            # two elections milliseconds apart: b leads for a moment, likely appending nothing
            await asyncio.to_thread(cluster.elect, TOPIC, 0, leader=b)
            await asyncio.to_thread(cluster.elect, TOPIC, 0, leader=a)
            started = time.monotonic()
            target = disk_log_end(cluster, a, TOPIC)  # what every replica must reach (the producer goes on)

            async def caught_up(target: int = target) -> bool:
                current = await partition_state(cluster, TOPIC)
                if current is None or sorted(current.isr) != sorted(replicas):
                    return False
                return all(disk_log_end(cluster, node, TOPIC) >= target for node in replicas)

            await wait_for(caught_up, timeout=CATCH_UP_S, interval=0.1,
                           what=f"round {round_number}: every replica past offset {target} and in the ISR")
            assert time.monotonic() - started < CATCH_UP_S
    assert producer.fatal == [], producer.fatal
    assert producer.failed == []
    assert producer.acked > 100


@pytest.mark.cluster(brokers=2, overrides={"replica.lag.time.max.ms": 2000})
async def test_fast_elections_back_and_forth_leave_no_follower_stuck_with_two_brokers(cluster: Cluster) -> None:
    await flap_and_check(cluster, [0, 1])


@pytest.mark.cluster(brokers=3, overrides={"replica.lag.time.max.ms": 2000})
async def test_fast_elections_back_and_forth_leave_no_follower_stuck_with_three_brokers(cluster: Cluster) -> None:
    await flap_and_check(cluster, [0, 1, 2])
