"""An in-process broker on a free loopback port (the users' fixture), and a raw Kafka client talking to it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from epoch_broker import testing
from epoch_broker.broker.app import Broker
from epoch_broker.client.aio import KafkaClient
from epoch_broker.protocol.messages import create_topics, produce
from epoch_broker.protocol.records import build_batch


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    """The running broker object of the users' in-process fixture (epoch_broker/testing.py): its own thread
    and event loop, its data in tmp_path/data; tests read its state and set its fault flags directly."""
    async with testing.broker(data_dir=tmp_path) as started:
        yield started.server


@pytest.fixture
async def client(broker: Broker) -> AsyncIterator[KafkaClient]:
    async with await KafkaClient.connect(f"127.0.0.1:{broker.advertised.port}") as connected:
        await connected.negotiate()
        yield connected


async def create_topic(client: KafkaClient, name: str, partitions: int = 1, **configs: str) -> Any:
    topic = create_topics.REQUEST.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1,
        configs=[create_topics.REQUEST.CreatableTopicConfig(name=k.replace("_", "."), value=v)
                 for k, v in configs.items()])
    response = await client.request(create_topics.API, 7, create_topics.REQUEST.cls(topics=[topic]))
    assert response.topics[0].error_code == 0, response
    return response.topics[0]


def batch(*values: bytes, **kwargs: Any) -> bytearray:
    return build_batch([(b"k", value, [], None) for value in values], **kwargs)


async def produce_request(client: KafkaClient, topic: str, records: bytes | bytearray, *, partition: int = 0,
                          acks: int = -1, version: int = 10, current_leader_epoch: int = -1) -> Any:
    """One Produce request with one partition; returns the whole response (None for acks=0)."""
    request = produce.REQUEST.cls(acks=acks, timeout_ms=5000, topic_data=[
        produce.REQUEST.TopicProduceData(name=topic, partition_data=[
            produce.REQUEST.PartitionProduceData(index=partition, records=records,
                                                 current_leader_epoch=current_leader_epoch)])])
    return await client.request(produce.API, version, request, expect_response=acks != 0)


async def produce_to(client: KafkaClient, topic: str, records: bytes | bytearray, *, partition: int = 0,
                     acks: int = -1, version: int = 10, current_leader_epoch: int = -1) -> Any:
    """`produce_request`; returns that partition's response (None for acks=0)."""
    response = await produce_request(client, topic, records, partition=partition, acks=acks, version=version,
                                     current_leader_epoch=current_leader_epoch)
    return None if response is None else response.responses[0].partition_responses[0]
