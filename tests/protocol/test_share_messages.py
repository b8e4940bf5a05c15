"""KIP-932 messages: ShareGroupHeartbeat (76), ShareGroupDescribe (77), ShareFetch (78), ShareAcknowledge (79) and
the admin APIs DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92).

No folder here has Kafka 4.x's JSON for them (kafka-python vendors none), so: 76-79 are checked against
apache/kafka's JSON at the mirror's HEAD (trunk, Oct 2024: v0, the early-access layout; skipped without the mirror),
field by field, with Kafka 4.1's v1 changes listed in V1_CHANGES; then every API by bytes built by hand from the
layout Kafka 4.2's JSON and librdkafka 2.16 (its client and its mock broker) agree on, table-driven: the bytes
decode to the object, the object encodes to the bytes.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import (
    APIS,
    alter_share_group_offsets,
    delete_share_group_offsets,
    describe_share_group_offsets,
    read_share_group_state,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
    write_share_group_state,
)
from epoch_broker.protocol.primitives import encode_uvarint
from epoch_broker.protocol.records import build_batch
from epoch_broker.protocol.schema import Message
from tests.protocol.test_acl_scram_messages import NO_TAGS, assert_round_trip, compact_string, int16, int32
from tests.protocol.test_conformance import NO_REFERENCE, FieldView, declared_view, reference_view
from tests.protocol.test_kip848_messages import trunk_json

HEARTBEAT, DESCRIBE = share_group_heartbeat, share_group_describe
FETCH, ACKNOWLEDGE = share_fetch, share_acknowledge
DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = (
    describe_share_group_offsets, alter_share_group_offsets, delete_share_group_offsets)

ORDERS = uuid.UUID("6d0f54c6-8a2b-4b52-9c36-0b6a1f8e2d11").bytes
PAYMENTS = uuid.UUID("0b9e3f7a-1c4d-4e8f-a2b3-c4d5e6f70819").bytes
GROUP = "invoice-workers"
MEMBER = "q7Zr2Kp0SxW4yB6nD8fHjA"  # librdkafka's own (KIP-1082): 22 characters of base64
ACCEPT, RELEASE, REJECT = 1, 2, 3

# (name, key, module, declared versions): Kafka 4.2 lists 76-77 at v1, 78-79 at v1-2, 90 at v0-1, 91-92 at v0.
SHARE_APIS = [
    ("ShareGroupHeartbeat", 76, HEARTBEAT, (1, 1)),
    ("ShareGroupDescribe", 77, DESCRIBE, (1, 1)),
    ("ShareFetch", 78, FETCH, (1, 1)),
    ("ShareAcknowledge", 79, ACKNOWLEDGE, (1, 1)),
    ("DescribeShareGroupOffsets", 90, DESCRIBE_OFFSETS, (0, 1)),
    ("AlterShareGroupOffsets", 91, ALTER_OFFSETS, (0, 0)),
    ("DeleteShareGroupOffsets", 92, DELETE_OFFSETS, (0, 0)),
]

# What Kafka 4.1 changed from the mirror's v0 to v1: (added at v1, removed at v1).
V1_CHANGES: dict[str, tuple[list[FieldView], list[str]]] = {
    "ShareFetchRequest": (
        [FieldView(path=name, type="int32", versions="1+", nullable="none", nullable_here=False, tag=None,
                   tagged="none", tagged_here=False, flexible=None, default=0)
         for name in ("max_records", "batch_size")],
        ["topics.partitions.partition_max_bytes"],
    ),
    "ShareFetchResponse": (
        [FieldView(path="acquisition_lock_timeout_ms", type="int32", versions="0+", nullable="none",
                   nullable_here=False, tag=None, tagged="none", tagged_here=False, flexible=None, default=0)],
        [],
    ),
}


def int8(value: int) -> bytes:
    return struct.pack(">b", value)


def int64(value: int) -> bytes:
    return struct.pack(">q", value)


def count(n: int) -> bytes:
    """A compact array's length: n + 1 as an unsigned varint (0 is null)."""
    return encode_uvarint(n + 1)


