"""Handler behaviour over the wire against an in-process broker, with exact requests."""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any

import pytest

from epoch_broker.broker.app import Broker
from epoch_broker.broker.config import build_config
from epoch_broker.broker.network.dispatch import BROKER, load_handlers, served_by
from epoch_broker.broker.network.server import SENDFILE_MIN_BYTES
from epoch_broker.client.aio import ConnectionClosed, KafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import (
    api_versions,
    create_partitions,
    create_topics,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    fetch,
    find_coordinator,
    init_producer_id,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_for_leader_epoch,
)
from epoch_broker.protocol.records import build_batch, iter_batches, iter_records
from tests.broker.conftest import batch, create_topic, produce_to
from tests.helpers import holds, wait_for

INT32_MIN = -(2**31)


async def fetch_partition(client: KafkaClient, topic: Any, offset: int, *, version: int = 16, max_wait_ms: int = 0,
                          current_leader_epoch: int = -1, last_fetched_epoch: int = -1) -> Any:
    partition = fetch.REQUEST.FetchPartition(partition=0, current_leader_epoch=current_leader_epoch,
                                             fetch_offset=offset, last_fetched_epoch=last_fetched_epoch,
                                             partition_max_bytes=1 << 20)
    request = fetch.REQUEST.cls(max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 24, topics=[
        fetch.REQUEST.FetchTopic(topic=topic.name, topic_id=topic.topic_id, partitions=[partition])])
    response = await client.request(fetch.API, version, request)
    return response.responses[0].partitions[0]


def records_of(data: bytes) -> list:
    return [r for pos, header in iter_batches(data) for r in iter_records(data, pos, header)]


async def test_api_versions_lists_only_registered_handlers_with_an_empty_tag_section(client: KafkaClient) -> None:
    response = await client.request(api_versions.API, 3, api_versions.REQUEST.cls(
        client_software_name="test", client_software_version="1"))
    served = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    registered = served_by(load_handlers(BROKER), None)
    assert served == {key: (r.versions.low, r.versions.high) for key, r in registered.items()}
    assert served[18] == (0, 4) and not {4, 5, 6, 7} & set(served)  # the ZooKeeper-era APIs: to a release only
    assert response._unknown_tags is None and response.supported_features == []
    encoded = api_versions.RESPONSE.encode(response, 3)
    assert encoded.endswith(b"\x00")  # the top-level tag section: empty


async def test_api_versions_above_our_max_gets_unsupported_version_in_a_v0_body(broker: Any) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.advertised.port)
    body = struct.pack(">hhih", 18, 9, 77, -1) + b"\x00\x00\x00"
    writer.write(struct.pack(">i", len(body)) + body)
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    frame = await reader.readexactly(size)
    assert struct.unpack_from(">i", frame)[0] == 77
    answer = api_versions.RESPONSE.decode(frame[4:], 0)
    assert answer.error_code == ErrorCode.UNSUPPORTED_VERSION and answer.api_keys
    writer.close()


async def test_metadata_auto_creates_topics_and_reports_epochs_ids_and_no_authorized_operations(
        client: KafkaClient) -> None:
    request = metadata.REQUEST.cls(topics=[metadata.REQUEST.MetadataRequestTopic(name="auto")],
                                   allow_auto_topic_creation=True)
    response = await client.request(metadata.API, 12, request)
    (topic,) = response.topics
    assert topic.error_code == 0 and topic.topic_id != bytes(16)
    assert topic.partitions[0].leader_id == 0 and topic.partitions[0].leader_epoch == 0
    assert topic.topic_authorized_operations == INT32_MIN
    v8 = await client.request(metadata.API, 8, metadata.REQUEST.cls(topics=None))
    assert v8.cluster_authorized_operations == INT32_MIN and v8.controller_id == 0 and v8.cluster_id


async def test_metadata_rejects_illegal_topic_names(client: KafkaClient) -> None:
    request = metadata.REQUEST.cls(topics=[metadata.REQUEST.MetadataRequestTopic(name="bad name!")])
    response = await client.request(metadata.API, 9, request)
    assert response.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


