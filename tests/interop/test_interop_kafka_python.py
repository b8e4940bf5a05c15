"""kafka-python 3.0 (pure Python, Kafka 4.x schemas) against a broker process: every flow of the matrix."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from tests.helpers import not_yet, wait_for_sync
from tests.interop.support import ACKS, CODECS, Rec, Target, assert_records, make_records, topic_name

pytestmark = pytest.mark.interop

ACKS_VALUE: dict[str, int | str] = {"0": 0, "1": 1, "all": "all"}


@pytest.fixture(scope="module")
def admin(broker: Target) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    yield a
    a.close()


def wait_for_topic(admin: KafkaAdminClient, name: str, present: bool = True, timeout: float = 10.0) -> None:
    wait_for_sync(lambda: (name in admin.list_topics()) == present, timeout, interval=0.1,
                  what=f"topic {name} {'listed' if present else 'gone'}")


def create_topic(admin: KafkaAdminClient, name: str, partitions: int = 1) -> None:
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    wait_for_topic(admin, name)


def produce(broker: Target, topic: str, recs: list[Rec], **conf: object) -> None:
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5, **conf)
    try:
        futures = [p.send(topic, value=r.value, key=r.key, headers=list(r.headers), partition=0,
                          timestamp_ms=r.timestamp) for r in recs]
        p.flush(20)
        for f in futures:
            f.get(10)  # raises the produce error, if any
    finally:
        p.close(10)


def consume(broker: Target, topic: str, n: int, *, offset: int | None = None) -> list[Rec]:
    """assign() + seek (or seek_to_beginning) on partition 0, no group."""
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, group_id=None)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        if offset is None:
            c.seek_to_beginning(tp)
        else:
            c.seek(tp, offset)
        out: list[Rec] = []

        def read() -> object:
            for msgs in c.poll(timeout_ms=500).values():
                out.extend(Rec(key=m.key, value=m.value, headers=tuple(m.headers), timestamp=m.timestamp) for m in msgs)
            return len(out) >= n or not_yet(f"{len(out)} read")

        wait_for_sync(read, 20, interval=0, what=f"{n} records of {topic}")
        return out
    finally:
        c.close()


def test_metadata_lists_the_broker_and_topics(broker: Target, admin: KafkaAdminClient) -> None:
    name = topic_name("kp-meta")
    create_topic(admin, name, partitions=2)
    cluster = admin.describe_cluster()
    host, port = broker.bootstrap.rsplit(":", 1)
    assert [(b["host"], b["port"]) for b in cluster["brokers"]] == [(host, int(port))]
    [topic] = admin.describe_topics([name])
    assert topic["error_code"] == 0
    assert sorted(p["partition_index"] for p in topic["partitions"]) == [0, 1]
    assert all(p["leader_id"] == cluster["brokers"][0]["broker_id"] for p in topic["partitions"])


def test_create_topic_then_delete_it(admin: KafkaAdminClient) -> None:
    name = topic_name("kp-create")
    create_topic(admin, name, partitions=3)
    admin.delete_topics([name])
    wait_for_topic(admin, name, present=False)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", ACKS)
def test_produce_then_consume_from_the_beginning(broker: Target, admin: KafkaAdminClient, acks: str,
                                                codec: str) -> None:
    name = topic_name(f"kp-{acks}-{codec}")
    create_topic(admin, name)
    recs = make_records(30, name)
    produce(broker, name, recs, acks=ACKS_VALUE[acks], compression_type=None if codec == "none" else codec)
    assert_records(consume(broker, name, len(recs)), recs)


def test_idempotent_produce(broker: Target, admin: KafkaAdminClient) -> None:
    name = topic_name("kp-idem")
    create_topic(admin, name)
    recs = make_records(50, name)
    produce(broker, name, recs, enable_idempotence=True, acks="all", compression_type="gzip")
    assert_records(consume(broker, name, len(recs)), recs)


def test_assign_and_seek_to_a_middle_offset(broker: Target, admin: KafkaAdminClient) -> None:
    name = topic_name("kp-seek")
    create_topic(admin, name)
    recs = make_records(20, name)
    produce(broker, name, recs)
    assert_records(consume(broker, name, 13, offset=7), recs[7:])


def test_list_offsets_earliest_latest_and_by_timestamp(broker: Target, admin: KafkaAdminClient) -> None:
    name = topic_name("kp-offsets")
    create_topic(admin, name)
    recs = make_records(10, name)
    produce(broker, name, recs)
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    try:
        tp = TopicPartition(name, 0)
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: 10}
        at = c.offsets_for_times({tp: recs[4].timestamp})[tp]
        assert (at.offset, at.timestamp) == (4, recs[4].timestamp)
        assert c.offsets_for_times({tp: recs[4].timestamp + 1})[tp].offset == 5
        assert c.offsets_for_times({tp: recs[-1].timestamp + 1})[tp] is None  # nothing that late
    finally:
        c.close()
