"""`kafka.isolation.level` of the `kafka-epoch` source (issue 31, item 1): read_committed reads stop at the last
stable offset and skip aborted transactions and markers, row for row as a read_committed confluent-kafka consumer
reads them (values, offsets, leader epochs); read_uncommitted, the default, reads every record. Transactions are
made with confluent-kafka's transactional producer against a broker process."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from epoch_broker.client.completed_fetch import READ_COMMITTED, READ_UNCOMMITTED
from epoch_broker.spark.kafka import fetched_range
from epoch_broker.spark.options import OptionError, parse_source_options
from tests.client.test_completed_fetch import log_of
from tests.helpers import BrokerProcess, not_yet, start_broker, wait_for_sync
from tests.spark.support import Collected, create, stream, wait_until

Row = tuple[int, int, bytes, int]  # partition, offset, value, leader epoch
TXN = 50  # records per transaction


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """The Spark tests' broker, with one transaction state partition (its 50 would only slow the start)."""
    process = start_broker(tmp_path_factory.mktemp("spark-txn"), {"offsets.topic.num.partitions": "1",
                                                                  "transaction.state.log.num.partitions": "1"})
    yield process
    process.stop()


@pytest.mark.parametrize(("given", "level"), [
    (None, READ_UNCOMMITTED),
    ("read_uncommitted", READ_UNCOMMITTED),
    ("read_committed", READ_COMMITTED),
    (" Read_Committed ", READ_COMMITTED),
])
def test_the_isolation_level_is_read_uncommitted_unless_read_committed_is_asked(given: str | None,
                                                                               level: int) -> None:
    raw = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}
    if given is not None:
        raw["kafka.isolation.level"] = given
    assert parse_source_options(raw).isolation_level == level


@pytest.mark.parametrize("given", ["snapshot", "", "1"])
def test_an_unknown_isolation_level_is_one_clear_error(given: str) -> None:
    message = f"option kafka.isolation.level must be read_uncommitted or read_committed, not '{given}'"
    with pytest.raises(OptionError, match=f"^{re.escape(message)}$"):
        parse_source_options({"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t",
                              "kafka.isolation.level": given})


LOG = "t1:0-1@3 C1:2@3 t2:3-4@4 A2:5@4 t1:6-7@4 C1:8@4"  # tests/client/test_completed_fetch.py's notation


@pytest.mark.parametrize(("isolation", "start", "end", "offsets", "end_epoch"), [
    (READ_COMMITTED, 0, 9, [0, 1, 6, 7], 4),  # the last offset is the commit marker's
    (READ_UNCOMMITTED, 0, 9, [0, 1, 3, 4, 6, 7], 4),
    (READ_COMMITTED, 1, 3, [1], 3),  # the first batch read from its middle, up to its commit marker
    (READ_COMMITTED, 4, 7, [6], 4),  # from inside the aborted transaction into the middle of a batch
    (READ_UNCOMMITTED, 4, 7, [4, 6], 4),
    (READ_COMMITTED, 0, 20, [0, 1, 6, 7], None),  # the range goes on past this answer
])
def test_a_fetch_answer_gives_the_rows_of_the_range_and_the_epoch_of_the_batch_before_its_end(
        isolation: int, start: int, end: int, offsets: list[int], end_epoch: int | None) -> None:
    fetched, next_offset, last_epoch = fetched_range(log_of(LOG), isolation, [(2, 3)], start, end, start, -1)
    assert fetched.rows is not None
    assert memoryview(fetched.rows.offsets).cast("q")[:fetched.rows.rows].tolist() == offsets
    epochs = memoryview(fetched.rows.leader_epochs).cast("i")[:fetched.rows.rows].tolist()
    assert epochs == [3 if offset < 2 else 4 for offset in offsets]
    assert fetched.end_epoch == end_epoch
    assert (next_offset, last_epoch) == (9, 4)  # past every batch of the answer, skipped or not