async def test_produce_then_fetch_by_topic_id_returns_the_stamped_batches(client: KafkaClient) -> None:
    topic = await create_topic(client, "t")
    first = await produce_to(client, "t", batch(b"a", b"b"))
    second = await produce_to(client, "t", batch(b"c"), acks=1, version=7)
    assert (first.error_code, first.base_offset, second.base_offset) == (0, 0, 2)
    data = await fetch_partition(client, topic, 0)
    assert data.error_code == 0 and data.high_watermark == 3
    payload = bytes(data.records)
    assert [r.value for r in records_of(payload)] == [b"a", b"b", b"c"]
    assert [h.partition_leader_epoch for _, h in iter_batches(payload)] == [0, 0]


async def test_a_fetch_mixing_small_and_large_ranges_answers_every_partition_whole_and_in_order(
        client: KafkaClient) -> None:
    """Ranges under SENDFILE_MIN_BYTES go out in the response's writev, larger ones by sendfile between them:
    the client reads the same bytes either way, each partition's records where the response puts them."""
    topic = await create_topic(client, "mixed", partitions=4)
    values = {0: [b"s0"], 1: [b"L" * 100_000, b"l" * 70_000], 2: [b"s2", b"t2"], 3: [b"M" * 40_000]}
    assert SENDFILE_MIN_BYTES < 40_000  # partitions 1 and 3 are sent with sendfile, 0 and 2 in the writev
    for partition, written in values.items():
        assert (await produce_to(client, "mixed", batch(*written), partition=partition)).error_code == 0
    request = fetch.REQUEST.cls(max_wait_ms=0, min_bytes=1, max_bytes=1 << 24, topics=[fetch.REQUEST.FetchTopic(
        topic="mixed", topic_id=topic.topic_id, partitions=[
            fetch.REQUEST.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20) for p in values])])
    response = await client.request(fetch.API, 16, request)
    answered = {p.partition_index: [r.value for r in records_of(bytes(p.records))]
                for p in response.responses[0].partitions}
    assert answered == values


async def test_produce_with_bad_acks_or_a_corrupt_batch_appends_nothing(client: KafkaClient) -> None:
    await create_topic(client, "t")
    bad_acks = await produce_to(client, "t", batch(b"a"), acks=2)
    corrupt = batch(b"a")
    corrupt[-1] ^= 0xFF
    bad_crc = await produce_to(client, "t", corrupt)
    old_magic = batch(b"a")
    old_magic[16] = 1
    magic = await produce_to(client, "t", old_magic)
    assert bad_acks.error_code == ErrorCode.INVALID_REQUIRED_ACKS
    assert bad_crc.error_code == ErrorCode.CORRUPT_MESSAGE
    assert magic.error_code == ErrorCode.INVALID_RECORD  # Kafka's answer to magic 0/1 in Produce v3+
    latest = await list_offset(client, "t", -1)
    assert latest.offset == 0


async def test_produce_over_max_message_bytes_is_message_too_large(client: KafkaClient) -> None:
    await create_topic(client, "t", max_message_bytes="200")
    response = await produce_to(client, "t", batch(b"x" * 500))
    assert response.error_code == ErrorCode.MESSAGE_TOO_LARGE


async def test_produce_checks_the_kip359_leader_epoch_tag(client: KafkaClient) -> None:
    await create_topic(client, "t")
    assert (await produce_to(client, "t", batch(b"a"), current_leader_epoch=0)).error_code == 0
    future = await produce_to(client, "t", batch(b"a"), current_leader_epoch=1)
    assert future.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert future.current_leader.leader_epoch == 0


async def test_idempotent_producer_retry_is_answered_with_the_original_offset(client: KafkaClient) -> None:
    await create_topic(client, "t")
    for version in (0, 1, 4):
        answer = await client.request(init_producer_id.API, version, init_producer_id.REQUEST.cls(
            transactional_id=None, transaction_timeout_ms=1000))
        assert answer.error_code == 0 and answer.producer_id >= 0
    producer = answer.producer_id
    first = await produce_to(client, "t", batch(b"a", producer_id=producer, producer_epoch=0, base_sequence=0))
    retry = await produce_to(client, "t", batch(b"a", producer_id=producer, producer_epoch=0, base_sequence=0))
    gap = await produce_to(client, "t", batch(b"b", producer_id=producer, producer_epoch=0, base_sequence=5))
    assert first.base_offset == retry.base_offset == 0 and retry.error_code == 0
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert (await list_offset(client, "t", -1)).offset == 1


