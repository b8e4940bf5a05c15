"""What a test author writes: the fixtures of `pip install epoch-broker` (its pytest plugin) with the clients
people use. Nothing else to set up: copy this file into your project and run `pytest`.

The project's own suite runs this file from a temporary directory against the installed package
(tests/test_packaging.py).
"""

from __future__ import annotations

import asyncio
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer


def test_confluent_kafka_round_trip_and_a_group(kafka_broker) -> None:
    kafka_broker.create_topic("orders", partitions=2)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers, "enable.idempotence": True})
    for n in range(10):
        producer.produce("orders", f"order-{n}".encode(), partition=n % 2)
    assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "billing",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["orders"])
    seen = []
    try:
        while len(seen) < 10:
            message = consumer.poll(30)
            assert message is not None and message.error() is None, message and message.error()
            seen.append(message.value().decode())
        consumer.commit(asynchronous=False)
        committed = consumer.committed(consumer.assignment(), timeout=30)
    finally:
        consumer.close()
    assert sorted(seen) == sorted(f"order-{n}" for n in range(10))
    assert sum(tp.offset for tp in committed) == 10  # the group's offsets, committed and read back


def test_kafka_python_on_the_session_broker(kafka_broker_session) -> None:
    topic = kafka_broker_session.new_topic(partitions=1)  # a fresh topic: session tests never share records
    producer = KafkaProducer(bootstrap_servers=kafka_broker_session.bootstrap_servers, acks="all")
    for n in range(5):
        producer.send(topic, f"event-{n}".encode()).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=kafka_broker_session.bootstrap_servers,
                             group_id=f"readers-{uuid.uuid4().hex[:6]}", auto_offset_reset="earliest",
                             consumer_timeout_ms=20000)
    values = [record.value.decode() for _, record in zip(range(5), consumer, strict=False)]
    consumer.close()
    assert values == [f"event-{n}" for n in range(5)]


def test_aiokafka_on_the_session_broker(kafka_broker_session) -> None:
    topic = kafka_broker_session.new_topic(partitions=1)

    async def round_trip() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=kafka_broker_session.bootstrap_servers, acks="all")
        await producer.start()
        try:
            for n in range(5):
                await producer.send_and_wait(topic, f"tick-{n}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=kafka_broker_session.bootstrap_servers,
                                    group_id="aio-readers", auto_offset_reset="earliest")
        await consumer.start()
        try:
            return [(await asyncio.wait_for(consumer.getone(), 30)).value for _ in range(5)]
        finally:
            await consumer.stop()

    assert asyncio.run(round_trip()) == [f"tick-{n}".encode() for n in range(5)]


def test_a_leader_killed_in_the_cluster_loses_no_acknowledged_record(kafka_cluster) -> None:
    kafka_cluster.create_topic("payments", partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "enable.idempotence": True,
                         "acks": "all", "message.timeout.ms": 60000})
    acked: list[str] = []

    def delivered(error, message) -> None:
        if error is None:
            acked.append(message.value().decode())

    for n in range(100):
        producer.produce("payments", f"payment-{n}".encode(), on_delivery=delivered)
        if n == 50:
            producer.flush(30)
            leader = kafka_cluster.leader("payments", 0)
            kafka_cluster.kill(leader)  # SIGKILL: the controller fences it and elects another
            assert kafka_cluster.leader("payments", 0, other_than=leader) != leader
    assert producer.flush(60) == 0
    kafka_cluster.restart(leader)
    kafka_cluster.wait_for_isr("payments", 0, 3)

    consumer = Consumer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "group.id": "audit",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["payments"])
    read = set()
    try:
        while not set(acked) <= read:
            message = consumer.poll(30)
            assert message is not None, f"{len(set(acked) - read)} acknowledged records never read"
            if message.error() is None:
                read.add(message.value().decode())
    finally:
        consumer.close()
    assert len(acked) == 100