def compact_records(data: bytes) -> bytes:
    return encode_uvarint(len(data) + 1) + data


@pytest.mark.parametrize(("name", "key", "module", "versions"), SHARE_APIS, ids=[a[0] for a in SHARE_APIS])
def test_each_api_is_registered_flexible_at_kafka_4_2_versions(name: str, key: int, module: Any,
                                                               versions: tuple[int, int]) -> None:
    api = APIS[key]
    assert api is module.API and api.name == name and NO_REFERENCE[key] == name
    assert (api.versions.low, api.versions.high) == versions
    for version in range(versions[0], versions[1] + 1):
        assert api.request_header_version(version) == 2 and api.response_header_version(version) == 1


def wire(view: FieldView) -> tuple[Any, ...]:
    """What decides the bytes and the decoded defaults at one version. ShareGroupDescribe's JSON re-stated every
    field's versions as 1+ when v0 was removed, so version strings are compared for added fields only."""
    return view.path, view.type, view.nullable_here, view.tag, view.tagged_here, view.flexible, view.default


@pytest.mark.parametrize("message", [m for _, key, module, _ in SHARE_APIS if key <= 79
                                     for m in (module.REQUEST, module.RESPONSE)], ids=lambda m: m.name)
def test_v1_is_the_mirrors_v0_with_kafka_4_1s_changes(message: Message) -> None:
    spec = trunk_json(message.name)
    assert (spec["name"], spec["apiKey"], spec["type"], spec["validVersions"]) == (
        message.name, message.api_key, message.kind, "0")
    common = {struct["name"]: struct["fields"] for struct in spec.get("commonStructs", [])}
    added, removed = V1_CHANGES.get(message.name, ([], []))
    expected = [v for v in reference_view(spec["fields"], 0, common) if v.path not in removed]
    declared = declared_view(message, message.fields, message.cls, 1)
    added_paths = [v.path for v in added]
    assert [wire(v) for v in declared if v.path not in added_paths] == [wire(v) for v in expected]
    assert [v for v in declared if v.path in added_paths] == added


@pytest.mark.parametrize("message", [m for module in (read_share_group_state, write_share_group_state)
                                     for m in (module.REQUEST, module.RESPONSE)], ids=lambda m: m.name)
def test_the_share_state_apis_are_the_mirrors_v0(message: Message) -> None:
    """ReadShareGroupState (84) and WriteShareGroupState (85), between our brokers only: Kafka's v0 exactly."""
    spec = trunk_json(message.name)
    assert (spec["name"], spec["apiKey"], spec["type"], spec["validVersions"]) == (
        message.name, message.api_key, message.kind, "0")
    assert (APIS[message.api_key].versions.low, APIS[message.api_key].versions.high) == (0, 0)
    assert ([wire(v) for v in declared_view(message, message.fields, message.cls, 0)]
            == [wire(v) for v in reference_view(spec["fields"], 0, {})])


# -- bytes built by hand ------------------------------------------------------------------------------------


def heartbeat_join() -> tuple[Any, bytes]:
    obj = HEARTBEAT.REQUEST.cls(group_id=GROUP, member_id=MEMBER, member_epoch=0, rack_id="eu-west-1a",
                                subscribed_topic_names=["invoices", "refunds"])
    body = (compact_string(GROUP) + compact_string(MEMBER) + int32(0) + compact_string("eu-west-1a")
            + count(2) + compact_string("invoices") + compact_string("refunds") + NO_TAGS)
    return obj, body


def heartbeat_steady() -> tuple[Any, bytes]:
    """Nothing changed since the last heartbeat: rack and subscription null."""
    obj = HEARTBEAT.REQUEST.cls(group_id=GROUP, member_id=MEMBER, member_epoch=4)
    return obj, compact_string(GROUP) + compact_string(MEMBER) + int32(4) + b"\x00" + b"\x00" + NO_TAGS


