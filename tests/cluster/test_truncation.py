"""KIP-320 "Consumer handling of unclean truncation" with real clients against real processes, in
truncation_scenario.py's scenario.

What each client does, from its source (kafka-python 3.0.12 in .venv, librdkafka 2.16 inside confluent-kafka)
and seen here:
- librdkafka: a higher leader epoch in Metadata makes it validate its position with OffsetForLeaderEpoch v2
  (it never sends a LastFetchedEpoch, so DivergingEpoch plays no part). Truncation found: with an
  auto.offset.reset policy it seeks to the broker's end offset for its epoch (debug log only); with
  `auto.offset.reset=error` it stops the partition and reports a consumer error event _AUTO_OFFSET_RESET
  whose text says "Partition log truncation detected ... broker end offset is 3", and the application seeks.
  Its position keeps the epoch of the last record consumed, so a consumer idle at the log end detects too.
- kafka-python: a FENCED_LEADER_EPOCH fetch answer, a newer Metadata epoch or a DivergingEpoch in a Fetch v12
  answer (it sends last_fetched_epoch) leads to OffsetForLeaderEpoch; with auto_offset_reset earliest/latest it
  seeks to the diverging offset (an INFO log line), with 'none' poll() raises LogTruncationError carrying
  {partition: OffsetAndMetadata(3, '', e0)} until the application seeks.
  Its limit: every fetch answer without records sets the position's epoch to -1 (fetcher.py, `PartitionRecords`
  starts with leader_epoch -1 and `_append` stores it as the position's epoch when no record is returned),
  and a position without an epoch is never validated. A consumer that polled on at the log end before the
  election therefore cannot detect the truncation: it fetches at 6 and silently skips x1..x3. The Java
  consumer keeps the last record's epoch; this is kafka-python's defect, not the broker's (our broker answers
  the same OffsetForLeaderEpoch and DivergingEpoch in both cases; with no epoch in the request there is
  nothing to diverge from).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as CkPartition
from kafka import KafkaConsumer, OffsetAndMetadata
from kafka import TopicPartition as KpPartition
from kafka.errors import LogTruncationError

from tests.cluster.support import (
    Cluster,
)
from tests.cluster.truncation_scenario import (
    KEPT,
    NEW,
    OLD,
    TOPIC,
    elect_b_uncleanly,
    write_with_an_unreplicated_tail,
)
from tests.helpers import not_yet, wait_for_sync

pytestmark = pytest.mark.slow

READ_TIMEOUT_S = 15.0


def old_records(epoch: int) -> list[tuple[int, bytes, int]]:
    return [(offset, value, epoch) for offset, value in enumerate(OLD)]


def new_records(epoch: int) -> list[tuple[int, bytes, int]]:
    return [(KEPT + i, value, epoch) for i, value in enumerate(NEW)]


class Lines(logging.Handler):
    """Keeps the messages of one logger (a client's log) for the assertions."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def captured(name: str, level: int) -> Iterator[Lines]:
    logger = logging.getLogger(name)
    lines, before = Lines(), logger.level
    logger.addHandler(lines)
    logger.setLevel(level)
    try:
        yield lines
    finally:
        logger.removeHandler(lines)
        logger.setLevel(before)


# --- confluent-kafka (librdkafka 2.16) ----------------------------------------------------------------------------

Event = tuple[Any, ...]  # ("record", offset, value, leader epoch) | ("eof", offset) | ("error", code, text)


def ck_consumer(bootstrap: str, reset: str, logger: logging.Logger) -> Consumer:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"truncation-{reset}",
                         "enable.auto.commit": False, "auto.offset.reset": reset, "enable.partition.eof": True,
                         "debug": "consumer,fetch,topic", "logger": logger})
    consumer.assign([CkPartition(TOPIC, 0, 0)])
    return consumer


def ck_poll(consumer: Consumer, done: Callable[[list[Event]], bool]) -> list[Event]:
    events: list[Event] = []

    def read() -> object:
        message = consumer.poll(0.2)
        if message is not None:
            error = message.error()
            if error is None:
                events.append(("record", message.offset(), message.value(), message.leader_epoch()))
            elif error.code() == KafkaError._PARTITION_EOF:
                events.append(("eof", message.offset()))
            else:
                events.append(("error", error.code(), error.str()))
        return done(events) or not_yet(events)

    wait_for_sync(read, READ_TIMEOUT_S, interval=0, what="the events awaited")
    return events


