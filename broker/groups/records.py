"""The records of `__consumer_offsets`, in Kafka's own formats, so the topic reads like Apache Kafka's.

Every record key and value starts with an int16 version, then the struct of that version (Kafka's
OffsetCommitKey/Value, GroupMetadataKey/Value and ConsumerGroup*Key/Value JSON, declared below with the protocol
DSL). The key's version names the record type:

    key v0-1  OffsetCommitKey     group string, topic string, partition int32
    key v2    GroupMetadataKey    group string
    value     OffsetCommitValue   v0: offset int64, metadata string, commit_timestamp int64
                                  v1: + expire_timestamp int64 (dropped again in v2)
                                  v3: offset int64, leader_epoch int32, metadata string, commit_timestamp int64
    value     GroupMetadataValue  protocol_type, generation, protocol?, leader?, current_state_timestamp (v2+),
                                  members[]: member_id, group_instance_id? (v3+), client_id, client_host,
                                  rebalance_timeout (v1+), session_timeout, subscription, assignment

  Consumer groups (KIP-848); keys: group_id string (+ member_id string for the per-member ones), not flexible;
  values: version 0, flexible (compact encodings, a tagged-field section closing every struct):

    key v3  ConsumerGroupMetadataKey                  value: epoch int32 (the group epoch)
    key v4  ConsumerGroupPartitionMetadataKey         value: topics[]: topic_id uuid, topic_name, num_partitions
                                                             int32, partition_metadata[]: partition, racks[]
                                                             (deprecated in Kafka 4.0: written empty)
    key v5  ConsumerGroupMemberMetadataKey            value: instance_id?, rack_id?, client_id, client_host,
                                                             subscribed_topic_names[], subscribed_topic_regex?,
                                                             rebalance_timeout_ms int32, server_assignor?,
                                                             tag 0: classic_member_metadata? (session_timeout_ms,
                                                             supported_protocols[]: name, metadata bytes)
    key v6  ConsumerGroupTargetAssignmentMetadataKey  value: assignment_epoch int32
    key v7  ConsumerGroupTargetAssignmentMemberKey    value: topic_partitions[]: topic_id uuid, partitions[]
    key v8  ConsumerGroupCurrentMemberAssignmentKey   value: member_epoch, previous_member_epoch int32, state
                                                             int8 (Kafka's MemberState ids: 0 stable, 1
                                                             unrevoked_partitions, 2 unreleased_partitions, 127
                                                             unknown), assigned_partitions[] and
                                                             partitions_pending_revocation[]: topic_id, partitions[]

  Share groups (KIP-932), the same way (keys as Kafka's share group records; Kafka 4.1 dropped the partition
  metadata record, v9, which is neither written nor read here: the subscribed topics are recomputed on load):

    key v10 ShareGroupMemberMetadataKey               value: rack_id?, client_id, client_host,
                                                             subscribed_topic_names[]
    key v11 ShareGroupMetadataKey                     value: epoch int32 (the group epoch)
    key v12 ShareGroupTargetAssignmentMetadataKey     value: assignment_epoch int32
    key v13 ShareGroupTargetAssignmentMemberKey       value: topic_partitions[]: topic_id uuid, partitions[]
    key v14 ShareGroupCurrentMemberAssignmentKey      value: member_epoch, previous_member_epoch int32, state
                                                             int8, assigned_partitions[]: topic_id, partitions[]

  Share-partition state (KIP-932): Kafka keeps it in `__share_group_state` behind its share coordinator, as
  ShareSnapshotKey v0 / ShareSnapshotValue v0; here it lives in the share group's own partition (broker/groups/
  share_state.py says why), the same key and value at a key version Kafka does not use:

    key v1000 ShareSnapshotKey                        group_id string, topic_id uuid, partition int32
                                                      value: snapshot_epoch uint16, state_epoch, leader_epoch
                                                             int32, start_offset int64, state_batches[]:
                                                             first_offset, last_offset int64, delivery_state
                                                             int8, delivery_count int16

Rules:
- We write offset keys v1, offset values v3 (with the committed leader epoch, KIP-320), group keys v2 and
  group values v3; we read every version up to those (v4, flexible, is Kafka 3.x+ and not written here).
- Consumer-group records are written and read at key v3-v8 (share groups v10-v14), value v0, as Kafka 4.0 writes
  them; unknown tagged
  fields of a value are kept on the decoded object and written back. `decode_key` returns one frozen key class per
  record type, each with `group` (and `member_id` where Kafka's key has one); `encode_key`/`encode_value`/
  `decode_value` handle the eleven modern group types uniformly, the value class chosen by the key's type.
- A null value is a tombstone: the offset, the group or the consumer-group record is deleted, and compaction may
  drop the key. `encode_value` and `decode_value` pass None through.
- Sans-IO: bytes in, values out.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from epoch_broker.protocol.schema import DecodeError, Field, Message

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3

_VERSION = struct.Struct(">h")

OFFSET_COMMIT_KEY = Message(
    "OffsetCommitKey", kind="data", versions="0-1", flexible="none",
    fields=[
        Field("group", "string", "0+"),
        Field("topic", "string", "0+"),
        Field("partition", "int32", "0+"),
    ],
)

GROUP_METADATA_KEY = Message(
    "GroupMetadataKey", kind="data", versions="2", flexible="none",
    fields=[Field("group", "string", "2")],
)

OFFSET_COMMIT_VALUE = Message(
    "OffsetCommitValue", kind="data", versions="0-3", flexible="none",
    fields=[
        Field("offset", "int64", "0+"),
        Field("leader_epoch", "int32", "3+", default=-1),
        Field("metadata", "string", "0+"),
        Field("commit_timestamp", "int64", "0+"),
        Field("expire_timestamp", "int64", "1", default=-1),
    ],
)

GROUP_METADATA_VALUE = Message(
    "GroupMetadataValue", kind="data", versions="0-3", flexible="none",
    fields=[
        Field("protocol_type", "string", "0+"),
        Field("generation", "int32", "0+"),
        Field("protocol", "string", "0+", nullable="0+"),
        Field("leader", "string", "0+", nullable="0+"),
        Field("current_state_timestamp", "int64", "2+", default=-1),
        Field("members", "[]MemberMetadata", "0+", fields=[
            Field("member_id", "string", "0+"),
            Field("group_instance_id", "string", "3+", nullable="3+", default=None),
            Field("client_id", "string", "0+"),
            Field("client_host", "string", "0+"),
            Field("rebalance_timeout", "int32", "1+"),
            Field("session_timeout", "int32", "0+"),
            Field("subscription", "bytes", "0+"),
            Field("assignment", "bytes", "0+"),
        ]),
    ],
)

# ConsumerProtocolSubscription: only its v0 prefix (the subscribed topics) is read; later versions append
# fields after it, so decoding any version as v0 yields the topics (OffsetDelete needs nothing else).
CONSUMER_SUBSCRIPTION = Message(
    "ConsumerProtocolSubscription", kind="data", versions="0", flexible="none",
    fields=[
        Field("topics", "[]string", "0+"),
        Field("user_data", "bytes", "0+", nullable="0+", default=None),
    ],
)


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


SHARE_SNAPSHOT_KEY_VERSION = 1000
SHARE_SNAPSHOT_KEY = Message(
    "ShareSnapshotKey", kind="data", versions="1000", flexible="none",
    fields=[Field("group_id", "string", "1000"), Field("topic_id", "uuid", "1000"),
            Field("partition", "int32", "1000")],
)
SHARE_SNAPSHOT_VALUE = Message(
    "ShareSnapshotValue", kind="data", versions="0", flexible="0+",
    fields=[
        Field("snapshot_epoch", "uint16", "0"),
        Field("state_epoch", "int32", "0+"),
        Field("leader_epoch", "int32", "0+"),
        Field("start_offset", "int64", "0"),
        Field("state_batches", "[]StateBatch", "0", fields=[
            Field("first_offset", "int64", "0"),
            Field("last_offset", "int64", "0"),
            Field("delivery_state", "int8", "0"),
            Field("delivery_count", "int16", "0"),
        ]),
    ],
)


@dataclass(frozen=True, slots=True)
class ShareSnapshotKey:
    """One share group's state of one topic partition."""

    group: str
    topic_id: bytes
    partition: int


