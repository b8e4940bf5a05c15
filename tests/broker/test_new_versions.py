"""The versions Kafka 3.6-4.2 added to Produce (v11-13), Fetch (v17-18), ListOffsets (v10-11) and
AddPartitionsToTxn (v4-5): their bytes against kafka-python's codec of Kafka's 4.x JSON, then their behaviour
through a broker's socket.

kafka-python's codec is an independent reading of the same JSON: it must read what we write and write it back
byte for byte. Behaviour: a v13 produce by topic id read back by a v18 fetch, an unknown topic id, the tiered
storage timestamps of ListOffsets, and AddPartitionsToTxn's broker form (verify-only, TRANSACTION_ABORTABLE as v4
and v5 answer it, CLUSTER_ACTION).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.protocol.producer.transaction import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

from epoch_broker import testing
from epoch_broker.broker.app import Broker
from epoch_broker.client.aio import KafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import (
    add_partitions_to_txn,
    fetch,
    find_coordinator,
    init_producer_id,
    list_offsets,
    produce,
)
from epoch_broker.protocol.records import build_batch
from epoch_broker.protocol.schema import Message
from tests.broker.conftest import batch, create_topic
from tests.helpers import not_yet, wait_for

TOPIC_ID = uuid.UUID("6b3c0e36-1f0a-4c84-9b52-2f1f5f1b7a11").bytes
DIRECTORY_ID = uuid.UUID("0d9bd8f6-9a55-4c4f-a3a1-3c1d35d0a7e2").bytes
RECORDS = bytes(build_batch([(b"order-17", b"paid", [], None)]))


# -- bytes against kafka-python's codec ---------------------------------------------------------------------

def produce_request(version: int) -> Any:
    named = {"topic_id": TOPIC_ID} if version >= 13 else {"name": "orders"}
    return produce.REQUEST.cls(transactional_id="checkout-7", acks=-1, timeout_ms=5000, topic_data=[
        produce.REQUEST.TopicProduceData(**named, partition_data=[
            produce.REQUEST.PartitionProduceData(index=2, records=RECORDS)])])


def produce_response(version: int) -> Any:
    named = {"topic_id": TOPIC_ID} if version >= 13 else {"name": "orders"}
    r = produce.RESPONSE
    return r.cls(throttle_time_ms=0, responses=[r.TopicProduceResponse(**named, partition_responses=[
        r.PartitionProduceResponse(index=2, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER, base_offset=-1,
                                   current_leader=r.LeaderIdAndEpoch(leader_id=1, leader_epoch=7))])],
        node_endpoints=[r.NodeEndpoint(node_id=1, host="broker-1", port=9092, rack="eu-1a")])


def fetch_request(version: int) -> Any:
    q = fetch.REQUEST
    extra = {"high_watermark": 40} if version >= 18 else {}
    return q.cls(replica_state=q.ReplicaState(replica_id=1, replica_epoch=12), max_wait_ms=500, min_bytes=1,
                 max_bytes=1 << 20, topics=[q.FetchTopic(topic_id=TOPIC_ID, partitions=[
                     q.FetchPartition(partition=2, current_leader_epoch=7, fetch_offset=41, last_fetched_epoch=7,
                                      log_start_offset=0, partition_max_bytes=1 << 20,
                                      replica_directory_id=DIRECTORY_ID, **extra)])])


def fetch_response(version: int) -> Any:
    r = fetch.RESPONSE
    return r.cls(responses=[r.FetchableTopicResponse(topic_id=TOPIC_ID, partitions=[
        r.PartitionData(partition_index=2, high_watermark=42, last_stable_offset=42, log_start_offset=0,
                        records=RECORDS)])])


def list_offsets_request(version: int) -> Any:
    q = list_offsets.REQUEST
    partition = q.ListOffsetsPartition(partition_index=2, current_leader_epoch=7, timestamp=-6 if version >= 11 else -5)
    return q.cls(replica_id=-1, isolation_level=1, timeout_ms=3000,
                 topics=[q.ListOffsetsTopic(name="orders", partitions=[partition])])


def list_offsets_response(version: int) -> Any:
    r = list_offsets.RESPONSE
    return r.cls(topics=[r.ListOffsetsTopicResponse(name="orders", partitions=[
        r.ListOffsetsPartitionResponse(partition_index=2, timestamp=-1, offset=-1, leader_epoch=-1)])])


def add_partitions_request(version: int) -> Any:
    q = add_partitions_to_txn.REQUEST
    return q.cls(transactions=[q.AddPartitionsToTxnTransaction(
        transactional_id="checkout-7", producer_id=4001, producer_epoch=3, verify_only=True,
        topics=[q.AddPartitionsToTxnTopic(name="orders", partitions=[0, 2])])])


def add_partitions_response(version: int) -> Any:
    r = add_partitions_to_txn.RESPONSE
    error = ErrorCode.TRANSACTION_ABORTABLE if version >= 5 else ErrorCode.INVALID_TXN_STATE
    return r.cls(results_by_transaction=[r.AddPartitionsToTxnResult(transactional_id="checkout-7", topic_results=[
        r.AddPartitionsToTxnTopicResult(name="orders", results_by_partition=[
            r.AddPartitionsToTxnPartitionResult(partition_index=0, partition_error_code=ErrorCode.NONE),
            r.AddPartitionsToTxnPartitionResult(partition_index=2, partition_error_code=error)])])])


# (ours, kafka-python's, a sample at a version, the new versions)
NEW_VERSIONS: list[tuple[Message, Any, Callable[[int], Any], range]] = [
    (produce.REQUEST, ProduceRequest, produce_request, range(11, 14)),
    (produce.RESPONSE, ProduceResponse, produce_response, range(11, 14)),
    (fetch.REQUEST, FetchRequest, fetch_request, range(17, 19)),
    (fetch.RESPONSE, FetchResponse, fetch_response, range(17, 19)),
    (list_offsets.REQUEST, ListOffsetsRequest, list_offsets_request, range(10, 12)),
    (list_offsets.RESPONSE, ListOffsetsResponse, list_offsets_response, range(10, 12)),
    (add_partitions_to_txn.REQUEST, AddPartitionsToTxnRequest, add_partitions_request, range(4, 6)),
    (add_partitions_to_txn.RESPONSE, AddPartitionsToTxnResponse, add_partitions_response, range(4, 6)),
]


@pytest.mark.parametrize(("message", "theirs", "build", "version"), [
    pytest.param(message, theirs, build, version, id=f"{message.name}-v{version}")
    for message, theirs, build, versions in NEW_VERSIONS for version in versions])
def test_kafka_python_reads_the_new_versions_we_write_and_writes_the_same_bytes(
        message: Message, theirs: Any, build: Callable[[int], Any], version: int) -> None:
    original = build(version)
    encoded = bytes(message.encode(original, version))
    decoded = theirs.decode(encoded, version=version)
    assert bytes(decoded.encode()) == encoded
    assert message.decode(encoded, version) == original


def test_the_new_fields_are_on_the_wire_where_kafka_puts_them() -> None:
    theirs = ProduceRequest.decode(bytes(produce.REQUEST.encode(produce_request(13), 13)), version=13)
    assert theirs.topic_data[0].topic_id == uuid.UUID(bytes=TOPIC_ID)
    partition = FetchRequest.decode(bytes(fetch.REQUEST.encode(fetch_request(18), 18)), version=18).topics[0]
    assert (partition.partitions[0].replica_directory_id, partition.partitions[0].high_watermark) == (
        uuid.UUID(bytes=DIRECTORY_ID), 40)
    assert ListOffsetsRequest.decode(bytes(list_offsets.REQUEST.encode(list_offsets_request(10), 10)),
                                     version=10).timeout_ms == 3000
    transaction = AddPartitionsToTxnRequest.decode(
        bytes(add_partitions_to_txn.REQUEST.encode(add_partitions_request(5), 5)), version=5).transactions[0]
    assert transaction.verify_only is True
    assert fetch.REQUEST.FetchPartition().high_watermark == 2**63 - 1  # Kafka's default: not known


# -- behaviour through a broker's socket --------------------------------------------------------------------

async def produce_by_id(client: KafkaClient, topic_id: bytes, records: bytes | bytearray, partition: int = 0) -> Any:
    request = produce.REQUEST.cls(acks=-1, timeout_ms=5000, topic_data=[produce.REQUEST.TopicProduceData(
        topic_id=topic_id, partition_data=[produce.REQUEST.PartitionProduceData(index=partition, records=records)])])
    return await client.request(produce.API, 13, request)


async def fetch_by_id(client: KafkaClient, topic_id: bytes, offset: int, version: int = 18) -> Any:
    q = fetch.REQUEST
    request = q.cls(max_wait_ms=0, min_bytes=0, topics=[q.FetchTopic(topic_id=topic_id, partitions=[
        q.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])
    return await client.request(fetch.API, version, request)


async def list_offset(client: KafkaClient, topic: str, timestamp: int, version: int) -> Any:
    q = list_offsets.REQUEST
    request = q.cls(replica_id=-1, timeout_ms=1000, topics=[q.ListOffsetsTopic(name=topic, partitions=[
        q.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])])
    return (await client.request(list_offsets.API, version, request)).topics[0].partitions[0]


async def test_the_broker_serves_the_new_versions(client: KafkaClient) -> None:
    versions = await client.negotiate()
    assert {key: versions[key][1] for key in (0, 1, 2, 24)} == {0: 13, 1: 18, 2: 11, 24: 5}


async def test_a_v13_produce_by_topic_id_is_read_back_by_a_v18_fetch(client: KafkaClient) -> None:
    topic_id = (await create_topic(client, "orders")).topic_id
    response = await produce_by_id(client, topic_id, batch(b"paid", b"shipped"))
    (answer,) = response.responses
    assert (answer.topic_id, answer.partition_responses[0].error_code, answer.partition_responses[0].base_offset) == (
        topic_id, ErrorCode.NONE, 0)
    for version in (17, 18):
        (topic,) = (await fetch_by_id(client, topic_id, 0, version)).responses
        (partition,) = topic.partitions
        assert (topic.topic_id, partition.error_code, partition.high_watermark) == (topic_id, ErrorCode.NONE, 2)
        assert b"shipped" in bytes(partition.records)


async def test_a_v13_produce_to_an_unknown_topic_id_answers_unknown_topic_id(client: KafkaClient) -> None:
    await create_topic(client, "orders")
    unknown = uuid.uuid4().bytes
    (answer,) = (await produce_by_id(client, unknown, batch(b"lost"))).responses
    assert (answer.topic_id, answer.partition_responses[0].error_code) == (unknown, ErrorCode.UNKNOWN_TOPIC_ID)


@pytest.mark.parametrize(("timestamp", "version", "error", "offset"), [
    (-6, 11, ErrorCode.NONE, -1),  # earliest pending upload: nothing is tiered
    (-6, 10, ErrorCode.UNSUPPORTED_VERSION, -1),  # v11's timestamp
    (-5, 11, ErrorCode.NONE, -1),  # latest tiered: nothing is tiered
    (-5, 8, ErrorCode.UNSUPPORTED_VERSION, -1),
    (-4, 11, ErrorCode.NONE, 0),  # earliest local: the log start offset
    (-4, 7, ErrorCode.UNSUPPORTED_VERSION, -1),
    (-3, 6, ErrorCode.UNSUPPORTED_VERSION, -1),
    (-7, 11, ErrorCode.UNSUPPORTED_VERSION, -1),  # no such special timestamp
    (-1, 10, ErrorCode.NONE, 3),
    (-2, 11, ErrorCode.NONE, 0),
])
async def test_list_offsets_answers_the_special_timestamps_as_kafka_without_tiered_storage(
        client: KafkaClient, timestamp: int, version: int, error: ErrorCode, offset: int) -> None:
    topic_id = (await create_topic(client, "orders")).topic_id
    response = await produce_by_id(client, topic_id, batch(b"a", b"b", b"c"))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    answer = await list_offset(client, "orders", timestamp, version)
    assert (answer.error_code, answer.offset) == (error, offset)


# -- AddPartitionsToTxn v4-5 --------------------------------------------------------------------------------

async def begin_transaction(client: KafkaClient, transactional_id: str, topic: str, partitions: list[int]
                            ) -> tuple[int, int]:
    """FindCoordinator (which creates the transaction state topic), InitProducerId (retried while that topic's
    partitions load), then a producer's AddPartitionsToTxn v3; returns (producer id, epoch)."""
    await client.request(find_coordinator.API, 3, find_coordinator.REQUEST.cls(key=transactional_id, key_type=1))

    async def initialized() -> Any:
        response = await client.request(init_producer_id.API, 4, init_producer_id.REQUEST.cls(
            transactional_id=transactional_id, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
        return response if response.error_code == ErrorCode.NONE else not_yet(response)

    init = await wait_for(initialized, timeout=30, what="InitProducerId")
    q = add_partitions_to_txn.REQUEST
    added = await client.request(add_partitions_to_txn.API, 3, q.cls(
        v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=init.producer_id,
        v3_and_below_producer_epoch=init.producer_epoch,
        v3_and_below_topics=[q.AddPartitionsToTxnTopic(name=topic, partitions=partitions)]))
    assert all(p.partition_error_code == ErrorCode.NONE
               for t in added.results_by_topic_v3_and_below for p in t.results_by_partition), added
    return init.producer_id, init.producer_epoch


async def add_partitions_v4(client: KafkaClient, version: int, transactional_id: str, producer: tuple[int, int],
                            topic: str, partitions: list[int], verify_only: bool = True) -> Any:
    q = add_partitions_to_txn.REQUEST
    return await client.request(add_partitions_to_txn.API, version, q.cls(transactions=[
        q.AddPartitionsToTxnTransaction(transactional_id=transactional_id, producer_id=producer[0],
                                        producer_epoch=producer[1], verify_only=verify_only,
                                        topics=[q.AddPartitionsToTxnTopic(name=topic, partitions=partitions)])]))


def errors_of(response: Any) -> dict[tuple[str, int], ErrorCode]:
    (result,) = response.results_by_transaction
    return {(t.name, p.partition_index): ErrorCode(p.partition_error_code)
            for t in result.topic_results for p in t.results_by_partition}


@pytest.mark.parametrize(("version", "not_in_transaction"), [
    (5, ErrorCode.TRANSACTION_ABORTABLE), (4, ErrorCode.INVALID_TXN_STATE)])
async def test_a_verify_only_request_says_which_partitions_are_in_the_transaction_and_adds_none(
        client: KafkaClient, version: int, not_in_transaction: ErrorCode) -> None:
    await create_topic(client, "orders", partitions=3)
    producer = await begin_transaction(client, "checkout-7", "orders", [0])
    response = await add_partitions_v4(client, version, "checkout-7", producer, "orders", [0, 2])
    assert response.error_code == ErrorCode.NONE
    assert errors_of(response) == {("orders", 0): ErrorCode.NONE, ("orders", 2): not_in_transaction}
    again = await add_partitions_v4(client, version, "checkout-7", producer, "orders", [2])
    assert errors_of(again) == {("orders", 2): not_in_transaction}  # verifying added nothing


async def test_a_v4_request_without_verify_only_adds_the_partitions(client: KafkaClient) -> None:
    await create_topic(client, "orders", partitions=3)
    producer = await begin_transaction(client, "checkout-7", "orders", [0])
    added = await add_partitions_v4(client, 5, "checkout-7", producer, "orders", [2], verify_only=False)
    assert errors_of(added) == {("orders", 2): ErrorCode.NONE}
    verified = await add_partitions_v4(client, 5, "checkout-7", producer, "orders", [0, 2])
    assert errors_of(verified) == {("orders", 0): ErrorCode.NONE, ("orders", 2): ErrorCode.NONE}


@pytest.mark.parametrize(("producer_delta", "expected"), [
    ((1, 0), ErrorCode.INVALID_PRODUCER_ID_MAPPING), ((0, 1), ErrorCode.PRODUCER_FENCED)])
async def test_verifying_for_another_producer_answers_its_error_for_every_partition(
        client: KafkaClient, producer_delta: tuple[int, int], expected: ErrorCode) -> None:
    await create_topic(client, "orders", partitions=2)
    producer_id, epoch = await begin_transaction(client, "checkout-7", "orders", [0])
    other = (producer_id + producer_delta[0], epoch + producer_delta[1])
    response = await add_partitions_v4(client, 5, "checkout-7", other, "orders", [0, 1])
    assert errors_of(response) == {("orders", 0): expected, ("orders", 1): expected}


async def test_an_unknown_partition_fails_its_transaction_and_the_others_are_not_attempted(
        client: KafkaClient) -> None:
    await create_topic(client, "orders", partitions=2)
    producer = await begin_transaction(client, "checkout-7", "orders", [0])
    response = await add_partitions_v4(client, 5, "checkout-7", producer, "orders", [0, 9])
    assert errors_of(response) == {("orders", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
                                   ("orders", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


@pytest.fixture
async def secured_client(tmp_path: Path) -> AsyncIterator[KafkaClient]:
    """A client of a broker with an authorizer, connecting as User:ANONYMOUS (no ACLs: no CLUSTER_ACTION)."""
    config = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:admin"}
    async with testing.broker(data_dir=tmp_path, config=config) as started:
        server: Broker = started.server
        async with await KafkaClient.connect(f"127.0.0.1:{server.advertised.port}") as connected:
            await connected.negotiate()
            yield connected


@pytest.mark.parametrize("version", [4, 5])
async def test_a_verify_only_request_from_a_principal_without_cluster_action_is_refused(
        secured_client: KafkaClient, version: int) -> None:
    response = await add_partitions_v4(secured_client, version, "checkout-7", (4001, 3), "orders", [0])
    assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert response.results_by_transaction == []  # Kafka's v4+ error response: the top-level code only
