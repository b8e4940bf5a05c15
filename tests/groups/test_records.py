"""`__consumer_offsets` record formats of consumer groups (KIP-848): Kafka's ConsumerGroup*Key/Value.

Table-driven and socket-free: every record type encoded, decoded and compared (key and value), tombstones, the
declarations against Kafka's group-coordinator JSON (from the apache/kafka mirror beside the repository; skipped
without it), and golden bytes derived by hand from that JSON for a current-assignment record and a member-metadata
record carrying the tagged classic-member metadata.
"""

from __future__ import annotations

import functools
import json
import struct
import uuid
from typing import Any

import pytest

from epoch_broker.broker.groups import records
from epoch_broker.broker.groups.records import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
    CONSUMER_GROUP_MEMBER_METADATA_VALUE,
    CONSUMER_GROUP_METADATA_VALUE,
    CONSUMER_GROUP_PARTITION_METADATA_VALUE,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    GroupKey,
    OffsetKey,
)
from epoch_broker.protocol.schema import Message
from tests.protocol.test_conformance import declared_view, reference_view
from tests.protocol.test_txn_messages import git, schema_ref

ORDERS = uuid.UUID("6d0f54c6-8a2b-4b52-9c36-0b6a1f8e2d11").bytes
PAYMENTS = uuid.UUID("0b9e3f7a-1c4d-4e8f-a2b3-c4d5e6f70819").bytes
GROUP, MEMBER = "checkout-service", "f3Kq9Zs1T0uV2wX4yA5bCg"

CURRENT = CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE
MEMBER_METADATA = CONSUMER_GROUP_MEMBER_METADATA_VALUE
PARTITION_METADATA = CONSUMER_GROUP_PARTITION_METADATA_VALUE
TARGET_MEMBER = CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE

# key, its version, a realistic value
CASES: list[tuple[str, ConsumerGroupKey, int, Any]] = [
    ("group-epoch", ConsumerGroupMetadataKey(GROUP), 3, CONSUMER_GROUP_METADATA_VALUE.cls(epoch=12)),
    ("subscription-metadata", ConsumerGroupPartitionMetadataKey(GROUP), 4, PARTITION_METADATA.cls(topics=[
        PARTITION_METADATA.TopicMetadata(topic_id=ORDERS, topic_name="orders", num_partitions=6),
        PARTITION_METADATA.TopicMetadata(topic_id=PAYMENTS, topic_name="payments", num_partitions=3,
                                         partition_metadata=[PARTITION_METADATA.PartitionMetadata(
                                             partition=0, racks=["eu-west-1a", "eu-west-1b"])]),
    ])),
    ("member-metadata", ConsumerGroupMemberMetadataKey(GROUP, MEMBER), 5, MEMBER_METADATA.cls(
        instance_id="checkout-1", rack_id=None, client_id="checkout", client_host="/10.0.4.17",
        subscribed_topic_names=["orders", "payments"], subscribed_topic_regex="^refunds-.*",
        rebalance_timeout_ms=300_000, server_assignor="uniform")),
    ("classic-member-metadata", ConsumerGroupMemberMetadataKey(GROUP, "classic-1"), 5, MEMBER_METADATA.cls(
        instance_id=None, rack_id=None, client_id="legacy", client_host="/10.0.4.18",
        subscribed_topic_names=["orders"], subscribed_topic_regex=None, rebalance_timeout_ms=60_000,
        server_assignor=None, classic_member_metadata=MEMBER_METADATA.ClassicMemberMetadata(
            session_timeout_ms=45_000, supported_protocols=[
                MEMBER_METADATA.ClassicProtocol(name="cooperative-sticky", metadata=b"\x00\x03sub")]))),
    ("target-assignment-epoch", ConsumerGroupTargetAssignmentMetadataKey(GROUP), 6,
     CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE.cls(assignment_epoch=12)),
    ("target-assignment-member", ConsumerGroupTargetAssignmentMemberKey(GROUP, MEMBER), 7, TARGET_MEMBER.cls(
        topic_partitions=[TARGET_MEMBER.TopicPartition(topic_id=ORDERS, partitions=[0, 2, 4]),
                          TARGET_MEMBER.TopicPartition(topic_id=PAYMENTS, partitions=[1])])),
    ("current-assignment", ConsumerGroupCurrentMemberAssignmentKey(GROUP, MEMBER), 8, CURRENT.cls(
        member_epoch=12, previous_member_epoch=11, state=1,  # UNREVOKED_PARTITIONS
        assigned_partitions=[CURRENT.TopicPartitions(topic_id=ORDERS, partitions=[0, 2])],
        partitions_pending_revocation=[CURRENT.TopicPartitions(topic_id=ORDERS, partitions=[4])])),
]
IDS = [name for name, *_ in CASES]


@pytest.mark.parametrize(("name", "key", "version", "value"), CASES, ids=IDS)
def test_each_record_type_round_trips_key_and_value(name: str, key: ConsumerGroupKey, version: int,
                                                    value: Any) -> None:
    encoded_key = records.encode_key(key)
    assert struct.unpack_from(">h", encoded_key) == (version,)  # the key version names the record type
    assert records.decode_key(encoded_key) == key
    encoded = records.encode_value(key, value)
    assert encoded is not None and encoded[:2] == b"\x00\x00"  # value version 0
    decoded = records.decode_value(key, encoded)
    assert type(decoded) is records.value_message(key).cls
    assert decoded == value and records.encode_value(key, decoded) == encoded


