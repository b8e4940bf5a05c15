"""Client quotas enforced (broker/network/quotas.py): Kafka's windowed rate and precedence socket-free, then real
clients held to their quotas by a broker process, the throttle seen by the client (KIP-219).

A rate is Kafka's: over 11 one-second windows, counted as at least 10 whole windows while younger, so a client's
first ~10 s of quota go through before it is throttled, as on Kafka. The clients are therefore measured as Kafka
measures them: the bytes the broker took during the run over the rate's window then (10 s and the part of the
current second, the run being shorter than 10 s) must be within 20% of the quota.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from kafka import KafkaProducer

from epoch_broker import testing
from epoch_broker.broker.app import Broker
from epoch_broker.broker.network.quotas import WINDOW_S, WINDOWS, ClientQuotaManager, Rate, quota_of
from epoch_broker.client.aio import KafkaClient
from epoch_broker.client.blocking import BlockingKafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import alter_client_quotas, describe_log_dirs, fetch, metadata
from tests.broker.conftest import batch, create_topic, produce_request
from tests.helpers import not_yet, wait_for

QUOTA = 1024 * 1024  # bytes/s
RUN_S = 6.0
VALUE = b"x" * 10_000


# -- socket-free ---------------------------------------------------------------------------------------------

def test_a_young_rate_is_counted_over_the_windows_it_will_have() -> None:
    rate = Rate()
    rate.record(10.0, 100.0)
    assert rate.measure(100.0) == (1.0, 10.0)  # 10 whole windows, none of the current one elapsed
    rate.record(11.0, 104.5)
    assert rate.measure(104.5) == pytest.approx((21.0 / 10.5, 10.5))
    assert rate.measure(110.5) == pytest.approx((21.0 / 10.5, 10.5))  # 10 whole windows old: its own age
    assert rate.measure(111.5) == pytest.approx((11.0 / 10.0, 10.0))  # the first sample forgotten at 11 s


def test_samples_older_than_the_windows_are_forgotten() -> None:
    rate = Rate()
    rate.record(1000.0, 0.0)
    rate.record(5.0, 10.5)
    assert rate.measure(11.0)[0] == pytest.approx(5.0 / 10.5)  # the first sample (age 11 s) is gone


def test_the_throttle_time_is_kafka_s() -> None:
    """QuotaUtils.throttleTime: (rate - quota) / quota x window, the idle time that brings the window's sum down
    to the quota were the window that much longer."""
    rate = Rate()
    rate.record(30.0, 0.0)
    assert rate.throttle_s(2.0, 0.0) == pytest.approx(5.0)  # 30 over a 10 s window: 3/s, the quota 2/s
    assert rate.throttle_s(3.0, 0.0) == 0.0
    assert Rate().throttle_s(2.0, 0.0) == 0.0


U, C = "user", "client-id"


@pytest.mark.parametrize(("quotas", "expected"), [
    ({((C, "p"), (U, "alice")): 1, ((C, None), (U, "alice")): 2, ((U, "alice"),): 3}, (1, ("alice", "p"))),
    ({((C, None), (U, "alice")): 2, ((U, "alice"),): 3, ((C, "p"),): 7}, (2, ("alice", "p"))),
    ({((U, "alice"),): 3, ((C, "p"), (U, None)): 4, ((C, "p"),): 7}, (3, ("alice", ""))),
    ({((C, "p"), (U, None)): 4, ((C, None), (U, None)): 5, ((U, None),): 6}, (4, ("alice", "p"))),
    ({((C, None), (U, None)): 5, ((U, None),): 6, ((C, "p"),): 7}, (5, ("alice", "p"))),
    ({((U, None),): 6, ((C, "p"),): 7}, (6, ("alice", ""))),
    ({((C, "p"),): 7, ((C, None),): 8, ((U, "bob"),): 1}, (7, ("", "p"))),
    ({((C, None),): 8, ((C, "q"),): 1}, (8, ("", "p"))),
    ({((C, "q"),): 1, ((U, "bob"),): 1}, None),
], ids=["user and client id", "user, default client id", "user", "default user, client id",
        "default user and client id", "default user", "client id", "default client id", "none applies"])
def test_the_most_specific_quota_applies_as_kafka_s(quotas: dict[Any, float], expected: Any) -> None:
    found = quota_of({entity: {"producer_byte_rate": value} for entity, value in quotas.items()},
                     "producer_byte_rate", "alice", "p")
    assert found == expected


def test_clients_under_one_user_quota_share_its_rate() -> None:
    now = [0.0]
    manager = ClientQuotaManager("producer_byte_rate", lambda: now[0])
    quotas = {((U, "alice"),): {"producer_byte_rate": 1.0}}
    assert manager.record(quotas, "alice", "p1", 10.0) == 0.0
    assert manager.record(quotas, "alice", "p2", 5.0) == pytest.approx(5.0)  # 15 over 10 s, the quota 1/s
    assert manager.record(quotas, "bob", "p1", 1e9) == 0.0  # no quota: not limited


# -- real clients ----------------------------------------------------------------------------------------------

def set_quota(bootstrap: str, client_id: str, key: str, value: float) -> None:
    messages = alter_client_quotas.REQUEST
    with BlockingKafkaClient.connect(bootstrap) as client:
        response = client.request(alter_client_quotas.API, 1, messages.cls(entries=[messages.EntryData(
            entity=[messages.EntityData(entity_type="client-id", entity_name=client_id)],
            ops=[messages.OpData(key=key, value=value)])]))
    assert [entry.error_code for entry in response.entries] == [ErrorCode.NONE]


def log_size(bootstrap: str, topic: str) -> int:
    request = describe_log_dirs.REQUEST.cls(topics=[describe_log_dirs.REQUEST.DescribableLogDirTopic(
        topic=topic, partitions=[0])])
    with BlockingKafkaClient.connect(bootstrap) as client:
        response = client.request(describe_log_dirs.API, 1, request)
    return sum(p.partition_size for result in response.results for t in result.topics for p in t.partitions)


def kafka_window_s(elapsed: float) -> float:
    """The window Kafka's rate divides by after `elapsed` seconds of a client's traffic."""
    whole = int(elapsed // WINDOW_S)
    return elapsed + (WINDOWS - 1 - whole) * WINDOW_S if whole < WINDOWS - 1 else elapsed


class Throttles:
    """What librdkafka reports of the broker's throttle: throttle_cb events and the statistics' `throttle`."""

    def __init__(self) -> None:
        self.events: list[float] = []
        self.stats_max_ms = 0

    def on_throttle(self, event: Any) -> None:
        self.events.append(event.throttle_time)

    def on_stats(self, text: str) -> None:
        for broker in json.loads(text)["brokers"].values():
            self.stats_max_ms = max(self.stats_max_ms, broker["throttle"]["max"])


@pytest.fixture(scope="module")
def broker_process() -> Any:
    with testing.broker(in_process=False) as started:
        yield started


def test_a_producer_is_held_to_its_byte_rate_and_told_of_the_throttle(broker_process: testing.Broker) -> None:
    bootstrap, topic, client_id = broker_process.bootstrap_servers, f"q-{uuid.uuid4().hex[:8]}", "throttled-producer"
    broker_process.create_topic(topic)
    set_quota(bootstrap, client_id, "producer_byte_rate", QUOTA)
    throttles = Throttles()
    # Kafka counts a Produce after appending it, so each throttle lets one more request in: 64 KB batches (not
    # librdkafka's 1 MB) keep that small beside the quota, as on Kafka
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5, "batch.size": 65536,
                         "statistics.interval.ms": 500, "throttle_cb": throttles.on_throttle,
                         "stats_cb": throttles.on_stats, "compression.type": "none"})
    before = log_size(bootstrap, topic)
    start = time.monotonic()
    while (elapsed := time.monotonic() - start) < RUN_S:
        try:
            producer.produce(topic, VALUE)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    taken = log_size(bootstrap, topic) - before
    producer.poll(1.0)  # a statistics report after the throttles
    producer.purge()
    producer.flush(10)
    rate = taken / kafka_window_s(elapsed)
    print(f"producer: {taken} B in {elapsed:.1f} s: {taken / elapsed / QUOTA:.2f}x the quota over the run, "
          f"{rate / QUOTA:.2f}x over Kafka's window; throttle_cb {len(throttles.events)} times, "
          f"max {max(throttles.events, default=0):.2f} s; stats max {throttles.stats_max_ms} ms")
    assert 0.8 * QUOTA <= rate <= 1.2 * QUOTA
    assert throttles.events and max(throttles.events) > 0
    assert throttles.stats_max_ms > 0


def test_a_consumer_is_held_to_its_byte_rate_and_told_of_the_throttle(broker_process: testing.Broker) -> None:
    bootstrap, topic, client_id = broker_process.bootstrap_servers, f"q-{uuid.uuid4().hex[:8]}", "throttled-consumer"
    broker_process.create_topic(topic)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for _ in range(int(QUOTA * 16 / len(VALUE))):  # more than the consumer may take in the run
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(30) == 0
    set_quota(bootstrap, client_id, "consumer_byte_rate", QUOTA)
    throttles = Throttles()
    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, "group.id": client_id,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "statistics.interval.ms": 500, "throttle_cb": throttles.on_throttle,
                         "stats_cb": throttles.on_stats})
    consumer.subscribe([topic])
    taken, start = 0, None
    while start is None or (elapsed := time.monotonic() - start) < RUN_S:
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            if start is None:
                start = time.monotonic()
            taken += len(message.value() or b"")
    consumer.poll(1.0)
    consumer.close()
    rate = taken / kafka_window_s(elapsed)
    print(f"consumer: {taken} B in {elapsed:.1f} s: {taken / elapsed / QUOTA:.2f}x the quota over the run, "
          f"{rate / QUOTA:.2f}x over Kafka's window; throttle_cb {len(throttles.events)} times, "
          f"max {max(throttles.events, default=0):.2f} s; stats max {throttles.stats_max_ms} ms")
    assert 0.8 * QUOTA <= rate <= 1.2 * QUOTA
    assert throttles.events and max(throttles.events) > 0



def test_kafka_python_reports_the_produce_throttle(broker_process: testing.Broker) -> None:
    bootstrap, topic = broker_process.bootstrap_servers, f"q-{uuid.uuid4().hex[:8]}"
    broker_process.create_topic(topic)
    set_quota(bootstrap, "kafka-python-producer", "producer_byte_rate", 50_000)
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="kafka-python-producer", linger_ms=5)
    try:
        for _ in range(60):  # 600 KB: past the 500 KB a young rate allows
            producer.send(topic, VALUE)
        producer.flush(30)
        throttle = producer.metrics()["producer-metrics"]["throttle-time-max"]
    finally:
        producer.close()
    assert throttle > 0


# -- raw requests: the response's throttle_time_ms and the muted connection ----------------------------------------

async def test_a_produce_over_its_quota_is_answered_then_the_connection_waits(broker: Broker) -> None:
    bootstrap = f"127.0.0.1:{broker.advertised.port}"
    async with await KafkaClient.connect(bootstrap, client_id="raw-producer") as client:
        await client.negotiate()
        await create_topic(client, "raw-quota")
        await asyncio.to_thread(set_quota, bootstrap, "raw-producer", "producer_byte_rate", 1000)
        # 12 KB against 1000 B/s: 10 s of quota (the young window) taken, 2 s more to wait
        response = await produce_request(client, "raw-quota", batch(b"v" * 12_000))
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE  # appended all the same
        assert 1500 <= response.throttle_time_ms <= 2500
        asked = time.monotonic()
        await client.request(metadata.API, 12, metadata.REQUEST.cls(topics=[]))
        assert time.monotonic() - asked >= response.throttle_time_ms / 1000 * 0.9  # not read until the throttle ends


async def test_a_consumer_fetch_is_bounded_by_its_quota_and_answered_empty_when_throttled(broker: Broker) -> None:
    bootstrap = f"127.0.0.1:{broker.advertised.port}"
    async with await KafkaClient.connect(bootstrap, client_id="raw-consumer") as client:
        await client.negotiate()
        await create_topic(client, "raw-fetched")
        offsets = [(await produce_request(client, "raw-fetched", batch(*[b"v" * 1_000] * 6))).responses[0]
                   .partition_responses[0].base_offset for _ in range(2)]
        await asyncio.to_thread(set_quota, bootstrap, "raw-consumer", "consumer_byte_rate", 1000)

        def fetch_request(offset: int) -> Any:
            return fetch.REQUEST.cls(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[fetch.REQUEST.FetchTopic(
                topic="raw-fetched", partitions=[fetch.REQUEST.FetchPartition(
                    partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])

        # max_bytes lowered to 10 windows of the quota (10 KB): one batch of the two (6 KB each)
        response = await client.request(fetch.API, 12, fetch_request(0))
        assert response.throttle_time_ms == 0
        assert 6_000 < len(response.responses[0].partitions[0].records) < 10_000
        # the next batch would make 12 KB against the window's 10: answered empty, un-recorded
        response = await client.request(fetch.API, 12, fetch_request(offsets[1]))
        assert (response.error_code, response.responses) == (ErrorCode.NONE, [])
        assert 1000 <= response.throttle_time_ms <= 2500


async def test_a_client_over_its_request_percentage_is_throttled(broker: Broker) -> None:
    bootstrap = f"127.0.0.1:{broker.advertised.port}"
    await asyncio.to_thread(set_quota, bootstrap, "busy", "request_percentage", 0.001)  # 0.01 ms of handler time/s
    async with await KafkaClient.connect(bootstrap, client_id="busy") as client:
        await client.negotiate()

        async def throttled() -> object:
            response = await client.request(metadata.API, 12, metadata.REQUEST.cls(topics=None))
            return response.throttle_time_ms > 0 or not_yet(response.throttle_time_ms)

        await wait_for(throttled, what="a Metadata answer with a throttle time")