def share_snapshot_key(key: ShareSnapshotKey) -> bytes:
    fields = SHARE_SNAPSHOT_KEY.cls(group_id=key.group, topic_id=key.topic_id, partition=key.partition)
    return _versioned(SHARE_SNAPSHOT_KEY, fields, SHARE_SNAPSHOT_KEY_VERSION)


def share_snapshot_value(value: Any) -> bytes:
    """`value` is a SHARE_SNAPSHOT_VALUE.cls instance."""
    return _versioned(SHARE_SNAPSHOT_VALUE, value, 0)


def decode_share_snapshot_value(buf: bytes) -> Any:
    (version,) = _VERSION.unpack_from(buf)
    return SHARE_SNAPSHOT_VALUE.decode_from(buf, version, _VERSION.size)[0]


# -- consumer groups (KIP-848) -----------------------------------------------------------------------------

CONSUMER_GROUP_METADATA_VALUE = Message(
    "ConsumerGroupMetadataValue", kind="data", versions="0", flexible="0+",
    fields=[Field("epoch", "int32", "0+")],
)

CONSUMER_GROUP_PARTITION_METADATA_VALUE = Message(
    "ConsumerGroupPartitionMetadataValue", kind="data", versions="0", flexible="0+",
    fields=[
        Field("topics", "[]TopicMetadata", "0+", fields=[
            Field("topic_id", "uuid", "0+"),
            Field("topic_name", "string", "0+"),
            Field("num_partitions", "int32", "0+"),
            Field("partition_metadata", "[]PartitionMetadata", "0+", fields=[
                Field("partition", "int32", "0+"),
                Field("racks", "[]string", "0+"),
            ]),
        ]),
    ],
)