def records(events: list[Event]) -> list[tuple[int, bytes, int]]:
    return [event[1:] for event in events if event[0] == "record"]


def at_eof(offset: int) -> Callable[[list[Event]], bool]:
    return lambda events: ("eof", offset) in events


def has_records(count: int) -> Callable[[list[Event]], bool]:
    return lambda events: len(records(events)) >= count or any(event[0] == "error" for event in events)


@pytest.mark.cluster(brokers=2)
async def test_confluent_kafka_detects_the_unclean_truncation_and_resumes_at_the_divergence_point(
        cluster: Cluster) -> None:
    """KIP-320, consumer handling of unclean truncation, librdkafka: two consumers idle at offset 6 (EOF) when B
    is elected uncleanly validate their position with OffsetForLeaderEpoch; with auto.offset.reset=earliest
    the consumer seeks to the divergence point 3 by itself and reads x1..x5 at 3..7 (not m1.. again, not x4 at
    6); with auto.offset.reset=error it reports the truncation at 6 with the broker's end offset 3 and, once
    the application seeks there, reads x1..x5."""
    old_epoch = await write_with_an_unreplicated_tail(cluster)
    with captured("test_truncation.librdkafka", logging.DEBUG) as lines:
        logger = logging.getLogger("test_truncation.librdkafka")
        automatic = ck_consumer(cluster.bootstrap, "earliest", logger)
        manual = ck_consumer(cluster.bootstrap, "error", logger)
        try:
            for consumer in (automatic, manual):  # read m1..m6, then idle at the log end
                events = await asyncio.to_thread(ck_poll, consumer, at_eof(len(OLD)))
                assert records(events) == old_records(old_epoch) and events[-1] == ("eof", len(OLD)), events

            epochs = await elect_b_uncleanly(cluster, old_epoch)

            events = await asyncio.to_thread(ck_poll, automatic, has_records(len(NEW)))
            assert [event for event in events if event[0] != "eof"] == \
                [("record", *record) for record in new_records(epochs.new)], events
            # How it got there: validation of 6 in epoch e0 against the new leader, then a seek to 3.
            validations = [m for m in lines.messages if "querying broker for epoch validation" in m]
            assert any(f"of offset 6 (leader epoch {epochs.old})" in m for m in validations), validations
            assert any(f"Seek {TOPIC} [0] to offset 3 (leader epoch {epochs.old})" in m for m in lines.messages)

            events = await asyncio.to_thread(ck_poll, manual, has_records(len(NEW)))
            assert records(events) == [], events
            (_, code, text), = [event for event in events if event[0] == "error"]
            # librdkafka resets the partition to INVALID and reports that reset; the text names the truncation.
            assert code == KafkaError._AUTO_OFFSET_RESET
            assert f"Partition log truncation detected at offset 6 (leader epoch {epochs.old}): broker end " \
                f"offset is 3 (offset leader epoch {epochs.old})" in text, text
            assert KafkaError(KafkaError._LOG_TRUNCATION).str() in text
            # The partition is left without a position (seek() answers _STATE): assigning it again restarts it.
            manual.assign([CkPartition(TOPIC, 0, KEPT)])
            events = await asyncio.to_thread(ck_poll, manual, has_records(len(NEW)))
            assert records(events) == new_records(epochs.new), events
        finally:
            automatic.close()
            manual.close()


# --- kafka-python 3.0 ---------------------------------------------------------------------------------------------

KP_PARTITION = KpPartition(TOPIC, 0)


def kp_consumer(bootstrap: str, reset: str) -> KafkaConsumer:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset=reset, enable_auto_commit=False)
    consumer.assign([KP_PARTITION])
    consumer.seek(KP_PARTITION, 0)
    return consumer


def kp_position(consumer: KafkaConsumer) -> OffsetAndMetadata:
    """Offset and leader epoch of the position (the epoch is not public: read it from the subscription state,
    the value kafka-python validates with)."""
    return consumer._subscription.assignment[KP_PARTITION].position


def kp_read(consumer: KafkaConsumer, count: int) -> tuple[list[tuple[int, bytes, int]], list[Exception]]:
    """Poll until `count` records or a raised error; stops right after the poll that completes them."""
    got: list[tuple[int, bytes, int]] = []
    raised: list[Exception] = []

    def read() -> object:
        try:
            polled = consumer.poll(timeout_ms=200)
        except Exception as error:  # what poll raises is what is asserted
            raised.append(error)
            return True
        for batch in polled.values():
            got.extend((record.offset, record.value, record.leader_epoch) for record in batch)
        return len(got) >= count or not_yet(f"read {got}")

    wait_for_sync(read, READ_TIMEOUT_S, interval=0, what=f"{count} records or an error")
    return got, raised