def test_an_empty_fetch_answer_leaves_the_read_where_it_was() -> None:
    fetched, next_offset, last_epoch = fetched_range(b"", READ_COMMITTED, [], 5, 9, 5, 2)
    assert (fetched.rows, fetched.end_epoch, next_offset, last_epoch) == (None, None, 5, 2)


def transactional_producer(bootstrap: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"spark-{uuid.uuid4().hex[:8]}",
                         "linger.ms": 5})
    producer.init_transactions(30)
    return producer


def committed_aborted_committed(bootstrap: str, topic: str, partitions: int) -> None:
    """Three transactions of TXN records each over the partitions in turn: committed, aborted (its records in
    the log before the abort), committed."""
    producer = transactional_producer(bootstrap)
    for name in ("first", "aborted", "second"):
        producer.begin_transaction()
        for i in range(TXN):
            producer.produce(topic, b"%s %d" % (name.encode(), i), partition=i % partitions)
        if name == "aborted":
            assert producer.flush(30) == 0
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)


def consumer_rows(bootstrap: str, topic: str, partitions: int, isolation: str, expected: int) -> list[Row]:
    """What a confluent-kafka consumer with `isolation` reads from the start: `expected` records, then the end
    of every partition (so nothing past them is missed)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                         "isolation.level": isolation, "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    rows: list[Row] = []
    at_end: set[int] = set()

    def read() -> object:
        message = consumer.poll(0.2)
        if message is not None and message.error():
            assert message.error().code() == message.error()._PARTITION_EOF, message.error()
            at_end.add(message.partition())
        elif message is not None:
            at_end.discard(message.partition())
            rows.append((message.partition(), message.offset(), message.value(), message.leader_epoch()))
        return (len(rows) >= expected and len(at_end) == partitions) or not_yet(
            f"{len(rows)} read, at the end of partitions {sorted(at_end)}")

    try:
        wait_for_sync(read, 60, interval=0, what=f"{expected} records of {topic} ({isolation})")
    finally:
        consumer.close()
    return sorted(rows)


def spark_rows(spark: Any, bootstrap: str, topic: str, **options: str) -> list[Row]:
    reader = spark.read.format("kafka-epoch").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return sorted((r.partition, r.offset, bytes(r.value), r.leaderEpoch) for r in reader.load().collect())


def watermarks(bootstrap: str, topic: str, isolation: str) -> tuple[int, int]:
    """(log start, end) of partition 0 as a consumer with `isolation` sees it: the end is the last stable offset
    under read_committed, the high watermark otherwise."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks", "isolation.level": isolation})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return low, high
    finally:
        consumer.close()


@pytest.mark.slow
def test_read_committed_skips_the_aborted_transaction_as_a_consumer_does(spark: Any,
                                                                        broker: BrokerProcess) -> None:
    topic, partitions = "txn-read", 2
    create(broker.bootstrap, topic, partitions)
    committed_aborted_committed(broker.bootstrap, topic, partitions)

    committed = spark_rows(spark, broker.bootstrap, topic, **{"kafka.isolation.level": "read_committed"})
    assert committed == consumer_rows(broker.bootstrap, topic, partitions, "read_committed", 2 * TXN)
    assert len(committed) == 2 * TXN and not [row for row in committed if row[2].startswith(b"aborted")]
    # the markers' and the aborted records' offsets are holes, never rows: 25 + marker + 25 + marker + 25 + marker
    assert [offset for p, offset, _, _ in committed if p == 0] == [*range(25), *range(52, 77)]

    everything = spark_rows(spark, broker.bootstrap, topic)  # read_uncommitted, the default
    assert everything == consumer_rows(broker.bootstrap, topic, partitions, "read_uncommitted", 3 * TXN)
    assert len(everything) == 3 * TXN
    # split ranges start and end inside the aborted transaction: the same rows
    assert spark_rows(spark, broker.bootstrap, topic, minPartitions="7",
                      **{"kafka.isolation.level": "read_committed"}) == committed
    with pytest.raises(Exception, match=re.escape("option kafka.isolation.level must be read_uncommitted or")):
        spark_rows(spark, broker.bootstrap, topic, **{"kafka.isolation.level": "read-committed"})