CONSUMER_GROUP_MEMBER_METADATA_VALUE = Message(
    "ConsumerGroupMemberMetadataValue", kind="data", versions="0", flexible="0+",
    fields=[
        Field("instance_id", "string", "0+", nullable="0+"),
        Field("rack_id", "string", "0+", nullable="0+"),
        Field("client_id", "string", "0+"),
        Field("client_host", "string", "0+"),
        Field("subscribed_topic_names", "[]string", "0+"),
        Field("subscribed_topic_regex", "string", "0+", nullable="0+"),
        Field("rebalance_timeout_ms", "int32", "0+", default=-1),
        Field("server_assignor", "string", "0+", nullable="0+"),
        # a classic member of a consumer group (Kafka's online migration); null for a consumer-protocol member
        Field("classic_member_metadata", "ClassicMemberMetadata", "0+", nullable="0+", default=None, tag=0,
              tagged="0+", fields=[
                  Field("session_timeout_ms", "int32", "0+"),
                  Field("supported_protocols", "[]ClassicProtocol", "0+", fields=[
                      Field("name", "string", "0+"),
                      Field("metadata", "bytes", "0+"),
                  ]),
              ]),
    ],
)

CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = Message(
    "ConsumerGroupTargetAssignmentMetadataValue", kind="data", versions="0", flexible="0+",
    fields=[Field("assignment_epoch", "int32", "0+")],
)

CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = Message(
    "ConsumerGroupTargetAssignmentMemberValue", kind="data", versions="0", flexible="0+",
    fields=[
        Field("topic_partitions", "[]TopicPartition", "0+", fields=[
            Field("topic_id", "uuid", "0+"),
            Field("partitions", "[]int32", "0+"),
        ]),
    ],
)

_TOPIC_PARTITIONS = [Field("topic_id", "uuid", "0+"), Field("partitions", "[]int32", "0+")]
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = Message(
    "ConsumerGroupCurrentMemberAssignmentValue", kind="data", versions="0", flexible="0+",
    fields=[
        Field("member_epoch", "int32", "0+"),
        Field("previous_member_epoch", "int32", "0+"),
        Field("state", "int8", "0+"),
        Field("assigned_partitions", "[]TopicPartitions", "0+", fields=_TOPIC_PARTITIONS),
        Field("partitions_pending_revocation", "[]TopicPartitions", "0+", fields=_TOPIC_PARTITIONS),
    ],
)
CONSUMER_GROUP_VALUE_VERSION = 0

SHARE_GROUP_METADATA_VALUE = Message(
    "ShareGroupMetadataValue", kind="data", versions="0", flexible="0+",
    fields=[Field("epoch", "int32", "0+")],
)
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = Message(
    "ShareGroupTargetAssignmentMetadataValue", kind="data", versions="0", flexible="0+",
    fields=[Field("assignment_epoch", "int32", "0+")],
)
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = Message(
    "ShareGroupTargetAssignmentMemberValue", kind="data", versions="0", flexible="0+",
    fields=[
        Field("topic_partitions", "[]TopicPartition", "0+", fields=[
            Field("topic_id", "uuid", "0+"),
            Field("partitions", "[]int32", "0+"),
        ]),
    ],
)
SHARE_GROUP_MEMBER_METADATA_VALUE = Message(
    "ShareGroupMemberMetadataValue", kind="data", versions="0", flexible="0+",
    fields=[
        Field("rack_id", "string", "0+", nullable="0+"),
        Field("client_id", "string", "0+"),
        Field("client_host", "string", "0+"),
        Field("subscribed_topic_names", "[]string", "0+"),
    ],
)
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = Message(
    "ShareGroupCurrentMemberAssignmentValue", kind="data", versions="0", flexible="0+",
    fields=[
        Field("member_epoch", "int32", "0+"),
        Field("previous_member_epoch", "int32", "0+"),
        Field("state", "int8", "0+"),
        Field("assigned_partitions", "[]TopicPartitions", "0+", fields=_TOPIC_PARTITIONS),
    ],
)