def heartbeat_assignment() -> tuple[Any, bytes]:
    r = HEARTBEAT.RESPONSE
    obj = r.cls(member_id=MEMBER, member_epoch=5, heartbeat_interval_ms=5000, assignment=r.Assignment(
        topic_partitions=[r.TopicPartitions(topic_id=ORDERS, partitions=[0, 1]),
                          r.TopicPartitions(topic_id=PAYMENTS, partitions=[2])]))
    body = (int32(0) + int16(0) + b"\x00" + compact_string(MEMBER) + int32(5) + int32(5000)
            + b"\x01"  # assignment present (a nullable struct's int8 marker)
            + count(2) + ORDERS + count(2) + int32(0) + int32(1) + NO_TAGS + PAYMENTS + count(1) + int32(2) + NO_TAGS
            + NO_TAGS  # the assignment's tags
            + NO_TAGS)
    return obj, body


def heartbeat_unknown_member() -> tuple[Any, bytes]:
    obj = HEARTBEAT.RESPONSE.cls(error_code=ErrorCode.UNKNOWN_MEMBER_ID, error_message="Unknown member",
                                 member_epoch=-1, heartbeat_interval_ms=5000)
    body = (int32(0) + int16(25) + compact_string("Unknown member") + b"\x00" + int32(-1) + int32(5000)
            + b"\xff"  # no assignment
            + NO_TAGS)
    return obj, body


def describe_request() -> tuple[Any, bytes]:
    obj = DESCRIBE.REQUEST.cls(group_ids=[GROUP, "audit"], include_authorized_operations=True)
    return obj, count(2) + compact_string(GROUP) + compact_string("audit") + b"\x01" + NO_TAGS


def describe_response() -> tuple[Any, bytes]:
    r = DESCRIBE.RESPONSE
    member = r.Member(member_id=MEMBER, rack_id=None, member_epoch=5, client_id="worker-1", client_host="/10.0.0.7",
                      subscribed_topic_names=["invoices"], assignment=r.Assignment(topic_partitions=[
                          r.TopicPartitions(topic_id=ORDERS, topic_name="invoices", partitions=[0, 1])]))
    obj = r.cls(groups=[
        r.DescribedGroup(group_id=GROUP, group_state="Stable", group_epoch=5, assignment_epoch=5,
                         assignor_name="simple", members=[member]),
        r.DescribedGroup(error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message="Group audit is not a share group.",
                         group_id="audit"),
    ])
    member_bytes = (compact_string(MEMBER) + b"\x00" + int32(5) + compact_string("worker-1")
                    + compact_string("/10.0.0.7") + count(1) + compact_string("invoices")
                    + count(1) + ORDERS + compact_string("invoices") + count(2) + int32(0) + int32(1) + NO_TAGS
                    + NO_TAGS  # the assignment's tags
                    + NO_TAGS)
    stable = (int16(0) + b"\x00" + compact_string(GROUP) + compact_string("Stable") + int32(5) + int32(5)
              + compact_string("simple") + count(1) + member_bytes + int32(-(2**31)) + NO_TAGS)
    missing = (int16(69) + compact_string("Group audit is not a share group.") + compact_string("audit")
               + compact_string("") + int32(0) + int32(0) + compact_string("") + count(0) + int32(-(2**31)) + NO_TAGS)
    return obj, int32(0) + count(2) + stable + missing + NO_TAGS


