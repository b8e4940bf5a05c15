"""aiokafka 0.14 (asyncio; ApiVersions v0, InitProducerId v0) against a broker process: every matrix flow."""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.client import AIOKafkaClient

from tests.helpers import not_yet, wait_for
from tests.interop.support import ACKS, CODECS, Rec, Target, assert_records, make_records, topic_name

pytestmark = pytest.mark.interop

ACKS_VALUE: dict[str, int | str] = {"0": 0, "1": 1, "all": "all"}


async def topics(broker: Target) -> set[str]:
    a = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await a.start()
    try:
        return set(await a.list_topics())
    finally:
        await a.close()


async def wait_for_topic(broker: Target, name: str, present: bool = True, timeout: float = 10.0) -> None:
    async def settled() -> bool:
        return (name in await topics(broker)) == present

    await wait_for(settled, timeout, interval=0.1, what=f"topic {name} {'listed' if present else 'gone'}")


async def create_topic(broker: Target, name: str, partitions: int = 1) -> None:
    a = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await a.start()
    try:
        await a.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    finally:
        await a.close()
    await wait_for_topic(broker, name)


async def produce(broker: Target, topic: str, recs: list[Rec], **conf: object) -> None:
    p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5, **conf)
    await p.start()
    try:
        futures = [await p.send(topic, value=r.value, key=r.key, headers=list(r.headers), partition=0,
                                timestamp_ms=r.timestamp) for r in recs]
        await p.flush()
        for f in futures:
            await f  # raises the produce error, if any
    finally:
        await p.stop()


async def consume(broker: Target, topic: str, n: int, *, offset: int | None = None) -> list[Rec]:
    """assign() + seek (or seek_to_beginning) on partition 0, no group."""
    c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    await c.start()
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        if offset is None:
            await c.seek_to_beginning(tp)
        else:
            c.seek(tp, offset)
        out: list[Rec] = []

        async def read() -> object:
            for msgs in (await c.getmany(timeout_ms=500)).values():
                out.extend(Rec(key=m.key, value=m.value, headers=tuple(m.headers), timestamp=m.timestamp) for m in msgs)
            return len(out) >= n or not_yet(f"{len(out)} read")

        await wait_for(read, 20, interval=0, what=f"{n} records of {topic}")
        return out
    finally:
        await c.stop()


async def test_metadata_lists_the_broker_and_topic_partitions(broker: Target) -> None:
    name = topic_name("aio-meta")
    await create_topic(broker, name, partitions=2)
    client = AIOKafkaClient(bootstrap_servers=broker.bootstrap)
    await client.bootstrap()
    try:
        cluster = await client.fetch_all_metadata()
        assert cluster.partitions_for_topic(name) == {0, 1}
        host, port = broker.bootstrap.rsplit(":", 1)
        assert [(b.host, b.port) for b in cluster.brokers()] == [(host, int(port))]
        assert all(cluster.leader_for_partition(TopicPartition(name, p)) == b.nodeId
                   for p in (0, 1) for b in cluster.brokers())
    finally:
        await client.close()


async def test_create_topic_then_delete_it(broker: Target) -> None:
    name = topic_name("aio-create")
    await create_topic(broker, name, partitions=3)
    a = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await a.start()
    try:
        await a.delete_topics([name])
    finally:
        await a.close()
    await wait_for_topic(broker, name, present=False)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", ACKS)
async def test_produce_then_consume_from_the_beginning(broker: Target, acks: str, codec: str) -> None:
    name = topic_name(f"aio-{acks}-{codec}")
    await create_topic(broker, name)
    recs = make_records(30, name)
    await produce(broker, name, recs, acks=ACKS_VALUE[acks], compression_type=None if codec == "none" else codec)
    assert_records(await consume(broker, name, len(recs)), recs)


async def test_idempotent_produce(broker: Target) -> None:
    name = topic_name("aio-idem")
    await create_topic(broker, name)
    recs = make_records(50, name)
    await produce(broker, name, recs, enable_idempotence=True, compression_type="zstd")
    assert_records(await consume(broker, name, len(recs)), recs)


async def test_assign_and_seek_to_a_middle_offset(broker: Target) -> None:
    name = topic_name("aio-seek")
    await create_topic(broker, name)
    recs = make_records(20, name)
    await produce(broker, name, recs)
    assert_records(await consume(broker, name, 13, offset=7), recs[7:])


async def test_list_offsets_earliest_latest_and_by_timestamp(broker: Target) -> None:
    name = topic_name("aio-offsets")
    await create_topic(broker, name)
    recs = make_records(10, name)
    await produce(broker, name, recs)
    c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap)
    await c.start()
    try:
        tp = TopicPartition(name, 0)
        assert await c.beginning_offsets([tp]) == {tp: 0}
        assert await c.end_offsets([tp]) == {tp: 10}
        at = (await c.offsets_for_times({tp: recs[4].timestamp}))[tp]
        assert at is not None and (at.offset, at.timestamp) == (4, recs[4].timestamp)
        later = (await c.offsets_for_times({tp: recs[4].timestamp + 1}))[tp]
        assert later is not None and later.offset == 5
        assert (await c.offsets_for_times({tp: recs[-1].timestamp + 1}))[tp] is None  # nothing that late
    finally:
        await c.stop()