def _group_key(name: str, version: int) -> Message:
    return Message(name, kind="data", versions=str(version), flexible="none",
                   fields=[Field("group_id", "string", str(version))])


def _member_key(name: str, version: int) -> Message:
    return Message(name, kind="data", versions=str(version), flexible="none",
                   fields=[Field("group_id", "string", str(version)), Field("member_id", "string", str(version))])


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group: str
    member_id: str


ConsumerGroupKey = (ConsumerGroupMetadataKey | ConsumerGroupPartitionMetadataKey | ConsumerGroupMemberMetadataKey
                    | ConsumerGroupTargetAssignmentMetadataKey | ConsumerGroupTargetAssignmentMemberKey
                    | ConsumerGroupCurrentMemberAssignmentKey)


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentKey:
    group: str
    member_id: str


ShareGroupKey = (ShareGroupMetadataKey | ShareGroupMemberMetadataKey | ShareGroupTargetAssignmentMetadataKey
                 | ShareGroupTargetAssignmentMemberKey | ShareGroupCurrentMemberAssignmentKey)
SHARE_GROUP_KEYS = (ShareGroupMetadataKey, ShareGroupMemberMetadataKey, ShareGroupTargetAssignmentMetadataKey,
                    ShareGroupTargetAssignmentMemberKey, ShareGroupCurrentMemberAssignmentKey)
ModernGroupKey = ConsumerGroupKey | ShareGroupKey
_MEMBER_KEYS = (ConsumerGroupMemberMetadataKey, ConsumerGroupTargetAssignmentMemberKey,
                ConsumerGroupCurrentMemberAssignmentKey, ShareGroupMemberMetadataKey,
                ShareGroupTargetAssignmentMemberKey, ShareGroupCurrentMemberAssignmentKey)