def fetch_request() -> tuple[Any, bytes]:
    """Fetch two partitions of invoices, acknowledging on partition 0 a range in one type and a range in one type
    per offset, and forget two partitions of refunds."""
    r = FETCH.REQUEST
    invoices = r.FetchTopic(topic_id=ORDERS, partitions=[
        r.FetchPartition(partition_index=0, acknowledgement_batches=[
            r.AcknowledgementBatch(first_offset=100, last_offset=104, acknowledge_types=[ACCEPT]),
            r.AcknowledgementBatch(first_offset=105, last_offset=107, acknowledge_types=[ACCEPT, RELEASE, REJECT]),
        ]),
        r.FetchPartition(partition_index=1),
    ])
    obj = r.cls(group_id=GROUP, member_id=MEMBER, share_session_epoch=3, max_wait_ms=500, min_bytes=1,
                max_bytes=52_428_800, max_records=500, batch_size=500, topics=[invoices],
                forgotten_topics_data=[r.ForgottenTopic(topic_id=PAYMENTS, partitions=[0, 3])])
    body = (compact_string(GROUP) + compact_string(MEMBER) + int32(3) + int32(500) + int32(1) + int32(52_428_800)
            + int32(500) + int32(500)  # MaxRecords, BatchSize (v1)
            + count(1) + ORDERS + count(2)
            + int32(0) + count(2)  # partition 0 (no PartitionMaxBytes at v1), two acknowledgement batches
            + int64(100) + int64(104) + count(1) + int8(ACCEPT) + NO_TAGS
            + int64(105) + int64(107) + count(3) + int8(ACCEPT) + int8(RELEASE) + int8(REJECT) + NO_TAGS
            + NO_TAGS
            + int32(1) + count(0) + NO_TAGS  # partition 1: fetch only
            + NO_TAGS  # the topic's tags
            + count(1) + PAYMENTS + count(2) + int32(0) + int32(3) + NO_TAGS  # ForgottenTopicsData
            + NO_TAGS)
    return obj, body


BATCH = bytes(build_batch([(b"inv-100", b'{"amount": 12}', [], 1_767_225_600_000),
                           (b"inv-101", b'{"amount": 7}', [("source", b"web")], 1_767_225_600_004),
                           (b"inv-102", None, [], 1_767_225_600_009)], base_offset=100, partition_leader_epoch=5))


def fetch_response() -> tuple[Any, bytes]:
    """Partition 0: three records, 100-101 delivered for the first time and 102 for the second; partition 1: its
    leader moved (no records, the new leader named), the acknowledgements sent for it refused."""
    r = FETCH.RESPONSE
    partitions = [
        r.PartitionData(partition_index=0, current_leader=r.LeaderIdAndEpoch(leader_id=1, leader_epoch=5),
                        records=BATCH, acquired_records=[
                            r.AcquiredRecords(first_offset=100, last_offset=101, delivery_count=1),
                            r.AcquiredRecords(first_offset=102, last_offset=102, delivery_count=2),
                        ]),
        r.PartitionData(partition_index=1, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        error_message="Not the leader", acknowledge_error_code=ErrorCode.INVALID_RECORD_STATE,
                        acknowledge_error_message="Records not acquired by this member",
                        current_leader=r.LeaderIdAndEpoch(leader_id=2, leader_epoch=6)),
    ]
    obj = r.cls(acquisition_lock_timeout_ms=30_000,
                responses=[r.ShareFetchableTopicResponse(topic_id=ORDERS, partitions=partitions)],
                node_endpoints=[r.NodeEndpoint(node_id=2, host="broker-2", port=9094, rack="eu-west-1b")])
    body = (int32(0) + int16(0) + b"\x00" + int32(30_000)  # AcquisitionLockTimeoutMs (v1)
            + count(1) + ORDERS + count(2)
            + int32(0) + int16(0) + b"\x00" + int16(0) + b"\x00"
            + int32(1) + int32(5) + NO_TAGS  # CurrentLeader
            + compact_records(BATCH)
            + count(2) + int64(100) + int64(101) + int16(1) + NO_TAGS + int64(102) + int64(102) + int16(2) + NO_TAGS
            + NO_TAGS
            + int32(1) + int16(6) + compact_string("Not the leader")
            + int16(121) + compact_string("Records not acquired by this member")
            + int32(2) + int32(6) + NO_TAGS
            + b"\x00"  # Records: null
            + count(0) + NO_TAGS
            + NO_TAGS  # the topic's tags
            + count(1) + int32(2) + compact_string("broker-2") + int32(9094) + compact_string("eu-west-1b") + NO_TAGS
            + NO_TAGS)
    return obj, body