def kp_idle_until_the_epoch_is_lost(consumer: KafkaConsumer) -> None:
    """Poll on at the log end until an answer without records has set the position's epoch to -1."""
    def lost() -> object:
        if (position := kp_position(consumer)).leader_epoch == -1:
            return True
        assert consumer.poll(timeout_ms=200) == {}
        return not_yet(position)

    wait_for_sync(lost, READ_TIMEOUT_S, interval=0, what="the position's epoch -1")


@pytest.mark.cluster(brokers=2)
async def test_kafka_python_detects_the_unclean_truncation_and_resumes_at_the_divergence_point(
        cluster: Cluster) -> None:
    """KIP-320, consumer handling of unclean truncation, kafka-python: two consumers that stopped polling right
    after m6 (position 6, epoch e0) find the truncation with OffsetForLeaderEpoch (after FENCED_LEADER_EPOCH
    from A, or a DivergingEpoch from B); auto_offset_reset=earliest logs it and seeks to 3, reading x1..x5;
    auto_offset_reset='none' raises LogTruncationError naming offset 3 in epoch e0 and reads x1..x5 once the
    application seeks there."""
    old_epoch = await write_with_an_unreplicated_tail(cluster)
    with captured("kafka.consumer.fetcher", logging.INFO) as lines:
        automatic = kp_consumer(cluster.bootstrap, "earliest")
        manual = kp_consumer(cluster.bootstrap, "none")
        try:
            for consumer in (automatic, manual):
                assert await asyncio.to_thread(kp_read, consumer, len(OLD)) == (old_records(old_epoch), [])
                assert kp_position(consumer) == OffsetAndMetadata(len(OLD), "", old_epoch)

            epochs = await elect_b_uncleanly(cluster, old_epoch)
            divergence = OffsetAndMetadata(KEPT, "", epochs.old)

            assert await asyncio.to_thread(kp_read, automatic, len(NEW)) == (new_records(epochs.new), [])
            assert f"Truncation detected for {KP_PARTITION} at position 6; seeking to first diverging offset " \
                f"{divergence}" in lines.messages, lines.messages

            got, raised = await asyncio.to_thread(kp_read, manual, len(NEW))
            assert got == []
            (error,) = raised
            assert isinstance(error, LogTruncationError)
            assert error.divergent_offsets == {KP_PARTITION: divergence}
            manual.seek(KP_PARTITION, error.divergent_offsets[KP_PARTITION].offset)
            assert await asyncio.to_thread(kp_read, manual, len(NEW)) == (new_records(epochs.new), [])
        finally:
            automatic.close()
            manual.close()


@pytest.mark.cluster(brokers=2)
async def test_kafka_python_idle_at_the_log_end_cannot_detect_the_truncation_and_skips_x1_to_x3(
        cluster: Cluster) -> None:
    """KIP-320, consumer handling of unclean truncation, kafka-python's limit (module docstring): a consumer that
    polled on at the log end after m6 holds position 6 with no epoch (an empty fetch answer cleared it), so it
    has nothing to validate; even with auto_offset_reset='none' it raises nothing after the unclean election
    and reads x4, x5 at 6, 7, silently skipping x1..x3 at 3..5. Asserted as the client's documented behaviour
    against a broker that answers the divergence correctly (checked in elect_b_uncleanly)."""
    old_epoch = await write_with_an_unreplicated_tail(cluster)
    consumer = kp_consumer(cluster.bootstrap, "none")
    try:
        assert await asyncio.to_thread(kp_read, consumer, len(OLD)) == (old_records(old_epoch), [])
        await asyncio.to_thread(kp_idle_until_the_epoch_is_lost, consumer)
        assert kp_position(consumer) == OffsetAndMetadata(len(OLD), "", -1)

        epochs = await elect_b_uncleanly(cluster, old_epoch)

        skipped = len(OLD) - KEPT
        assert await asyncio.to_thread(kp_read, consumer, len(NEW) - skipped) == \
            (new_records(epochs.new)[skipped:], [])
        assert kp_position(consumer) == OffsetAndMetadata(KEPT + len(NEW), "", epochs.new)
    finally:
        consumer.close()