async def test_fetch_long_poll_is_woken_by_an_append(client: KafkaClient, broker: Any) -> None:
    topic = await create_topic(client, "t")
    other = await KafkaClient.connect(f"127.0.0.1:{broker.advertised.port}")
    started = time.monotonic()
    waiting = asyncio.create_task(fetch_partition(client, topic, 0, max_wait_ms=10_000))
    await holds(lambda: not waiting.done(), 0.2, what="the empty fetch long-polling")
    await produce_to(other, "t", batch(b"wake"))
    data = await asyncio.wait_for(waiting, 5)
    assert time.monotonic() - started < 5 and len(data.records) > 0
    await other.close()


async def test_fetch_errors_out_of_range_and_epochs(client: KafkaClient) -> None:
    topic = await create_topic(client, "t")
    await produce_to(client, "t", batch(b"a"))
    assert (await fetch_partition(client, topic, 5)).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert (await fetch_partition(client, topic, 0, current_leader_epoch=1)).error_code == (
        ErrorCode.UNKNOWN_LEADER_EPOCH)
    assert (await fetch_partition(client, topic, 0, current_leader_epoch=0)).error_code == 0


async def list_offset(client: KafkaClient, topic: str, timestamp: int, *, version: int = 9,
                      current_leader_epoch: int = -1) -> Any:
    request = list_offsets.REQUEST.cls(replica_id=-1, topics=[list_offsets.REQUEST.ListOffsetsTopic(
        name=topic, partitions=[list_offsets.REQUEST.ListOffsetsPartition(
            partition_index=0, timestamp=timestamp, current_leader_epoch=current_leader_epoch)])])
    return (await client.request(list_offsets.API, version, request)).topics[0].partitions[0]


async def test_list_offsets_earliest_latest_by_time_and_max_timestamp(client: KafkaClient) -> None:
    await create_topic(client, "t")
    await produce_to(client, "t", build_batch([(None, b"a", [], 1000), (None, b"b", [], 5000),
                                               (None, b"c", [], 3000)]))
    assert (await list_offset(client, "t", -2)).offset == 0
    latest = await list_offset(client, "t", -1)
    assert (latest.offset, latest.leader_epoch) == (3, 0)
    by_time = await list_offset(client, "t", 2000)
    assert (by_time.offset, by_time.timestamp) == (1, 5000)
    maximum = await list_offset(client, "t", -3)
    assert (maximum.offset, maximum.timestamp) == (1, 5000)
    assert (await list_offset(client, "t", 9000)).offset == -1


async def test_offset_for_leader_epoch_answers_the_log_end_for_the_current_epoch(client: KafkaClient) -> None:
    await create_topic(client, "t")
    await produce_to(client, "t", batch(b"a", b"b"))
    request = offset_for_leader_epoch.REQUEST.cls(replica_id=-1, topics=[
        offset_for_leader_epoch.REQUEST.OffsetForLeaderTopic(topic="t", partitions=[
            offset_for_leader_epoch.REQUEST.OffsetForLeaderPartition(partition=0, current_leader_epoch=0,
                                                                     leader_epoch=0)])])
    for version in (2, 4):
        answer = (await client.request(offset_for_leader_epoch.API, version, request)).topics[0].partitions[0]
        assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (0, 0, 2)