def fetch_session_not_found() -> tuple[Any, bytes]:
    obj = FETCH.RESPONSE.cls(error_code=ErrorCode.SHARE_SESSION_NOT_FOUND, error_message="Share session not found")
    body = (int32(0) + int16(122) + compact_string("Share session not found") + int32(0) + count(0) + count(0)
            + NO_TAGS)
    return obj, body


def acknowledge_request() -> tuple[Any, bytes]:
    """Close the session (-1), accepting 100-101 and rejecting 102 on partition 0."""
    r = ACKNOWLEDGE.REQUEST
    obj = r.cls(group_id=GROUP, member_id=MEMBER, share_session_epoch=-1, topics=[
        r.AcknowledgeTopic(topic_id=ORDERS, partitions=[r.AcknowledgePartition(partition_index=0,
                                                                               acknowledgement_batches=[
            r.AcknowledgementBatch(first_offset=100, last_offset=101, acknowledge_types=[ACCEPT]),
            r.AcknowledgementBatch(first_offset=102, last_offset=102, acknowledge_types=[REJECT]),
        ])])])
    body = (compact_string(GROUP) + compact_string(MEMBER) + int32(-1)
            + count(1) + ORDERS + count(1) + int32(0) + count(2)
            + int64(100) + int64(101) + count(1) + int8(ACCEPT) + NO_TAGS
            + int64(102) + int64(102) + count(1) + int8(REJECT) + NO_TAGS
            + NO_TAGS + NO_TAGS + NO_TAGS)
    return obj, body


def acknowledge_response() -> tuple[Any, bytes]:
    r = ACKNOWLEDGE.RESPONSE
    obj = r.cls(responses=[r.ShareAcknowledgeTopicResponse(topic_id=ORDERS, partitions=[
        r.PartitionData(partition_index=0, current_leader=r.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)),
        r.PartitionData(partition_index=1, error_code=ErrorCode.INVALID_RECORD_STATE, error_message="Not acquired",
                        current_leader=r.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)),
    ])])
    body = (int32(0) + int16(0) + b"\x00"  # no AcquisitionLockTimeoutMs before v2
            + count(1) + ORDERS + count(2)
            + int32(0) + int16(0) + b"\x00" + int32(-1) + int32(-1) + NO_TAGS + NO_TAGS
            + int32(1) + int16(121) + compact_string("Not acquired") + int32(-1) + int32(-1) + NO_TAGS + NO_TAGS
            + NO_TAGS
            + count(0) + NO_TAGS)
    return obj, body


def describe_offsets_request() -> tuple[Any, bytes]:
    """One group's offsets for two partitions of invoices, and every offset of another group (topics null)."""
    r = DESCRIBE_OFFSETS.REQUEST
    obj = r.cls(groups=[
        r.DescribeShareGroupOffsetsRequestGroup(group_id=GROUP, topics=[
            r.DescribeShareGroupOffsetsRequestTopic(topic_name="invoices", partitions=[0, 1])]),
        r.DescribeShareGroupOffsetsRequestGroup(group_id="audit", topics=None),
    ])
    body = (count(2) + compact_string(GROUP) + count(1) + compact_string("invoices") + count(2) + int32(0) + int32(1)
            + NO_TAGS + NO_TAGS
            + compact_string("audit") + b"\x00" + NO_TAGS
            + NO_TAGS)
    return obj, body


