"""The records of `__transaction_state`, in Kafka's own formats (TransactionLogKey / TransactionLogValue JSON), so
the topic reads like Apache Kafka's.

    key   v0  TransactionLogKey    transactional_id string
    value v0  TransactionLogValue  producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
                                   transaction_status int8, transaction_partitions[]? (topic, partition_ids[]),
                                   transaction_last_update_timestamp_ms int64, transaction_start_timestamp_ms int64

Each starts with its int16 version. We write v0 and read v0 (v1, flexible, is Kafka 4's). A null value is a
tombstone (the transactional id expired). Sans-IO: bytes in, values out.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Any

from epoch_broker.protocol.schema import DecodeError, Field, Message

_VERSION = struct.Struct(">h")
KEY_VERSION = 0
VALUE_VERSION = 0


class TxnState(IntEnum):
    """Kafka's TransactionState ids, as stored in `transaction_status`."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """As DescribeTransactions and ListTransactions name it."""
        return "".join(word.capitalize() for word in self.name.split("_"))


TRANSACTION_LOG_KEY = Message(
    "TransactionLogKey", kind="data", versions="0", flexible="none",
    fields=[Field("transactional_id", "string", "0")],
)

TRANSACTION_LOG_VALUE = Message(
    "TransactionLogValue", kind="data", versions="0", flexible="none",
    fields=[
        Field("producer_id", "int64", "0+"),
        Field("producer_epoch", "int16", "0+"),
        Field("transaction_timeout_ms", "int32", "0+"),
        Field("transaction_status", "int8", "0+"),
        Field("transaction_partitions", "[]PartitionsSchema", "0+", nullable="0+", fields=[
            Field("topic", "string", "0+"),
            Field("partition_ids", "[]int32", "0+"),
        ]),
        Field("transaction_last_update_timestamp_ms", "int64", "0+"),
        Field("transaction_start_timestamp_ms", "int64", "0+"),
    ],
)


def txn_key(transactional_id: str) -> bytes:
    key = TRANSACTION_LOG_KEY.cls(transactional_id=transactional_id)
    return _VERSION.pack(KEY_VERSION) + TRANSACTION_LOG_KEY.encode(key, KEY_VERSION)


def txn_value(producer_id: int, producer_epoch: int, timeout_ms: int, state: TxnState,
              partitions: set[tuple[str, int]], last_update_ms: int, start_ms: int) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(partitions):
        by_topic.setdefault(topic, []).append(index)
    schema = TRANSACTION_LOG_VALUE.PartitionsSchema
    value = TRANSACTION_LOG_VALUE.cls(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_timeout_ms=timeout_ms,
        transaction_status=int(state),
        transaction_partitions=[schema(topic=t, partition_ids=p) for t, p in by_topic.items()],
        transaction_last_update_timestamp_ms=last_update_ms, transaction_start_timestamp_ms=start_ms)
    return _VERSION.pack(VALUE_VERSION) + TRANSACTION_LOG_VALUE.encode(value, VALUE_VERSION)


def decode_key(buf: bytes) -> str:
    (version,) = _VERSION.unpack_from(buf)
    if version != KEY_VERSION:
        raise DecodeError(f"unknown __transaction_state key version {version}")
    return TRANSACTION_LOG_KEY.decode_from(buf, version, _VERSION.size)[0].transactional_id


def decode_value(buf: bytes) -> Any:
    (version,) = _VERSION.unpack_from(buf)
    if version != VALUE_VERSION:
        raise DecodeError(f"unknown __transaction_state value version {version}")
    return TRANSACTION_LOG_VALUE.decode_from(buf, version, _VERSION.size)[0]


def partitions_of(value: Any) -> set[tuple[str, int]]:
    return {(p.topic, index) for p in value.transaction_partitions or () for index in p.partition_ids}
