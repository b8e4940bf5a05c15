"""compression.type (Kafka's values): `producer` stores batches as they came; a codec makes the leader encode
every batch with another codec again with it (storage/log_validator.py), keeping records, offsets, timestamps
and the producer's id, epoch and sequences; as a topic config it changes with IncrementalAlterConfigs, at once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from epoch_broker.broker.app import Broker
from epoch_broker.client.aio import KafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import create_topics
from epoch_broker.protocol.records import Compression, build_batch, iter_batches, iter_records
from epoch_broker.storage.log import LogConfig, PartitionLog
from tests.broker.conftest import create_topic


def stored(directory: Path) -> list[tuple[Compression, int, list[bytes | None]]]:
    """(codec, base offset, values) of every batch in the partition's segment files."""
    found = []
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        for pos, header in iter_batches(data):
            found.append((header.compression, header.base_offset, [r.value for r in iter_records(data, pos, header)]))
    return found


def test_a_batch_with_another_codec_is_stored_recompressed_with_its_records_and_producer_fields(tmp_path: Path) -> None:
    log = PartitionLog.open(str(tmp_path / "t-0"), LogConfig(compression_type="zstd"), clock=lambda: 1000)
    sent = build_batch([(b"k", f"v{i}".encode(), [("h", b"x")], 500 + i) for i in range(5)],
                       compression=Compression.LZ4, producer_id=7, producer_epoch=2, base_sequence=0)
    kept = build_batch([(b"k", b"z", [], 600)], compression=Compression.ZSTD, producer_id=7, producer_epoch=2,
                       base_sequence=5)
    assert log.append_as_leader(bytearray(sent), leader_epoch=3).last_offset == 4
    assert log.append_as_leader(bytearray(kept), leader_epoch=3).first_offset == 5
    data = b"".join(p.read_bytes() for p in sorted((tmp_path / "t-0").glob("*.log")))
    batches = list(iter_batches(data))
    assert [(h.compression, h.base_offset, h.partition_leader_epoch, h.producer_id, h.producer_epoch,
             h.base_sequence, h.records_count) for _, h in batches] == [
        (Compression.ZSTD, 0, 3, 7, 2, 0, 5), (Compression.ZSTD, 5, 3, 7, 2, 5, 1)]
    records = list(iter_records(data, *batches[0]))
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records] == [
        (i, 500 + i, b"k", f"v{i}".encode(), [("h", b"x")]) for i in range(5)]
    log.close()


def test_producer_keeps_every_codec_as_it_came(tmp_path: Path) -> None:
    log = PartitionLog.open(str(tmp_path / "t-0"), LogConfig(), clock=lambda: 1000)
    for codec in (Compression.GZIP, Compression.NONE, Compression.SNAPPY):
        log.append_as_leader(build_batch([(b"k", b"v", [], 1)], compression=codec), leader_epoch=0)
    assert [codec for codec, _, _ in stored(tmp_path / "t-0")] == [Compression.GZIP, Compression.NONE,
                                                                   Compression.SNAPPY]
    log.close()


async def test_a_topics_codec_applies_to_a_real_producers_batches_and_changes_at_once(
        broker: Broker, client: KafkaClient) -> None:
    """confluent-kafka sends lz4 with idempotence to a zstd topic: stored zstd, read back whole; the topic changed
    to `uncompressed` with IncrementalAlterConfigs stores the next batches uncompressed, with no restart."""
    await create_topic(client, "squeezed", compression_type="zstd")
    bootstrap = f"127.0.0.1:{broker.advertised.port}"
    await asyncio.to_thread(_produce, bootstrap, "squeezed", [f"a{i}".encode() for i in range(100)])
    directory = Path(broker.config.log_dirs[0]) / "squeezed-0"
    assert {codec for codec, _, _ in stored(directory)} == {Compression.ZSTD}

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("TOPIC", "squeezed", incremental_configs=[
        ConfigEntry("compression.type", "uncompressed", incremental_operation=AlterConfigOpType.SET)])
    await asyncio.to_thread(admin.incremental_alter_configs([resource])[resource].result, 30)
    await asyncio.to_thread(_produce, bootstrap, "squeezed", [f"b{i}".encode() for i in range(100)])
    batches = stored(directory)
    assert batches[-1][0] == Compression.NONE and {codec for codec, _, _ in batches} == {Compression.ZSTD,
                                                                                       Compression.NONE}
    values = await asyncio.to_thread(_consume, bootstrap, "squeezed", 200)
    assert values == [f"a{i}".encode() for i in range(100)] + [f"b{i}".encode() for i in range(100)]


@pytest.mark.parametrize("value", ["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"])
async def test_every_kafka_compression_type_is_accepted_and_described(client: KafkaClient, value: str) -> None:
    await create_topic(client, f"t-{value}", compression_type=value)
    bootstrap = f"127.0.0.1:{client.port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("TOPIC", f"t-{value}")
    described = await asyncio.to_thread(admin.describe_configs([resource])[resource].result, 30)
    assert described["compression.type"].value == value


async def test_an_unknown_compression_type_is_refused(client: KafkaClient) -> None:
    topic = create_topics.REQUEST.CreatableTopic(name="bad", num_partitions=1, replication_factor=1, configs=[
        create_topics.REQUEST.CreatableTopicConfig(name="compression.type", value="brotli")])
    response = await client.request(create_topics.API, 7, create_topics.REQUEST.cls(topics=[topic]))
    assert response.topics[0].error_code == ErrorCode.INVALID_CONFIG
    assert "compression.type" in response.topics[0].error_message


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "enable.idempotence": True,
                         "linger.ms": 5})
    for value in values:
        producer.produce(topic, value, key=b"k")
    assert producer.flush(30) == 0


def _consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        values: list[bytes] = []
        while len(values) < count:
            messages = consumer.consume(num_messages=count, timeout=10)
            assert messages, f"read {len(values)} of {count}"
            for message in messages:
                assert message.error() is None, message.error()
                values.append(message.value())
        return values
    finally:
        consumer.close()
