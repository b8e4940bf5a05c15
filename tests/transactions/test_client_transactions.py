"""Transactions with the other clients' own APIs: kafka-python's, aiokafka's and kafkajs' transactional producers
commit and abort, and each client's read_committed consumer sees the committed records once and the aborted ones
never."""

from __future__ import annotations

import base64
from collections.abc import Callable

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AIOTopicPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from epoch_broker import testing
from tests.helpers import not_yet, wait_for, wait_for_sync
from tests.interop.support import run_flow
from tests.transactions.conftest import read_all, values


def kafka_python_read(bootstrap: str, topic: str, isolation: str, expected: int) -> list[str]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=2000)
    consumer.assign([TopicPartition(topic, 0)])
    partition = TopicPartition(topic, 0)
    got: list[str] = []

    def enough() -> object:
        got.extend(record.value.decode() for record in consumer)  # what arrives within consumer_timeout_ms
        return len(got) >= expected or not_yet(f"{len(got)} read: {got}")

    def at_end(end: int) -> object:  # nothing is left behind the expected ones
        if (position := consumer.position(partition)) >= end:
            return True
        got.extend(record.value.decode() for record in consumer)
        return not_yet(f"at {position}")

    try:
        wait_for_sync(enough, 30, interval=0, what=f"{expected} records of {topic} ({isolation})")
        end = consumer.end_offsets([partition])[partition]
        wait_for_sync(lambda: at_end(end), 30, interval=0, what=f"the position at the end offset {end}")
    finally:
        consumer.close()
    return sorted(got)


def test_kafka_python_transactions_commit_and_abort(broker: testing.Broker, name: Callable[[str], str]) -> None:
    topic = broker.create_topic(name("kp"))
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=name("kp-txn"))
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(5):
            producer.send(topic, value=f"kept-{i}".encode(), partition=0)
        producer.commit_transaction()
        producer.begin_transaction()
        for i in range(3):
            producer.send(topic, value=f"dropped-{i}".encode(), partition=0)
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close()
    kept = [f"kept-{i}" for i in range(5)]
    assert kafka_python_read(broker.bootstrap_servers, topic, "read_committed", 5) == kept
    assert kafka_python_read(broker.bootstrap_servers, topic, "read_uncommitted", 8) == sorted(
        kept + [f"dropped-{i}" for i in range(3)])


def test_kafkajs_transactions_commit_and_abort(broker: testing.Broker, name: Callable[[str], str]) -> None:
    topic = broker.create_topic(name("js"))
    transactional_id = name("js-txn")
    encode = [base64.b64encode(f"v{i}".encode()).decode() for i in range(6)]
    run_flow({"brokers": [broker.bootstrap_servers], "steps": [
        {"op": "transaction", "transactionalId": transactional_id, "topic": topic, "values": encode[:4],
         "commit": True},
        {"op": "transaction", "transactionalId": transactional_id, "topic": topic, "values": encode[4:],
         "commit": False},
    ]}, timeout=120)

    def kafkajs_read(count: int, uncommitted: bool) -> list[str]:
        (consumed,) = run_flow({"brokers": [broker.bootstrap_servers], "steps": [
            {"op": "consume", "topic": topic, "group": name("js-reader"), "count": count, "timeoutMs": 8000,
             "readUncommitted": uncommitted}]}, timeout=120)
        return sorted(base64.b64decode(r["value"]).decode() for r in consumed)

    assert kafkajs_read(6, uncommitted=False) == [f"v{i}" for i in range(4)]  # waits out its timeout: none more
    assert kafkajs_read(6, uncommitted=True) == [f"v{i}" for i in range(6)]
    assert values(read_all(broker.bootstrap_servers, topic, 1, "read_committed", 4)) == [f"v{i}" for i in range(4)]


async def test_aiokafka_transactions_commit_and_abort(broker: testing.Broker, name: Callable[[str], str]) -> None:
    topic = broker.create_topic(name("aio"))
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=name("aio-txn"))
    await producer.start()
    try:
        async with producer.transaction():
            for i in range(3):
                await producer.send(topic, f"kept-{i}".encode(), partition=0)
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"dropped", partition=0)
        await producer.abort_transaction()
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, isolation_level="read_committed",
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([AIOTopicPartition(topic, 0)])
        got: list[str] = []

        async def three() -> object:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                got.extend(record.value.decode() for record in records)
            return len(got) >= 3 or not_yet(f"read {got}")

        await wait_for(three, 30, interval=0, what=f"the 3 committed records of {topic}")
        assert sorted(got) == [f"kept-{i}" for i in range(3)]
        assert (await consumer.getmany(timeout_ms=500)) == {}  # nothing of the aborted transaction follows
    finally:
        await consumer.stop()
