"""The records of `__consumer_offsets`, in Kafka's own formats, so the topic reads like Apache Kafka's.

Every record key and value starts with an int16 version, then the struct of that version (Kafka's
OffsetCommitKey/Value and GroupMetadataKey/Value JSON, declared below with the protocol DSL):

    key v0-1  OffsetCommitKey     group string, topic string, partition int32
    key v2    GroupMetadataKey    group string
    value     OffsetCommitValue   v0: offset int64, metadata string, commit_timestamp int64
                                  v1: + expire_timestamp int64 (dropped again in v2)
                                  v3: offset int64, leader_epoch int32, metadata string, commit_timestamp int64
    value     GroupMetadataValue  protocol_type, generation, protocol?, leader?, current_state_timestamp (v2+),
                                  members[]: member_id, group_instance_id? (v3+), client_id, client_host,
                                  rebalance_timeout (v1+), session_timeout, subscription, assignment

Rules:
- We write offset keys v1, offset values v3 (with the committed leader epoch, KIP-320), group keys v2 and
  group values v3; we read every version up to those (v4, flexible, is Kafka 3.x+ and not written here).
- A null value is a tombstone: the offset or the group is deleted, and compaction may drop the key.
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


def decode_key(buf: bytes) -> OffsetKey | GroupKey:
    (version,) = _VERSION.unpack_from(buf)
    if version in (0, 1):
        key = OFFSET_COMMIT_KEY.decode_from(buf, version, _VERSION.size)[0]
        return OffsetKey(key.group, key.topic, key.partition)
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupKey(GROUP_METADATA_KEY.decode_from(buf, version, _VERSION.size)[0].group)
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
        return CONSUMER_SUBSCRIPTION.decode_from(subscription, 0, _VERSION.size)[0].topics
    except (DecodeError, struct.error):
        return None
