"""Metadata v13 (Kafka 4.0, KIP-1102): a top-level error code, NONE from this broker as from Kafka's, and
REBOOTSTRAP_REQUIRED on demand through the request fault rules, which librdkafka answers by bootstrapping again."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from epoch_broker import testing
from epoch_broker.client.aio import KafkaClient
from epoch_broker.drill.admin import alter_faults
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import metadata
from tests.helpers import wait_for_sync


async def test_metadata_v13_answers_a_top_level_error_code_of_none(tmp_path: Path) -> None:
    async with testing.broker(data_dir=tmp_path) as started:
        started.create_topic("t")
        async with await KafkaClient.connect(started.bootstrap_servers) as client:
            request = metadata.REQUEST.cls(topics=[metadata.REQUEST.MetadataRequestTopic(name="t")])
            answer = await client.request(metadata.API, 13, request)
            assert answer.error_code == ErrorCode.NONE
            assert [(t.name, t.error_code, len(t.partitions)) for t in answer.topics] == [("t", 0, 1)]


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_rebootstrap_required_makes_librdkafka_bootstrap_again_and_carry_on(tmp_path: Path) -> None:
    lines = _Lines()
    logger = logging.getLogger("test_rebootstrap.librdkafka")
    logger.addHandler(lines)
    logger.setLevel(logging.DEBUG)
    with testing.broker(data_dir=tmp_path, config={"fault.hooks.enable": "true"}) as started:
        started.create_topic("t")
        producer = Producer({"bootstrap.servers": started.bootstrap_servers, "debug": "metadata",
                             "logger": logger, "topic.metadata.refresh.interval.ms": 200})
        producer.produce("t", b"before")
        assert producer.flush(10) == 0
        rule = "error=REBOOTSTRAP_REQUIRED,count=1"
        asyncio.run(alter_faults(started.bootstrap_servers, 0, {"fault.request.metadata": rule}))

        def rebootstrapped() -> bool:
            producer.poll(0.05)
            return any("top level error code 129" in line for line in lines.lines) and any(
                "Starting re-bootstrap sequence" in line for line in lines.lines)

        wait_for_sync(rebootstrapped, timeout=30)
        producer.produce("t", b"after")
        assert producer.flush(10) == 0
        consumer = Consumer({"bootstrap.servers": started.bootstrap_servers, "group.id": "g"})
        consumer.assign([TopicPartition("t", 0, 0)])
        values = [message.value() for message in consumer.consume(2, timeout=10)]
        consumer.close()
        assert values == [b"before", b"after"]
    logger.removeHandler(lines)