@pytest.mark.parametrize(("name", "key", "version", "value"), CASES, ids=IDS)
def test_a_null_value_is_a_tombstone_both_ways(name: str, key: ConsumerGroupKey, version: int, value: Any) -> None:
    assert records.encode_value(key, None) is None
    assert records.decode_value(key, None) is None


def test_a_value_of_another_record_type_is_refused() -> None:
    with pytest.raises(TypeError, match="ConsumerGroupMetadataValue"):
        records.encode_value(ConsumerGroupMetadataKey(GROUP), CURRENT.cls())


def test_offset_and_classic_group_keys_still_decode_as_before() -> None:
    assert records.decode_key(records.offset_key(GROUP, "orders", 3)) == OffsetKey(GROUP, "orders", 3)
    assert records.decode_key(records.group_key(GROUP)) == GroupKey(GROUP)
    with pytest.raises(records.DecodeError):
        records.decode_key(struct.pack(">h", 9) + b"\x00\x01g")


def test_unknown_tags_of_a_newer_writer_survive_a_decode_and_encode() -> None:
    key = ConsumerGroupMetadataKey(GROUP)
    newer = b"\x00\x00" + struct.pack(">i", 7) + b"\x01" + b"\x05\x02" + b"hi"  # tag 5, 2 bytes
    value = records.decode_value(key, newer)
    assert value.epoch == 7 and records.encode_value(key, value) == newer


# -- golden bytes, derived by hand from Kafka's JSON ---------------------------------------------------------


def compact_string(text: str) -> bytes:
    return bytes([len(text) + 1]) + text.encode()


def test_current_assignment_record_matches_bytes_built_by_hand() -> None:
    _, key, _, value = CASES[IDS.index("current-assignment")]
    # key: version 8, then GroupId and MemberId as classic (int16-length) strings: keys are not flexible
    assert records.encode_key(key) == (
        b"\x00\x08" + struct.pack(">h", len(GROUP)) + GROUP.encode() + struct.pack(">h", len(MEMBER)) + MEMBER.encode())
    assert records.encode_value(key, value) == (
        b"\x00\x00"  # value version 0
        + struct.pack(">iib", 12, 11, 1)  # MemberEpoch, PreviousMemberEpoch, State
        + b"\x02" + ORDERS + b"\x03" + struct.pack(">ii", 0, 2) + b"\x00"  # AssignedPartitions: 1 topic, its tags
        + b"\x02" + ORDERS + b"\x02" + struct.pack(">i", 4) + b"\x00"  # PartitionsPendingRevocation
        + b"\x00"  # the value's tagged fields: none
    )


def test_classic_member_metadata_is_tagged_field_0_holding_a_nullable_struct() -> None:
    _, key, _, value = CASES[IDS.index("classic-member-metadata")]
    classic = (
        b"\x01"  # the nullable struct is present (Kafka writes an unsigned varint 1)
        + struct.pack(">i", 45_000)  # SessionTimeoutMs
        + b"\x02" + compact_string("cooperative-sticky") + b"\x06\x00\x03sub" + b"\x00"  # one protocol, its tags
        + b"\x00"  # ClassicMemberMetadata's tags
    )
    assert records.encode_value(key, value) == (
        b"\x00\x00"
        + b"\x00\x00"  # InstanceId, RackId: null
        + compact_string("legacy") + compact_string("/10.0.4.18")
        + b"\x02" + compact_string("orders")  # SubscribedTopicNames
        + b"\x00"  # SubscribedTopicRegex: null
        + struct.pack(">i", 60_000)  # RebalanceTimeoutMs
        + b"\x00"  # ServerAssignor: null
        + b"\x01" + b"\x00" + bytes([len(classic)]) + classic  # 1 tagged field: tag 0, its size, its bytes
    )
    consumer_member = records.encode_value(*CASES[IDS.index("member-metadata")][1::2])
    assert consumer_member is not None and consumer_member.endswith(compact_string("uniform") + b"\x00")


# -- declarations against Kafka's JSON -----------------------------------------------------------------------

SCHEMA_DIR = "group-coordinator/src/main/resources/common/message"


@functools.cache
def group_coordinator_json(name: str) -> dict[str, Any]:
    if schema_ref() is None:
        pytest.skip("apache/kafka mirror not found")
    shown = git("show", f"HEAD:{SCHEMA_DIR}/{name}.json")
    assert shown.returncode == 0, shown.stderr
    return json.loads("\n".join(line for line in shown.stdout.splitlines() if not line.lstrip().startswith("//")))


DECLARED: list[Message] = [m for fmt in records._MODERN_GROUP_FORMATS.values() for m in fmt[1:]]


@pytest.mark.parametrize("message", DECLARED, ids=lambda m: m.name)
def test_declaration_matches_kafka_json(message: Message) -> None:
    spec = group_coordinator_json(message.name)
    assert (spec["name"], spec["validVersions"]) == (message.name, str(message.versions))
    assert str(message.flexible) == ("none" if spec["flexibleVersions"] == "none" else "0+")
    common = {struct["name"]: struct["fields"] for struct in spec.get("commonStructs", [])}
    version = message.versions.low
    assert declared_view(message, message.fields, message.cls, version) == reference_view(
        spec["fields"], version, common)
