"""What the Spark tests share: topics made and read back with confluent-kafka (the reference the rows of the
`kafka-epoch` source are checked against), a streaming read and a sink gathering its rows, and waiting for a
condition from synchronous test code."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers import not_yet, wait_for_sync

T = TypeVar("T")


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: the futures need the handle alive
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int) -> None:
    """`values` spread over the partitions in turn (value i to partition i % partitions)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % partitions)
    assert producer.flush(30) == 0


def consumed(bootstrap: str, topic: str, partitions: int) -> list[tuple[Any, ...]]:
    """Every record of the topic up to its high watermarks, as the source's columns (headers included), in
    partition and offset order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-check", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        rows: list[tuple[Any, ...]] = []
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}

        def read() -> object:
            if len(rows) >= sum(ends.values()):
                return True
            for message in consumer.consume(1000, timeout=1.0):
                assert message.error() is None
                rows.append((message.key(), message.value(), message.topic(), message.partition(), message.offset(),
                             message.timestamp()[1], message.timestamp()[0] - 1,
                             [(k, v) for k, v in (message.headers() or [])], message.leader_epoch()))
            return not_yet(f"{len(rows)} read")

        wait_for_sync(read, 60, interval=0, what=f"the {sum(ends.values())} records of {topic}")
        return sorted(rows, key=lambda r: (r[3], r[4]))
    finally:
        consumer.close()


def wait_until(predicate: Callable[[], T], timeout: float = 60.0, what: str = "condition") -> T:
    """tests/helpers.py's wait_for_sync with the Spark tests' bounds (a query's batch takes its time)."""
    return wait_for_sync(predicate, timeout=timeout, interval=0.1, what=what)


def stream(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.readStream.format("kafka-epoch").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


class Collected:
    """A foreachBatch sink: every row's (topic, partition, offset, value), gathered on the driver."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, int, int, bytes]] = []
        self.lock = threading.Lock()

    def __call__(self, frame: Any, batch_id: int) -> None:
        rows = [(r.topic, r.partition, r.offset, bytes(r.value)) for r in frame.collect()]
        with self.lock:
            self.rows += rows

    def snapshot(self) -> list[tuple[str, int, int, bytes]]:
        with self.lock:
            return sorted(self.rows)


def read_back(bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed"
              ) -> list[tuple[bytes | None, bytes, int, int]]:
    """Every record of the topic a consumer at `isolation` returns, read until each partition's end (its last
    stable offset under read_committed): (key, value, partition, offset), in partition and offset order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-check", "enable.auto.commit": False,
                         "isolation.level": isolation, "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        rows: list[tuple[bytes | None, bytes, int, int]] = []
        at_end: set[int] = set()

        def read() -> object:
            for message in consumer.consume(1000, timeout=1.0):
                if message.error() is not None:
                    assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                    at_end.add(message.partition())
                else:
                    at_end.discard(message.partition())
                    rows.append((message.key(), message.value(), message.partition(), message.offset()))
            return len(at_end) == partitions or not_yet(f"{len(rows)} read, at the end of {sorted(at_end)}")

        wait_for_sync(read, 60, interval=0, what=f"{topic} to its end ({isolation})")
        return sorted(rows, key=lambda r: (r[2], r[3]))
    finally:
        consumer.close()