async def test_admin_apis_create_partitions_configs_delete_records_cluster_and_delete(client: KafkaClient) -> None:
    await create_topic(client, "t", retention_ms="1000")
    duplicate = await client.request(*_create("t"))
    assert duplicate.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    too_many = await client.request(*_create("u", replication_factor=3))
    assert too_many.topics[0].error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    grown = await client.request(create_partitions.API, 3, create_partitions.REQUEST.cls(topics=[
        create_partitions.REQUEST.CreatePartitionsTopic(name="t", count=3, assignments=None)], timeout_ms=1000))
    assert grown.results[0].error_code == 0
    configs = await client.request(describe_configs.API, 4, describe_configs.REQUEST.cls(resources=[
        describe_configs.REQUEST.DescribeConfigsResource(resource_type=2, resource_name="t",
                                                         configuration_keys=None)]))
    values = {c.name: c.value for c in configs.results[0].configs}
    assert values["retention.ms"] == "1000" and "segment.bytes" in values
    await produce_to(client, "t", batch(b"a", b"b", b"c"))
    deleted = await client.request(delete_records.API, 2, delete_records.REQUEST.cls(topics=[
        delete_records.REQUEST.DeleteRecordsTopic(name="t", partitions=[
            delete_records.REQUEST.DeleteRecordsPartition(partition_index=0, offset=2)])], timeout_ms=1000))
    assert deleted.topics[0].partitions[0].low_watermark == 2
    assert (await list_offset(client, "t", -2)).offset == 2
    cluster = await client.request(describe_cluster.API, 1, describe_cluster.REQUEST.cls())
    assert [b.broker_id for b in cluster.brokers] == [0]
    gone = await client.request(delete_topics.API, 6, delete_topics.REQUEST.cls(topics=[
        delete_topics.REQUEST.DeleteTopicState(name="t")], timeout_ms=1000))
    assert gone.responses[0].error_code == 0
    missing = await client.request(metadata.API, 12, metadata.REQUEST.cls(
        topics=[metadata.REQUEST.MetadataRequestTopic(name="t")], allow_auto_topic_creation=False))
    assert missing.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _create(name: str, replication_factor: int = 1) -> tuple:
    return create_topics.API, 4, create_topics.REQUEST.cls(topics=[create_topics.REQUEST.CreatableTopic(
        name=name, num_partitions=1, replication_factor=replication_factor)])


async def test_a_request_pipelined_behind_an_unknown_api_key_sees_the_connection_close(client: KafkaClient) -> None:
    client.send_raw(struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 1, -1))
    with pytest.raises(ConnectionClosed):
        await client.request(metadata.API, 1, metadata.REQUEST.cls(topics=[]))


async def test_idle_connections_are_closed(tmp_path: Any) -> None:
    config = build_config([("listeners", "PLAINTEXT://127.0.0.1:0"), ("log.dirs", str(tmp_path / "data")),
                           ("offsets.topic.num.partitions", "1"), ("connections.max.idle.ms", "200")])
    idle_broker = Broker(config)
    await idle_broker.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", idle_broker.advertised.port)
        assert await asyncio.wait_for(reader.read(), 3) == b""
        writer.close()
    finally:
        await idle_broker.stop()


async def test_consumer_offsets_is_made_by_the_first_find_coordinator_and_reloaded_after_a_restart(
        tmp_path: Any) -> None:
    config = build_config([("listeners", "PLAINTEXT://127.0.0.1:0"), ("log.dirs", str(tmp_path / "data")),
                           ("offsets.topic.num.partitions", "3")])
    first = Broker(config)
    await first.start()
    try:
        assert "__consumer_offsets" not in first.metadata.topics_by_name  # not made at start
        assert first._group_coordinator is None  # nor the coordinator
        async with await KafkaClient.connect(f"127.0.0.1:{first.advertised.port}") as c:
            found = await c.request(find_coordinator.API, 3, find_coordinator.REQUEST.cls(key="g", key_type=0))
            assert (found.error_code, found.node_id, found.port) == (0, 0, first.advertised.port)
        assert first.replica_manager.get("__consumer_offsets", 0).leader_epoch == 0
    finally:
        await first.stop()
    again = Broker(config)
    await again.start()
    try:
        # Loaded in the background: the partitions are led in their bumped epoch before any request runs.
        assert again.replica_manager.get("__consumer_offsets", 0).leader_epoch == 1
        await again.group_coordinator.wait_loaded()
        assert again.group_coordinator.owned == {0, 1, 2}
    finally:
        await again.stop()