@pytest.mark.slow
def test_a_read_committed_batch_read_ends_at_the_last_stable_offset_of_an_open_transaction(
        spark: Any, broker: BrokerProcess) -> None:
    topic = "txn-open"
    create(broker.bootstrap, topic, 1)
    committed_aborted_committed(broker.bootstrap, topic, 1)  # offsets 0-152: 150 records, 3 markers
    producer = transactional_producer(broker.bootstrap)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, b"open %d" % i, partition=0)
    assert producer.flush(30) == 0
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(3):
        plain.produce(topic, b"after %d" % i, partition=0)  # committed, but past the open transaction
    assert plain.flush(30) == 0
    stable = 3 * TXN + 3  # the open transaction's first offset
    assert watermarks(broker.bootstrap, topic, "read_committed") == (0, stable)
    assert watermarks(broker.bootstrap, topic, "read_uncommitted") == (0, stable + 8)

    read_committed = {"kafka.isolation.level": "read_committed"}
    before = spark_rows(spark, broker.bootstrap, topic, **read_committed)
    assert before == consumer_rows(broker.bootstrap, topic, 1, "read_committed", 2 * TXN)
    assert max(offset for _, offset, _, _ in before) < stable
    assert len(spark_rows(spark, broker.bootstrap, topic)) == 3 * TXN + 8  # read_uncommitted: past it

    producer.commit_transaction(30)
    after = spark_rows(spark, broker.bootstrap, topic, **read_committed)
    assert after == consumer_rows(broker.bootstrap, topic, 1, "read_committed", 2 * TXN + 8)
    assert [value for _, offset, value, _ in after if offset >= stable] == [
        *(b"open %d" % i for i in range(5)), *(b"after %d" % i for i in range(3))]


@pytest.mark.slow
def test_a_read_committed_stream_reads_committed_records_once_and_waits_for_an_open_transaction(
        spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    topic = "txn-stream"
    create(broker.bootstrap, topic, 1)
    committed_aborted_committed(broker.bootstrap, topic, 1)
    collected = Collected()
    # micro-batches of 40 offsets end inside the aborted transaction and start again inside it
    query = (stream(spark, broker.bootstrap, subscribe=topic, maxOffsetsPerTrigger="40",
                    **{"kafka.isolation.level": "read_committed"})
             .writeStream.foreachBatch(collected).option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="200 milliseconds").start())

    def end_offset() -> dict[str, Any]:
        progress = query.lastProgress
        return json.loads(progress["sources"][0]["endOffset"]) if progress else {}

    try:
        wait_until(lambda: len(collected.snapshot()) == 2 * TXN, what="the two committed transactions")
        producer = transactional_producer(broker.bootstrap)
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, b"open %d" % i, partition=0)
        assert producer.flush(30) == 0
        stable = 3 * TXN + 3
        # the query's offsets stop at the open transaction's first offset, with the epoch of the marker before it
        wait_until(lambda: end_offset() == {topic: {"0": {"offset": stable, "leaderEpoch": 0}}},
                   what="the query's end offset at the last stable offset")
        assert len(collected.snapshot()) == 2 * TXN
        producer.commit_transaction(30)
        wait_until(lambda: len(collected.snapshot()) == 2 * TXN + 5, what="the committed transaction's records")
        wait_until(lambda: end_offset() == {topic: {"0": {"offset": stable + 6, "leaderEpoch": 0}}},
                   what="the query's end offset past the commit marker")
        assert query.exception() is None
    finally:
        query.stop()
    expected = consumer_rows(broker.bootstrap, topic, 1, "read_committed", 2 * TXN + 5)
    assert collected.snapshot() == [(topic, p, offset, value) for p, offset, value, _ in expected]