def describe_offsets_response(version: int) -> tuple[Any, bytes]:
    r = DESCRIBE_OFFSETS.RESPONSE
    lag = 42 if version >= 1 else -1
    obj = r.cls(groups=[r.DescribeShareGroupOffsetsResponseGroup(group_id=GROUP, topics=[
        r.DescribeShareGroupOffsetsResponseTopic(topic_name="invoices", topic_id=ORDERS, partitions=[
            r.DescribeShareGroupOffsetsResponsePartition(partition_index=0, start_offset=103, leader_epoch=5, lag=lag),
            r.DescribeShareGroupOffsetsResponsePartition(partition_index=1, start_offset=-1, leader_epoch=-1, lag=-1,
                                                         error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                         error_message="No such partition"),
        ])])])

    def lag_bytes(value: int) -> bytes:
        return int64(value) if version >= 1 else b""  # Lag: v1+

    body = (int32(0) + count(1) + compact_string(GROUP) + count(1) + compact_string("invoices") + ORDERS + count(2)
            + int32(0) + int64(103) + int32(5) + lag_bytes(42) + int16(0) + b"\x00" + NO_TAGS
            + int32(1) + int64(-1) + int32(-1) + lag_bytes(-1) + int16(3) + compact_string("No such partition")
            + NO_TAGS
            + NO_TAGS  # the topic's tags
            + int16(0) + b"\x00" + NO_TAGS  # the group's error, its tags
            + NO_TAGS)
    return obj, body


def alter_offsets_request() -> tuple[Any, bytes]:
    r = ALTER_OFFSETS.REQUEST
    obj = r.cls(group_id=GROUP, topics=[r.AlterShareGroupOffsetsRequestTopic(topic_name="invoices", partitions=[
        r.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0),
        r.AlterShareGroupOffsetsRequestPartition(partition_index=1, start_offset=250),
    ])])
    body = (compact_string(GROUP) + count(1) + compact_string("invoices") + count(2)
            + int32(0) + int64(0) + NO_TAGS + int32(1) + int64(250) + NO_TAGS + NO_TAGS + NO_TAGS)
    return obj, body


def alter_offsets_response() -> tuple[Any, bytes]:
    r = ALTER_OFFSETS.RESPONSE
    obj = r.cls(responses=[r.AlterShareGroupOffsetsResponseTopic(topic_name="invoices", topic_id=ORDERS, partitions=[
        r.AlterShareGroupOffsetsResponsePartition(partition_index=0),
        r.AlterShareGroupOffsetsResponsePartition(partition_index=1, error_code=ErrorCode.NON_EMPTY_GROUP,
                                                  error_message="The group has members"),
    ])])
    body = (int32(0) + int16(0) + b"\x00" + count(1) + compact_string("invoices") + ORDERS + count(2)
            + int32(0) + int16(0) + b"\x00" + NO_TAGS
            + int32(1) + int16(68) + compact_string("The group has members") + NO_TAGS
            + NO_TAGS + NO_TAGS)
    return obj, body


def delete_offsets_request() -> tuple[Any, bytes]:
    r = DELETE_OFFSETS.REQUEST
    obj = r.cls(group_id=GROUP, topics=[r.DeleteShareGroupOffsetsRequestTopic(topic_name="invoices"),
                                        r.DeleteShareGroupOffsetsRequestTopic(topic_name="refunds")])
    body = (compact_string(GROUP) + count(2) + compact_string("invoices") + NO_TAGS + compact_string("refunds")
            + NO_TAGS + NO_TAGS)
    return obj, body


def delete_offsets_response() -> tuple[Any, bytes]:
    r = DELETE_OFFSETS.RESPONSE
    obj = r.cls(responses=[
        r.DeleteShareGroupOffsetsResponseTopic(topic_name="invoices", topic_id=ORDERS),
        r.DeleteShareGroupOffsetsResponseTopic(topic_name="refunds", error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                               error_message="Unknown topic"),
    ])
    body = (int32(0) + int16(0) + b"\x00" + count(2)
            + compact_string("invoices") + ORDERS + int16(0) + b"\x00" + NO_TAGS
            + compact_string("refunds") + bytes(16) + int16(3) + compact_string("Unknown topic") + NO_TAGS
            + NO_TAGS)
    return obj, body


