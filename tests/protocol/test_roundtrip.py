"""Round trips over every declared (API, version), request and response, plus hand-built bytes for key fields.

The generated samples put a non-default value in every field present at the version (arrays hold two
elements, tagged fields are set so they are written), in three variants: plain values, nullable fields set
to null, and empty strings/arrays/bytes. encode -> decode -> encode must give equal bytes and equal objects,
and decoding must consume the whole body. The hand-written cases pin exact bytes for the fields the
leader-epoch protocol depends on.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterator
from typing import Any

import pytest

from epoch_broker.protocol.messages import APIS, api_versions, fetch, metadata, offset_commit
from epoch_broker.protocol.schema import Field, Message

VARIANTS = ("values", "nulls", "empties")


def scalar(kafka_type: str, i: int, variant: str) -> Any:
    """A value of `kafka_type` that varies with `i` (so elements and fields differ from each other)."""
    if variant == "empties" and kafka_type in ("string", "bytes", "records"):
        return "" if kafka_type == "string" else b""
    return {
        "bool": True,
        "int8": 1 + i % 100,
        "int16": 1000 + i,
        "uint16": 40000 + i,  # above int16's range: the codec must treat it as unsigned
        "int32": 70000 + i,
        "int64": (1 << 40) + i,
        "float64": i + 0.5,
        "string": f"s{i}-é",  # two-byte UTF-8 character: lengths count bytes, not characters
        "bytes": bytes([i % 256, 0, 255]),
        "records": bytes([0x52, i % 256]) * 4,
        "uuid": bytes((i + k) % 256 for k in range(16)),
    }[kafka_type]


def sample(message: Message, fields: list[Field], owner: type, version: int, variant: str,
           counter: Iterator[int]) -> Any:
    """An instance of `owner` with every field present at `version` set (defaults elsewhere)."""
    defaults = owner()
    values = {}
    for field in fields:
        if version not in field.versions:
            continue
        if variant == "nulls" and version in field.nullable:
            values[field.name] = None
        elif field.is_struct:
            nested_owner = message.types[field.element_type]
            nested = [sample(message, field.fields or [], nested_owner, version, variant, counter)
                      for _ in range(2 if field.is_array else 1)]
            values[field.name] = nested if field.is_array else nested[0]
            if field.is_array and variant == "empties":
                values[field.name] = []
        elif field.is_array:
            count = 0 if variant == "empties" else 2
            values[field.name] = [scalar(field.element_type, next(counter), variant) for _ in range(count)]
        else:
            value = scalar(field.type, next(counter), variant)
            if field.type == "bool":
                value = not getattr(defaults, field.name)
            values[field.name] = value
    return owner(**values)


def cases() -> list[Any]:
    params = []
    for _, api in sorted(APIS.items()):
        for message in (api.request, api.response):
            for version in range(message.versions.low, message.versions.high + 1):
                for variant in VARIANTS:
                    params.append(pytest.param(message, version, variant, id=f"{message.name}-v{version}-{variant}"))
    return params


@pytest.mark.parametrize(("message", "version", "variant"), cases())
def test_encode_decode_encode_is_stable(message: Message, version: int, variant: str) -> None:
    original = sample(message, message.fields, message.cls, version, variant, itertools.count(1))
    encoded = message.encode(original, version)
    decoded, end = message.decode_from(encoded, version)
    assert end == len(encoded)
    assert decoded == original
    assert message.encode(decoded, version) == encoded


def test_samples_set_every_field_to_a_non_default_value() -> None:
    # Guards the generator above: a field it forgot would round-trip trivially as its default.
    request = fetch.REQUEST
    obj = sample(request, request.fields, request.cls, 15, "values", itertools.count(1))
    defaults = request.cls()
    present = [f.name for f in request.fields if 15 in f.versions]
    assert all(getattr(obj, name) != getattr(defaults, name) for name in present)
    partition = obj.topics[0].partitions[0]
    assert partition.current_leader_epoch != -1 and partition.last_fetched_epoch != -1


# -- hand-built bytes ---------------------------------------------------------------------------------------


def compact_string(text: str) -> bytes:
    data = text.encode()
    return bytes([len(data) + 1]) + data


def classic_string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def test_fetch_v12_request_carries_current_and_last_fetched_epoch() -> None:
    partition = struct.pack(">iiqiqi", 0, 5, 100, 4, -1, 1 << 20) + b"\x00"
    topic = compact_string("orders") + b"\x02" + partition + b"\x00"
    body = (
        struct.pack(">iiiibii", -1, 500, 1, 50 << 20, 0, 0, -1)
        + b"\x02" + topic  # one topic
        + b"\x01"  # forgotten_topics_data: empty
        + compact_string("rack-a")
        + b"\x00"  # no tagged fields: cluster_id stays null
    )
    request = fetch.REQUEST.decode(body, 12)
    assert (request.replica_id, request.max_wait_ms, request.min_bytes, request.max_bytes) == (-1, 500, 1, 50 << 20)
    assert (request.session_id, request.session_epoch, request.rack_id, request.cluster_id) == (0, -1, "rack-a", None)
    (part,) = request.topics[0].partitions
    assert request.topics[0].topic == "orders"
    assert (part.partition, part.current_leader_epoch, part.fetch_offset, part.last_fetched_epoch) == (0, 5, 100, 4)
    assert (part.log_start_offset, part.partition_max_bytes) == (-1, 1 << 20)
    assert fetch.REQUEST.encode(request, 12) == body


def test_fetch_v12_response_carries_the_tagged_diverging_epoch() -> None:
    diverging = struct.pack(">iq", 3, 42) + b"\x00"
    partition = (
        struct.pack(">ihqqq", 1, 0, 50, 50, 0)
        + b"\x00"  # aborted_transactions: null
        + struct.pack(">i", -1)  # preferred_read_replica
        + b"\x01"  # records: empty
        + b"\x01" + b"\x00" + bytes([len(diverging)]) + diverging  # one tagged field: tag 0 = diverging_epoch
    )
    body = struct.pack(">ihi", 0, 0, 7) + b"\x02" + compact_string("orders") + b"\x02" + partition + b"\x00\x00"
    response = fetch.RESPONSE.decode(body, 12)
    (part,) = response.responses[0].partitions
    assert (part.partition_index, part.high_watermark, part.aborted_transactions, bytes(part.records)) == (
        1, 50, None, b""
    )
    assert (part.diverging_epoch.epoch, part.diverging_epoch.end_offset) == (3, 42)
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (-1, -1)  # absent: default
    assert fetch.RESPONSE.encode(response, 12) == body

    # A partition without divergence writes no tag at all.
    part.diverging_epoch = fetch.RESPONSE.EpochEndOffset()
    assert fetch.RESPONSE.encode(response, 12).count(diverging) == 0


@pytest.mark.parametrize("version", [9, 10, 11, 12])
def test_metadata_response_v9_plus_carries_the_partition_leader_epoch(version: int) -> None:
    topic_id = bytes(range(16))
    broker = struct.pack(">i", 1) + compact_string("localhost") + struct.pack(">i", 9092) + b"\x00" + b"\x00"
    partition = (
        struct.pack(">hiii", 0, 0, 1, 7)  # error, index, leader 1, leader epoch 7
        + b"\x02" + struct.pack(">i", 1)  # replica_nodes [1]
        + b"\x02" + struct.pack(">i", 1)  # isr_nodes [1]
        + b"\x01"  # offline_replicas []
        + b"\x00"
    )
    topic = (
        struct.pack(">h", 0) + compact_string("orders")
        + (topic_id if version >= 10 else b"")
        + b"\x00"  # is_internal
        + b"\x02" + partition
        + struct.pack(">i", -(1 << 31))  # topic_authorized_operations: not requested
        + b"\x00"
    )
    body = (
        struct.pack(">i", 0) + b"\x02" + broker
        + compact_string("cluster") + struct.pack(">i", 1)
        + b"\x02" + topic
        + (struct.pack(">i", -(1 << 31)) if version <= 10 else b"")
        + b"\x00"
    )
    response = metadata.RESPONSE.decode(body, version)
    (topic_obj,) = response.topics
    (part,) = topic_obj.partitions
    assert (part.leader_id, part.leader_epoch, part.replica_nodes, part.isr_nodes) == (1, 7, [1], [1])
    assert topic_obj.topic_id == (topic_id if version >= 10 else bytes(16))
    assert response.cluster_authorized_operations == -(1 << 31)
    assert metadata.RESPONSE.encode(response, version) == body


def test_offset_commit_v6_request_carries_the_committed_leader_epoch() -> None:
    partition = struct.pack(">iqi", 2, 1234, 9) + classic_string("meta")
    body = (
        classic_string("group") + struct.pack(">i", 3) + classic_string("member-1")
        + struct.pack(">i", 1) + classic_string("orders") + struct.pack(">i", 1) + partition
    )
    request = offset_commit.REQUEST.decode(body, 6)
    assert (request.group_id, request.generation_id_or_member_epoch, request.member_id) == ("group", 3, "member-1")
    (part,) = request.topics[0].partitions
    assert (part.partition_index, part.committed_offset, part.committed_leader_epoch) == (2, 1234, 9)
    assert part.committed_metadata == "meta"
    assert request.retention_time_ms == -1  # v2-4 only
    assert offset_commit.REQUEST.encode(request, 6) == body


def test_api_versions_v3_request_body_after_the_header() -> None:
    body = compact_string("librdkafka") + compact_string("2.16.0") + b"\x00"
    request = api_versions.REQUEST.decode(body, 3)
    assert (request.client_software_name, request.client_software_version) == ("librdkafka", "2.16.0")
    assert api_versions.REQUEST.encode(request, 3) == body
    # v0-2 bodies are empty: the request is all header.
    assert api_versions.REQUEST.encode(api_versions.REQUEST.cls(), 2) == b""


def test_unknown_tagged_fields_are_skipped_and_written_back() -> None:
    body = compact_string("kcat") + compact_string("1.7.1") + b"\x02" + b"\x05\x02hi" + b"\x09\x00"
    request = api_versions.REQUEST.decode(body, 3)
    assert request.client_software_name == "kcat"
    assert api_versions.REQUEST.encode(request, 3) == body


@pytest.mark.parametrize("version", [7, 9])
def test_null_and_empty_strings_differ_in_classic_and_compact_encodings(version: int) -> None:
    message = offset_commit.REQUEST
    null, empty = (message.cls(group_instance_id=value) for value in (None, ""))
    assert message.encode(null, version) != message.encode(empty, version)
    assert message.decode(message.encode(null, version), version).group_instance_id is None
    assert message.decode(message.encode(empty, version), version).group_instance_id == ""


def test_a_nullable_array_defaulting_to_null_keeps_the_value_given() -> None:
    from epoch_broker.protocol.messages import alter_partition_reassignments

    partition = alter_partition_reassignments.REQUEST.ReassignablePartition
    assert partition(partition_index=0).replicas is None  # null: cancel a reassignment
    assert partition(partition_index=0, replicas=[0, 1, 3]).replicas == [0, 1, 3]