# key class -> (key version, key message, value message)
_MODERN_GROUP_FORMATS: dict[type, tuple[int, Message, Message]] = {
    ConsumerGroupMetadataKey: (3, _group_key("ConsumerGroupMetadataKey", 3), CONSUMER_GROUP_METADATA_VALUE),
    ConsumerGroupPartitionMetadataKey: (
        4, _group_key("ConsumerGroupPartitionMetadataKey", 4), CONSUMER_GROUP_PARTITION_METADATA_VALUE),
    ConsumerGroupMemberMetadataKey: (
        5, _member_key("ConsumerGroupMemberMetadataKey", 5), CONSUMER_GROUP_MEMBER_METADATA_VALUE),
    ConsumerGroupTargetAssignmentMetadataKey: (
        6, _group_key("ConsumerGroupTargetAssignmentMetadataKey", 6), CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    ConsumerGroupTargetAssignmentMemberKey: (
        7, _member_key("ConsumerGroupTargetAssignmentMemberKey", 7), CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    ConsumerGroupCurrentMemberAssignmentKey: (
        8, _member_key("ConsumerGroupCurrentMemberAssignmentKey", 8), CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    ShareGroupMemberMetadataKey: (
        10, _member_key("ShareGroupMemberMetadataKey", 10), SHARE_GROUP_MEMBER_METADATA_VALUE),
    ShareGroupMetadataKey: (11, _group_key("ShareGroupMetadataKey", 11), SHARE_GROUP_METADATA_VALUE),
    ShareGroupTargetAssignmentMetadataKey: (
        12, _group_key("ShareGroupTargetAssignmentMetadataKey", 12), SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    ShareGroupTargetAssignmentMemberKey: (
        13, _member_key("ShareGroupTargetAssignmentMemberKey", 13), SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    ShareGroupCurrentMemberAssignmentKey: (
        14, _member_key("ShareGroupCurrentMemberAssignmentKey", 14), SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
}
_MODERN_GROUP_KEY_VERSIONS: dict[int, type[Any]] = {
    version: kind for kind, (version, _, _) in _MODERN_GROUP_FORMATS.items()}


def value_message(key: ModernGroupKey) -> Message:
    """The value format of a consumer or share group record: build values with its `.cls` (and nested struct
    classes, e.g. `value_message(key).TopicPartitions`)."""
    return _MODERN_GROUP_FORMATS[type(key)][2]


def encode_key(key: ModernGroupKey) -> bytes:
    version, message, _ = _MODERN_GROUP_FORMATS[type(key)]
    fields = {"group_id": key.group}
    if isinstance(key, _MEMBER_KEYS):
        fields["member_id"] = key.member_id
    return _versioned(message, message.cls(**fields), version)


def encode_value(key: ModernGroupKey, value: Any | None) -> bytes | None:
    """The value of the record type `key` names (None, a tombstone, stays None)."""
    if value is None:
        return None
    message = value_message(key)
    if type(value) is not message.cls:
        raise TypeError(f"{type(key).__name__} takes a {message.name}, not {type(value).__name__}")
    return _versioned(message, value, CONSUMER_GROUP_VALUE_VERSION)


def decode_value(key: ModernGroupKey, buf: bytes | None) -> Any | None:
    """The value of a consumer or share group record, as an instance of `value_message(key).cls`; None for a
    tombstone."""
    if buf is None:
        return None
    message = value_message(key)
    (version,) = _VERSION.unpack_from(buf)
    return message.decode_from(buf, version, _VERSION.size)[0]


def _versioned(message: Message, obj: Any, version: int) -> bytes:
    return _VERSION.pack(version) + message.encode(obj, version)


def offset_key(group: str, topic: str, partition: int) -> bytes:
    key = OFFSET_COMMIT_KEY.cls(group=group, topic=topic, partition=partition)
    return _versioned(OFFSET_COMMIT_KEY, key, OFFSET_COMMIT_KEY_VERSION)


def group_key(group: str) -> bytes:
    return _versioned(GROUP_METADATA_KEY, GROUP_METADATA_KEY.cls(group=group), GROUP_METADATA_KEY_VERSION)


def offset_value(offset: int, leader_epoch: int, metadata: str, commit_timestamp: int) -> bytes:
    value = OFFSET_COMMIT_VALUE.cls(
        offset=offset, leader_epoch=leader_epoch, metadata=metadata, commit_timestamp=commit_timestamp
    )
    return _versioned(OFFSET_COMMIT_VALUE, value, OFFSET_COMMIT_VALUE_VERSION)


def group_value(value: Any) -> bytes:
    """`value` is a GROUP_METADATA_VALUE.cls instance."""
    return _versioned(GROUP_METADATA_VALUE, value, GROUP_METADATA_VALUE_VERSION)


def decode_key(buf: bytes) -> OffsetKey | GroupKey | ModernGroupKey | ShareSnapshotKey:
    (version,) = _VERSION.unpack_from(buf)
    if version == SHARE_SNAPSHOT_KEY_VERSION:
        key = SHARE_SNAPSHOT_KEY.decode_from(buf, version, _VERSION.size)[0]
        return ShareSnapshotKey(key.group_id, bytes(key.topic_id), key.partition)
    if version in (0, 1):
        key = OFFSET_COMMIT_KEY.decode_from(buf, version, _VERSION.size)[0]
        return OffsetKey(key.group, key.topic, key.partition)
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupKey(GROUP_METADATA_KEY.decode_from(buf, version, _VERSION.size)[0].group)
    kind = _MODERN_GROUP_KEY_VERSIONS.get(version)
    if kind is not None:
        key = _MODERN_GROUP_FORMATS[kind][1].decode_from(buf, version, _VERSION.size)[0]
        return kind(key.group_id, key.member_id) if issubclass(kind, _MEMBER_KEYS) else kind(key.group_id)
    raise DecodeError(f"unknown __consumer_offsets key version {version}")


def decode_offset_value(buf: bytes) -> Any:
    (version,) = _VERSION.unpack_from(buf)
    return OFFSET_COMMIT_VALUE.decode_from(buf, version, _VERSION.size)[0]


def decode_group_value(buf: bytes) -> Any:
    (version,) = _VERSION.unpack_from(buf)
    return GROUP_METADATA_VALUE.decode_from(buf, version, _VERSION.size)[0]


def subscribed_topics(subscription: bytes) -> list[str] | None:
    """The topics of a consumer-protocol subscription, or None when it cannot be read."""
    try:
        topics: list[str] = CONSUMER_SUBSCRIPTION.decode_from(subscription, 0, _VERSION.size)[0].topics
        return topics
    except (DecodeError, struct.error):
        return None
