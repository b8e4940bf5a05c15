"""cleanup.policy=compact on a running broker with a real client (confluent-kafka): the log cleaner runs by itself
(log.cleaner.backoff.ms) in a worker thread; a consumer from offset 0 then reads the latest value of every key at
the offset its producer was told, tombstoned keys disappear after delete.retention.ms, and a restart keeps the
cleaned log readable."""

from __future__ import annotations

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from epoch_broker import testing
from epoch_broker.storage.log import PartitionLog

TOPIC = "compacted"
KEYS = 100
TOMBSTONED = [b"key-%d" % i for i in range(10)]
Record = tuple[int, bytes, bytes | None]  # offset, key, value


def produce(bootstrap: str, records: list[tuple[bytes, bytes | None]]) -> dict[tuple[bytes, bytes | None], int]:
    """Send, wait for every delivery report; returns the offset each record was given."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    offsets: dict[tuple[bytes, bytes | None], int] = {}

    def delivered(error: object, message: object) -> None:
        assert error is None, error
        offsets[(message.key(), message.value())] = message.offset()  # type: ignore[attr-defined]

    for key, value in records:
        producer.produce(TOPIC, value, key=key, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(30) == 0
    return offsets


def consume_all(bootstrap: str) -> list[Record]:
    """Every record from offset 0 to the high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        found: list[Record] = []
        while not found or found[-1][0] < high - 1:  # the last record is in the active segment: never cleaned
            message = consumer.poll(10)
            assert message is not None, f"read up to {found[-1][0] if found else None} of {high}"
            assert message.error() is None, message.error()
            found.append((message.offset(), message.key(), message.value()))
        return found
    finally:
        consumer.close()


def compacted_log(broker: testing.Broker) -> PartitionLog:
    log = broker.server.log_manager.get_log(TOPIC, 0)
    assert log is not None
    return log


def check(found: list[Record], delivered: dict[tuple[bytes, bytes | None], int], log: PartitionLog) -> None:
    offsets = [offset for offset, _, _ in found]
    assert offsets == sorted(set(offsets)), "offsets strictly increase"
    assert all(delivered[(key, value)] == offset for offset, key, value in found), "each at its delivered offset"
    latest: dict[bytes, int] = {}
    for (key, _), offset in delivered.items():
        latest[key] = max(latest.get(key, -1), offset)
    assert {key: offset for offset, key, _ in found if key not in TOMBSTONED} == {
        key: offset for key, offset in latest.items() if key not in TOMBSTONED}, "the latest value of every key"
    cleaned = [offset for offset in offsets if offset < log.active_segment.base_offset]
    assert len(cleaned) <= KEYS and len(found) <= KEYS + log.log_end_offset - log.active_segment.base_offset


def test_a_compacted_topic_keeps_the_latest_value_of_each_key_at_its_offset_and_drops_expired_tombstones() -> None:
    with testing.broker(config={"log.cleaner.backoff.ms": "100"}) as broker:
        broker.create_topic(TOPIC, config={"cleanup.policy": "compact", "segment.bytes": "16384",
                                           "delete.retention.ms": "3000", "min.cleanable.dirty.ratio": "0.01"})
        updates = [(b"key-%d" % (i % KEYS), b"value-%d" % i) for i in range(10_000)]
        delivered = produce(broker.bootstrap_servers, updates)
        delivered |= produce(broker.bootstrap_servers, [(key, None) for key in TOMBSTONED])
        # more updates of the other keys, so that the tombstones leave the active segment
        delivered |= produce(broker.bootstrap_servers,
                             [(b"key-%d" % (10 + i % (KEYS - 10)), b"later-%d" % i) for i in range(2000)])
        log = compacted_log(broker)
        testing.wait_until(lambda: log.first_dirty_offset == log.active_segment.base_offset,
                           "the cleaner cleaned every segment but the active one")
        check(consume_all(broker.bootstrap_servers), delivered, log)
        assert log.size - log.active_segment.size < 16384

        testing.wait_until(lambda: not any(key in TOMBSTONED for _, key, _ in consume_all(broker.bootstrap_servers)),
                           "the tombstoned keys are gone once delete.retention.ms has passed")
        before = consume_all(broker.bootstrap_servers)
        check(before, delivered, log)

        broker.restart()
        assert consume_all(broker.bootstrap_servers) == before
        check(before, delivered, compacted_log(broker))
