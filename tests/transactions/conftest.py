"""Fixtures of the transaction tests: one in-process broker per module (a fast abort check for hung transactions),
distinct topics and transactional ids per test."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from epoch_broker import testing
from tests.helpers import not_yet, wait_for_sync

ABORT_CHECK_MS = "100"  # transaction.abort.timed.out.transaction.cleanup.interval.ms: hung ones go quickly


@pytest.fixture(scope="module")
def broker() -> Iterator[testing.Broker]:
    with testing.broker(config={"transaction.abort.timed.out.transaction.cleanup.interval.ms": ABORT_CHECK_MS}) as b:
        yield b


@pytest.fixture
def name() -> Callable[[str], str]:
    """A fresh name for a topic or transactional id."""
    return lambda prefix: f"{prefix}-{uuid.uuid4().hex[:8]}"


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str, expected: int,
             timeout_s: float = 30.0) -> list[tuple[int, int, str]]:
    """(partition, offset, value) of what a consumer with `isolation` reads from the start, until it has `expected`
    records and then reaches the end of every partition (so nothing past `expected` is missed)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple[int, int, str]] = []
    at_end: set[int] = set()

    def read() -> object:
        message = consumer.poll(0.2)
        if message is not None and message.error():
            if message.error().code() != message.error()._PARTITION_EOF:
                raise AssertionError(f"consumer error: {message.error()}")
            at_end.add(message.partition())
        elif message is not None:
            at_end.discard(message.partition())
            got.append((message.partition(), message.offset(), message.value().decode()))
        return (len(got) >= expected and len(at_end) == partitions) or not_yet(
            f"{len(got)} read, at the end of partitions {sorted(at_end)}")

    try:
        wait_for_sync(read, timeout_s, interval=0,
                      what=f"{expected} records of {topic} ({isolation}) and the end of its {partitions} partitions")
    finally:
        consumer.close()
    return sorted(got)


def values(records: list[tuple[int, int, str]]) -> list[str]:
    return sorted(value for _, _, value in records)


def producer_config(bootstrap: str, transactional_id: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5, **extra}