async def test_an_unreachable_controller_is_answered_with_request_timed_out_not_a_closed_connection(
        broker: Any, client: KafkaClient) -> None:
    """A request the broker forwards to the controller is answered with REQUEST_TIMED_OUT when the controller
    cannot be reached (as Kafka answers a forwarding timeout), and the connection stays usable."""

    async def unreachable(*_: Any) -> Any:
        raise ConnectionError("controller 127.0.0.1:1: connection refused")

    broker.channel.create_topics = unreachable
    request = create_topics.REQUEST.cls(topics=[create_topics.REQUEST.CreatableTopic(
        name="unplaced", num_partitions=1, replication_factor=1)])
    response = await client.request(create_topics.API, 7, request)
    assert [(t.name, t.error_code) for t in response.topics] == [("unplaced", ErrorCode.REQUEST_TIMED_OUT)]
    answer = await client.request(metadata.API, 12, metadata.REQUEST.cls(topics=None))
    assert "unplaced" not in [t.name for t in answer.topics]


async def test_a_topic_asked_by_id_alone_before_v12_is_an_invalid_request(client: KafkaClient) -> None:
    """Found by the wire fuzzer: a v10-11 request may carry a null name, but the answer cannot."""
    request = metadata.REQUEST.cls(topics=[metadata.REQUEST.MetadataRequestTopic(name=None, topic_id=b"\1" * 16)])
    for version in (10, 11):
        response = await client.request(metadata.API, version, request)
        assert (response.topics[0].error_code, response.topics[0].name) == (ErrorCode.INVALID_REQUEST, "")


async def test_a_topic_asked_by_id_alone_at_v12_is_answered_with_its_name_and_an_unknown_id_unknown_topic_id(
        client: KafkaClient) -> None:
    """librdkafka's KIP-848 consumer learns its assignment as topic ids and asks Metadata v12 for them by id."""
    created = await create_topic(client, "orders", partitions=3)
    unknown = b"\7" * 16
    request = metadata.REQUEST.cls(topics=[metadata.REQUEST.MetadataRequestTopic(name=None, topic_id=topic_id)
                                           for topic_id in (created.topic_id, unknown)])
    response = await client.request(metadata.API, 12, request)
    known, missing = response.topics
    assert (known.error_code, known.name, known.topic_id) == (ErrorCode.NONE, "orders", created.topic_id)
    assert [p.partition_index for p in known.partitions] == [0, 1, 2]
    assert (missing.error_code, missing.name, missing.topic_id) == (ErrorCode.UNKNOWN_TOPIC_ID, None, unknown)
    assert missing.partitions == []


async def test_list_groups_v5_filters_by_type_case_insensitively_and_answers_each_group_type(
        client: KafkaClient) -> None:
    await create_topic(client, "audit")
    commit = offset_commit.REQUEST.cls(group_id="auditors", topics=[offset_commit.REQUEST.OffsetCommitRequestTopic(
        name="audit", partitions=[offset_commit.REQUEST.OffsetCommitRequestPartition(partition_index=0,
                                                                                     committed_offset=5)])])

    async def committed() -> bool:  # the first commit may find __consumer_offsets still loading
        answer = await client.request(offset_commit.API, 9, commit)
        return answer.topics[0].partitions[0].error_code == ErrorCode.NONE

    await wait_for(committed, what="a simple group's first commit")

    async def listed(types: list[str], version: int = 5) -> list[tuple[str, str, str]]:
        request = list_groups.REQUEST.cls(types_filter=types)
        response = await client.request(list_groups.API, version, request)
        assert response.error_code == ErrorCode.NONE
        return [(g.group_id, g.group_state, g.group_type) for g in response.groups]

    assert await listed([]) == [("auditors", "Empty", "classic")]
    assert await listed(["Classic", "consumer"]) == [("auditors", "Empty", "classic")]
    assert await listed(["consumer"]) == []
    assert await listed(["share"]) == []  # a type this broker does not know matches nothing, as in Kafka
    assert await listed([], version=4) == [("auditors", "Empty", "")]  # no type before v5
