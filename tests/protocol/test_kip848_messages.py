"""KIP-848 messages: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69), and ListGroups v5.

The reference folder (Kafka 3.9) has no JSON for 68 and 69, so their declarations are checked against apache/kafka's
own JSON at the mirror's HEAD (trunk, Oct 2024; skipped without the mirror), field by field at every version it
has: 68 v0-1, 69 v0. ConsumerGroupDescribe v1 is Kafka 4.0's (KIP-1099), newer than the mirror: v0 plus
`member_type` (int8, default -1) at the end of each member, checked as such and by bytes built by hand. Then round
trips with realistic values at every declared version, and bytes built by hand from the JSON: a nullable struct
(the heartbeat's assignment) is an int8 marker, -1 null or 1 followed by the struct.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import APIS, consumer_group_describe, consumer_group_heartbeat, list_groups
from epoch_broker.protocol.schema import Message
from epoch_broker.protocol.versions import VersionRange
from tests.protocol.test_acl_scram_messages import NO_TAGS, assert_round_trip, compact_string, int16, int32
from tests.protocol.test_conformance import NO_REFERENCE, FieldView, declared_view, reference_view
from tests.protocol.test_txn_messages import MIRROR, SCHEMA_DIR, git, schema_ref

HEARTBEAT_REQUEST, HEARTBEAT_RESPONSE = consumer_group_heartbeat.REQUEST, consumer_group_heartbeat.RESPONSE
DESCRIBE_REQUEST, DESCRIBE_RESPONSE = consumer_group_describe.REQUEST, consumer_group_describe.RESPONSE
# What the mirror (apache/kafka trunk, Oct 2024) has of each message; above it, Kafka 4.0's additions below.
MIRROR_VERSIONS = {
    "ConsumerGroupHeartbeatRequest": 1, "ConsumerGroupHeartbeatResponse": 1,
    "ConsumerGroupDescribeRequest": 0, "ConsumerGroupDescribeResponse": 0,
}
KAFKA_4_0_ADDITIONS = {
    ("ConsumerGroupDescribeRequest", 1): [],
    ("ConsumerGroupDescribeResponse", 1): ["groups.members.member_type"],
}

ORDERS = uuid.UUID("6d0f54c6-8a2b-4b52-9c36-0b6a1f8e2d11").bytes
PAYMENTS = uuid.UUID("0b9e3f7a-1c4d-4e8f-a2b3-c4d5e6f70819").bytes
GROUP = "checkout-service"


@functools.cache
def trunk_json(name: str) -> dict[str, Any]:
    """apache/kafka's message JSON at the mirror's HEAD (Kafka 3.9 has 68 at v0 only), without `//` lines."""
    if schema_ref() is None:
        pytest.skip(f"apache/kafka mirror not found at {MIRROR}")
    shown = git("show", f"HEAD:{SCHEMA_DIR}/{name}.json")
    assert shown.returncode == 0, shown.stderr
    return json.loads("\n".join(line for line in shown.stdout.splitlines() if not line.lstrip().startswith("//")))

MEMBER = "f3Kq9Zs1T0uV2wX4yA5bCg"  # librdkafka's own (KIP-1082): 22 characters of base64


def test_both_apis_are_registered_with_kafka_4_0_versions_and_flexible_from_v0() -> None:
    for key, module, name in ((68, consumer_group_heartbeat, "ConsumerGroupHeartbeat"),
                              (69, consumer_group_describe, "ConsumerGroupDescribe")):
        api = APIS[key]
        assert api is module.API and api.name == name and NO_REFERENCE[key] == name
        assert (api.versions.low, api.versions.high) == (0, 1)
        for version in (0, 1):
            assert api.request_header_version(version) == 2 and api.response_header_version(version) == 1


@pytest.mark.parametrize("message", [HEARTBEAT_REQUEST, HEARTBEAT_RESPONSE, DESCRIBE_REQUEST, DESCRIBE_RESPONSE],
                         ids=lambda m: m.name)
def test_declaration_matches_kafka_json(message: Message) -> None:
    spec = trunk_json(message.name)
    assert (spec["name"], spec["apiKey"], spec["type"]) == (message.name, message.api_key, message.kind)
    assert VersionRange.parse(spec["validVersions"]).high == MIRROR_VERSIONS[message.name]
    assert str(message.flexible) == str(VersionRange.parse(spec["flexibleVersions"]))
    common = {struct["name"]: struct["fields"] for struct in spec.get("commonStructs", [])}
    for version in range(message.versions.low, message.versions.high + 1):
        declared = declared_view(message, message.fields, message.cls, version)
        if version <= MIRROR_VERSIONS[message.name]:
            assert declared == reference_view(spec["fields"], version, common), version
            continue
        added = KAFKA_4_0_ADDITIONS[(message.name, version)]
        assert [v for v in declared if v.path not in added] == reference_view(spec["fields"], version - 1, common)


def test_describe_v1_adds_member_type_last_in_each_member_with_default_minus_one() -> None:
    views = {v.path: v for v in declared_view(DESCRIBE_RESPONSE, DESCRIBE_RESPONSE.fields, DESCRIBE_RESPONSE.cls, 1)}
    member_fields = [p for p in views if p.startswith("groups.members.") and p.count(".") == 2]
    assert member_fields[-1] == "groups.members.member_type"
    assert views["groups.members.member_type"] == FieldView(
        path="groups.members.member_type", type="int8", versions="1+", nullable="none", nullable_here=False,
        tag=None, tagged="none", tagged_here=False, flexible=None, default=-1)


# -- realistic values ---------------------------------------------------------------------------------------


def heartbeat_join(version: int) -> Any:
    return HEARTBEAT_REQUEST.cls(
        group_id=GROUP, member_id=MEMBER, member_epoch=0, instance_id="checkout-1", rack_id="eu-west-1a",
        rebalance_timeout_ms=300_000, subscribed_topic_names=["orders", "payments"],
        subscribed_topic_regex="^payments-.*" if version >= 1 else None, server_assignor="uniform",
        topic_partitions=[])


def heartbeat_steady(version: int) -> Any:
    """Nothing changed since the last heartbeat: every optional field null, owned partitions listed."""
    return HEARTBEAT_REQUEST.cls(group_id=GROUP, member_id=MEMBER, member_epoch=7, topic_partitions=[
        HEARTBEAT_REQUEST.TopicPartitions(topic_id=ORDERS, partitions=[0, 2, 4])])


def heartbeat_leave(version: int) -> Any:
    return HEARTBEAT_REQUEST.cls(group_id=GROUP, member_id=MEMBER, member_epoch=-1)


def heartbeat_assignment(version: int) -> Any:
    response = HEARTBEAT_RESPONSE
    return response.cls(member_id=MEMBER, member_epoch=8, heartbeat_interval_ms=5000, assignment=response.Assignment(
        topic_partitions=[response.TopicPartitions(topic_id=ORDERS, partitions=[0, 2]),
                          response.TopicPartitions(topic_id=PAYMENTS, partitions=[1])]))


def heartbeat_fenced(version: int) -> Any:
    return HEARTBEAT_RESPONSE.cls(error_code=ErrorCode.FENCED_MEMBER_EPOCH, member_epoch=-1,
                                  error_message="The consumer group member has a smaller member epoch (6)")


def describe_request(version: int) -> Any:
    return DESCRIBE_REQUEST.cls(group_ids=[GROUP, "reporting"], include_authorized_operations=True)


def describe_response(version: int) -> Any:
    r = DESCRIBE_RESPONSE

    def assignment(*topics: tuple[bytes, str, list[int]]) -> Any:
        return r.Assignment(topic_partitions=[r.TopicPartitions(topic_id=i, topic_name=n, partitions=p)
                                              for i, n, p in topics])

    member = r.Member(member_id=MEMBER, instance_id="checkout-1", rack_id=None, member_epoch=8, client_id="checkout",
                      client_host="/10.0.4.17", subscribed_topic_names=["orders"], subscribed_topic_regex="^pay.*",
                      assignment=assignment((ORDERS, "orders", [0, 2])),
                      target_assignment=assignment((ORDERS, "orders", [0]), (PAYMENTS, "payments-eu", [1])),
                      member_type=1 if version >= 1 else -1)
    return r.cls(throttle_time_ms=0, groups=[
        r.DescribedGroup(group_id=GROUP, group_state="Reconciling", group_epoch=9, assignment_epoch=9,
                         assignor_name="uniform", members=[member], authorized_operations=0b1_0000_1000),
        r.DescribedGroup(error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message="Group reporting not found.",
                         group_id="reporting"),
    ])


SAMPLES: list[tuple[str, Message, Callable[[int], Any]]] = [
    ("heartbeat-join", HEARTBEAT_REQUEST, heartbeat_join),
    ("heartbeat-steady", HEARTBEAT_REQUEST, heartbeat_steady),
    ("heartbeat-leave", HEARTBEAT_REQUEST, heartbeat_leave),
    ("heartbeat-assignment", HEARTBEAT_RESPONSE, heartbeat_assignment),
    ("heartbeat-fenced", HEARTBEAT_RESPONSE, heartbeat_fenced),
    ("describe-request", DESCRIBE_REQUEST, describe_request),
    ("describe-response", DESCRIBE_RESPONSE, describe_response),
]


@pytest.mark.parametrize(("message", "build", "version"), [
    pytest.param(message, build, version, id=f"{name}-v{version}")
    for name, message, build in SAMPLES for version in (0, 1)])
def test_realistic_messages_round_trip(message: Message, build: Callable[[int], Any], version: int) -> None:
    assert_round_trip(message, build(version), version)


# -- bytes built by hand from the JSON ----------------------------------------------------------------------


def test_heartbeat_v1_join_request_matches_bytes_built_by_hand() -> None:
    body = (
        compact_string(GROUP) + compact_string(MEMBER) + int32(0)
        + compact_string("checkout-1") + compact_string("eu-west-1a") + int32(300_000)
        + b"\x03" + compact_string("orders") + compact_string("payments")  # SubscribedTopicNames: 2 names
        + compact_string("^payments-.*")  # SubscribedTopicRegex (v1+)
        + compact_string("uniform")
        + b"\x01"  # TopicPartitions: empty, not null
        + NO_TAGS
    )
    assert HEARTBEAT_REQUEST.encode(heartbeat_join(1), 1) == body
    # v0 has no regex
    assert HEARTBEAT_REQUEST.encode(heartbeat_join(0), 0) == body.replace(compact_string("^payments-.*"), b"")


def test_heartbeat_request_nulls_are_compact_nulls() -> None:
    body = compact_string(GROUP) + compact_string(MEMBER) + int32(-1) + b"\x00\x00" + int32(-1) + b"\x00" * 4
    assert HEARTBEAT_REQUEST.encode(heartbeat_leave(1), 1) == body + NO_TAGS
    assert HEARTBEAT_REQUEST.decode(body + NO_TAGS, 1) == heartbeat_leave(1)


def test_heartbeat_response_assignment_is_a_nullable_struct() -> None:
    head = int32(0) + int16(0) + b"\x00" + compact_string(MEMBER) + int32(8) + int32(5000)
    topics = (b"\x03" + ORDERS + b"\x03" + int32(0) + int32(2) + NO_TAGS
              + PAYMENTS + b"\x02" + int32(1) + NO_TAGS)
    present = head + b"\x01" + topics + NO_TAGS + NO_TAGS  # marker 1, the struct (its tags), then the top tags
    assert HEARTBEAT_RESPONSE.encode(heartbeat_assignment(1), 1) == present
    assert HEARTBEAT_RESPONSE.decode(present, 0) == heartbeat_assignment(0)
    unchanged = HEARTBEAT_RESPONSE.cls(member_id=MEMBER, member_epoch=8, heartbeat_interval_ms=5000)
    assert HEARTBEAT_RESPONSE.encode(unchanged, 1) == head + b"\xff" + NO_TAGS  # marker -1: no assignment
    assert HEARTBEAT_RESPONSE.decode(head + b"\xff" + NO_TAGS, 1).assignment is None


def test_describe_v1_member_type_follows_the_target_assignment() -> None:
    r = DESCRIBE_RESPONSE
    member = r.Member(member_id="m", client_id="c", client_host="/h", member_epoch=3, member_type=1)
    group = r.cls(groups=[r.DescribedGroup(group_id="g", group_state="Stable", members=[member])])
    member_v0 = (
        compact_string("m") + b"\x00\x00" + int32(3) + compact_string("c") + compact_string("/h")
        + b"\x01" + b"\x00"  # no subscribed names, null regex
        + b"\x01" + NO_TAGS + b"\x01" + NO_TAGS  # empty assignment, empty target assignment
    )
    head = int32(0) + b"\x02" + int16(0) + b"\x00" + compact_string("g") + compact_string("Stable") + int32(0) * 2
    head += compact_string("") + b"\x02"  # assignor name, one member
    tail = int32(-(2**31)) + NO_TAGS + NO_TAGS  # authorized operations, the group's tags, the top tags
    assert r.encode(group, 0) == head + member_v0 + NO_TAGS + tail
    assert r.encode(group, 1) == head + member_v0 + b"\x01" + NO_TAGS + tail
    assert r.decode(r.encode(group, 0), 0).groups[0].members[0].member_type == -1


# -- ListGroups v5 ------------------------------------------------------------------------------------------


def test_list_groups_v5_carries_the_types_filter_and_each_group_type() -> None:
    request = list_groups.REQUEST.cls(states_filter=["Stable"], types_filter=["consumer"])
    body = b"\x02" + compact_string("Stable") + b"\x02" + compact_string("consumer") + NO_TAGS
    assert list_groups.REQUEST.encode(request, 5) == body
    assert list_groups.REQUEST.encode(request, 4) == b"\x02" + compact_string("Stable") + NO_TAGS
    listed = list_groups.RESPONSE.ListedGroup(group_id="g", protocol_type="consumer", group_state="Stable",
                                              group_type="classic")
    response = list_groups.RESPONSE.cls(groups=[listed])
    group = compact_string("g") + compact_string("consumer") + compact_string("Stable")
    assert list_groups.RESPONSE.encode(response, 5) == (
        int32(0) + int16(0) + b"\x02" + group + compact_string("classic") + NO_TAGS + NO_TAGS)
    assert list_groups.RESPONSE.decode(list_groups.RESPONSE.encode(response, 4), 4).groups[0].group_type == ""
