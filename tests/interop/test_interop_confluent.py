"""confluent-kafka 2.16 (librdkafka 2.16) against a broker process: every flow of the interop matrix."""

from __future__ import annotations

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers import not_yet, wait_for_sync
from tests.interop.support import ACKS, CODECS, Rec, Target, assert_records, make_records, topic_name

pytestmark = pytest.mark.interop


def admin(broker: Target) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create_topic(broker: Target, name: str, partitions: int = 1) -> None:
    a = admin(broker)  # keep a reference: a destroyed AdminClient fails its futures
    a.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(15)
    wait_for_topic(broker, name, partitions)


def wait_for_topic(broker: Target, name: str, partitions: int, timeout: float = 10.0) -> None:
    a = admin(broker)

    def ready() -> object:
        t = a.list_topics(topic=name, timeout=5).topics.get(name)
        if (t is not None and t.error is None and len(t.partitions) == partitions
                and all(p.leader >= 0 for p in t.partitions.values())):
            return True
        return not_yet(t and (t.error, len(t.partitions)))

    wait_for_sync(ready, timeout, interval=0.1, what=f"topic {name} ready with {partitions} partitions led")


def produce(broker: Target, topic: str, recs: list[Rec], **conf: str | bool) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **conf})
    errors: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    for r in recs:
        p.produce(topic, value=r.value, key=r.key, headers=list(r.headers), timestamp=r.timestamp,
                  partition=0, on_delivery=on_delivery)
    assert p.flush(20) == 0, "messages still queued after 20 s"
    assert errors == []


def consume(broker: Target, topic: str, n: int, *, offset: int = OFFSET_BEGINNING, partition: int = 0) -> list[Rec]:
    """assign() + seek: start at `offset` of one partition and read n records (no group needed)."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic_name("g"), "enable.auto.commit": False,
                  "enable.partition.eof": False})
    try:
        c.assign([TopicPartition(topic, partition, offset)])
        out: list[Rec] = []

        def read() -> object:
            m = c.poll(0.5)
            if m is not None:
                if m.error() is not None:
                    raise KafkaException(m.error())
                out.append(Rec(key=m.key(), value=m.value(), headers=tuple(m.headers() or ()),
                               timestamp=m.timestamp()[1]))
            return len(out) >= n or not_yet(f"{len(out)} read")

        wait_for_sync(read, 20, interval=0, what=f"{n} records of {topic}")
        return out
    finally:
        c.close()


def test_metadata_names_the_broker_and_an_auto_created_topic(broker: Target) -> None:
    md = admin(broker).list_topics(timeout=10)
    host, port = broker.bootstrap.rsplit(":", 1)
    assert [(b.host, b.port) for b in md.brokers.values()] == [(host, int(port))]
    assert md.controller_id in md.brokers
    name = topic_name("ck-auto")
    # a consumer/producer Metadata request for an unknown topic auto-creates it
    produce(broker, name, make_records(1, "auto"))
    wait_for_topic(broker, name, 1)


def test_create_topic_with_partitions_then_delete_it(broker: Target) -> None:
    name = topic_name("ck-create")
    create_topic(broker, name, partitions=3)
    md = admin(broker).list_topics(topic=name, timeout=5).topics[name]
    assert sorted(md.partitions) == [0, 1, 2]
    for p in md.partitions.values():
        assert p.replicas == [p.leader] and p.isrs == [p.leader]
    a = admin(broker)
    a.delete_topics([name])[name].result(15)
    wait_for_sync(lambda: name not in admin(broker).list_topics(timeout=5).topics, 10, interval=0.1,
                  what=f"topic {name} gone after its delete")


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", ACKS)
def test_produce_then_consume_from_the_beginning(broker: Target, acks: str, codec: str) -> None:
    name = topic_name(f"ck-{acks}-{codec}")
    create_topic(broker, name)
    recs = make_records(30, name)
    produce(broker, name, recs, acks=acks, **{"compression.type": codec})
    assert_records(consume(broker, name, len(recs)), recs)


def test_idempotent_produce(broker: Target) -> None:
    name = topic_name("ck-idem")
    create_topic(broker, name)
    recs = make_records(50, name)
    produce(broker, name, recs, **{"enable.idempotence": True, "compression.type": "lz4"})
    assert_records(consume(broker, name, len(recs)), recs)


def test_assign_and_seek_to_a_middle_offset(broker: Target) -> None:
    name = topic_name("ck-seek")
    create_topic(broker, name)
    recs = make_records(20, name)
    produce(broker, name, recs)
    assert_records(consume(broker, name, 13, offset=7), recs[7:])


def test_list_offsets_earliest_latest_and_by_timestamp(broker: Target) -> None:
    name = topic_name("ck-offsets")
    create_topic(broker, name)
    recs = make_records(10, name)
    produce(broker, name, recs, **{"linger.ms": 50})
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic_name("g")})
    try:
        tp = TopicPartition(name, 0)
        assert c.get_watermark_offsets(tp, timeout=10, cached=False) == (0, 10)
        # by timestamp: the first record whose timestamp is >= the one asked for
        asked = [TopicPartition(name, 0, recs[4].timestamp), TopicPartition(name, 0, recs[4].timestamp + 1),
                 TopicPartition(name, 0, recs[-1].timestamp + 1)]
        got = [c.offsets_for_times([tp_], timeout=10)[0].offset for tp_ in asked]
        assert got == [4, 5, -1]  # -1: no record that late (Kafka answers offset -1)
    finally:
        c.close()