HAND_BUILT: list[tuple[str, Message, int, Callable[[], tuple[Any, bytes]]]] = [
    ("heartbeat-join", HEARTBEAT.REQUEST, 1, heartbeat_join),
    ("heartbeat-steady", HEARTBEAT.REQUEST, 1, heartbeat_steady),
    ("heartbeat-assignment", HEARTBEAT.RESPONSE, 1, heartbeat_assignment),
    ("heartbeat-unknown-member", HEARTBEAT.RESPONSE, 1, heartbeat_unknown_member),
    ("describe-request", DESCRIBE.REQUEST, 1, describe_request),
    ("describe-response", DESCRIBE.RESPONSE, 1, describe_response),
    ("fetch-request", FETCH.REQUEST, 1, fetch_request),
    ("fetch-response", FETCH.RESPONSE, 1, fetch_response),
    ("fetch-session-not-found", FETCH.RESPONSE, 1, fetch_session_not_found),
    ("acknowledge-request", ACKNOWLEDGE.REQUEST, 1, acknowledge_request),
    ("acknowledge-response", ACKNOWLEDGE.RESPONSE, 1, acknowledge_response),
    ("describe-offsets-request-v0", DESCRIBE_OFFSETS.REQUEST, 0, describe_offsets_request),
    ("describe-offsets-request-v1", DESCRIBE_OFFSETS.REQUEST, 1, describe_offsets_request),
    ("describe-offsets-response-v0", DESCRIBE_OFFSETS.RESPONSE, 0, lambda: describe_offsets_response(0)),
    ("describe-offsets-response-v1", DESCRIBE_OFFSETS.RESPONSE, 1, lambda: describe_offsets_response(1)),
    ("alter-offsets-request", ALTER_OFFSETS.REQUEST, 0, alter_offsets_request),
    ("alter-offsets-response", ALTER_OFFSETS.RESPONSE, 0, alter_offsets_response),
    ("delete-offsets-request", DELETE_OFFSETS.REQUEST, 0, delete_offsets_request),
    ("delete-offsets-response", DELETE_OFFSETS.RESPONSE, 0, delete_offsets_response),
]


@pytest.mark.parametrize(("message", "version", "build"), [
    pytest.param(message, version, build, id=name) for name, message, version, build in HAND_BUILT])
def test_message_matches_bytes_built_by_hand(message: Message, version: int,
                                             build: Callable[[], tuple[Any, bytes]]) -> None:
    obj, body = build()
    assert message.encode(obj, version) == body
    assert message.decode(body, version) == obj
    assert_round_trip(message, obj, version)


def test_fetch_response_records_decode_as_a_view_of_the_frame() -> None:
    _, body = fetch_response()
    records = FETCH.RESPONSE.decode(body, 1).responses[0].partitions[0].records
    assert isinstance(records, memoryview) and bytes(records) == BATCH


def test_describe_offsets_v0_reads_no_lag_and_leaves_it_unknown() -> None:
    _, body = describe_offsets_response(0)
    partitions = DESCRIBE_OFFSETS.RESPONSE.decode(body, 0).groups[0].topics[0].partitions
    assert [p.lag for p in partitions] == [-1, -1]


def test_kafka_defaults_of_a_fresh_share_fetch() -> None:
    request, response = FETCH.REQUEST.cls(), FETCH.RESPONSE.PartitionData()
    assert (request.group_id, request.member_id, request.max_bytes) == (None, "", 2147483647)
    # no default in Kafka's JSON: a handler names an unknown leader -1, -1 itself
    assert (response.current_leader.leader_id, response.current_leader.leader_epoch) == (0, 0)
    assert response.records is None and response.acquired_records == []
