"""The client: the sans-IO connection with plain bytes, and the blocking front against a real broker process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from epoch_broker.client.blocking import BlockingKafkaClient, ConnectionClosed
from epoch_broker.client.connection import ClientConnection, UnexpectedResponse
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.framing import frame_size_prefix
from epoch_broker.protocol.headers import encode_response_header
from epoch_broker.protocol.messages import (
    api_versions,
    broker_heartbeat,
    create_topics,
    list_offsets,
    metadata,
    produce,
)
from epoch_broker.protocol.records import build_batch
from tests.helpers import BrokerProcess, start_broker


def response_frame(correlation_id: int, body: bytes) -> bytes:
    payload = encode_response_header(correlation_id, 0) + body
    return frame_size_prefix(len(payload)) + payload


def api_versions_body() -> bytes:
    response = api_versions.RESPONSE.cls(error_code=0, api_keys=[
        api_versions.RESPONSE.ApiVersion(api_key=3, min_version=0, max_version=9)], throttle_time_ms=0)
    return api_versions.RESPONSE.encode(response, 3)


def test_correlation_ids_count_up_and_responses_match_by_id_not_by_order() -> None:
    connection = ClientConnection("test")
    first, _ = connection.send_request(*connection.api_versions_request())
    second, _ = connection.send_request(*connection.api_versions_request())
    assert (first, second) == (1, 2) and connection.pending == [1, 2]
    data = response_frame(second, api_versions_body()) + response_frame(first, api_versions_body())
    # split anywhere: the frames come out whole, once
    responses = connection.receive_data(data[:7]) + connection.receive_data(data[7:])
    assert [r.correlation_id for r in responses] == [2, 1]
    assert connection.on_api_versions(responses[0].body) == {3: (0, 9)}
    assert connection.version_for(metadata.API) == 9 and connection.pending == []


def test_a_response_to_no_request_is_a_protocol_error() -> None:
    connection = ClientConnection("test")
    with pytest.raises(UnexpectedResponse):
        connection.receive_data(response_frame(42, api_versions_body()))


def test_a_body_that_does_not_decode_is_that_requests_error_and_the_connection_goes_on() -> None:
    connection = ClientConnection("test")
    correlation_id, _ = connection.send_request(*connection.api_versions_request())
    (response,) = connection.receive_data(response_frame(correlation_id, b"\x00"))
    assert response.correlation_id == correlation_id and response.error is not None


def test_a_request_without_a_response_leaves_nothing_pending() -> None:
    connection = ClientConnection("test")
    body = produce.REQUEST.cls(acks=0, timeout_ms=1000, topic_data=[])
    connection.send_request(produce.API, 9, body, expect_response=False)
    assert connection.pending == []


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory.mktemp("blocking"))
    yield process
    process.stop()


def test_the_blocking_client_creates_produces_and_lists_offsets(broker: BrokerProcess) -> None:
    with BlockingKafkaClient.connect(broker.bootstrap, timeout_s=30) as client:
        client.negotiate()
        created = client.request(create_topics.API, client.version_for(create_topics.API), create_topics.REQUEST.cls(
            topics=[create_topics.REQUEST.CreatableTopic(name="blocking", num_partitions=1, replication_factor=1,
                                                         assignments=[], configs=[])], timeout_ms=10_000))
        assert created.topics[0].error_code == ErrorCode.NONE
        records = build_batch([(None, b"v", [], None)] * 3)
        answer = client.request(produce.API, 9, produce.REQUEST.cls(acks=-1, timeout_ms=10_000, topic_data=[
            produce.REQUEST.TopicProduceData(name="blocking", partition_data=[
                produce.REQUEST.PartitionProduceData(index=0, records=records)])]))
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        latest = client.request(list_offsets.API, 7, list_offsets.REQUEST.cls(replica_id=-1, topics=[
            list_offsets.REQUEST.ListOffsetsTopic(name="blocking", partitions=[
                list_offsets.REQUEST.ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
        partition = latest.topics[0].partitions[0]
        assert (partition.error_code, partition.offset, partition.leader_epoch) == (ErrorCode.NONE, 3, 0)


def test_the_blocking_client_reports_a_closed_connection(broker: BrokerProcess) -> None:
    with BlockingKafkaClient.connect(broker.bootstrap, timeout_s=30) as client:
        client.negotiate()
        # BrokerHeartbeat is a controller's API: a broker closes the connection, as Kafka does for unknown keys
        with pytest.raises(ConnectionClosed):
            client.request(broker_heartbeat.API, 0, broker_heartbeat.REQUEST.cls(
                broker_id=0, broker_epoch=0, current_metadata_offset=0, want_fence=False, want_shut_down=False))
