"""Share groups (KIP-932) as records and assignment: `broker/groups/share_group.py`.

- The assignment shares a partition among members only when there are more members than partitions, and
  otherwise spreads the partitions over the members, per topic, among that topic's subscribers.
- Every record survives its `__consumer_offsets` encoding, tombstones included, and replaying them rebuilds the
  group a coordinator had.
"""

from __future__ import annotations

import pytest

from epoch_broker.broker.groups import records
from epoch_broker.broker.groups.share_group import (
    ShareCurrentAssignmentRecord,
    ShareGroup,
    ShareGroupEpochRecord,
    ShareGroupRecord,
    ShareMemberAssignment,
    ShareMemberMetadataRecord,
    ShareMemberSubscription,
    ShareTargetAssignmentEpochRecord,
    ShareTargetAssignmentMemberRecord,
    decode_record,
    encode_record,
    member_removal_records,
    share_assignment,
)
from epoch_broker.protocol.errors import ErrorCode

T1, T2 = b"\x01" * 16, b"\x02" * 16


@pytest.mark.parametrize(("members", "partitions", "expected"), [
    # three members on one partition: all share it
    ({"a": {T1}, "b": {T1}, "c": {T1}}, {T1: 1}, {"a": {T1: {0}}, "b": {T1: {0}}, "c": {T1: {0}}}),
    # fewer members than partitions: each partition to one member, round-robin in member id order
    ({"a": {T1}, "b": {T1}}, {T1: 5}, {"a": {T1: {0, 2, 4}}, "b": {T1: {1, 3}}}),
    # more members than partitions: every member gets one, partitions shared
    ({"a": {T1}, "b": {T1}, "c": {T1}}, {T1: 2}, {"a": {T1: {0}}, "b": {T1: {1}}, "c": {T1: {0}}}),
    # per topic, among that topic's subscribers only
    ({"a": {T1, T2}, "b": {T2}}, {T1: 2, T2: 1}, {"a": {T1: {0, 1}, T2: {0}}, "b": {T2: {0}}}),
    # a member subscribed to nothing that exists gets nothing
    ({"a": set(), "b": {T1}}, {T1: 1}, {"a": {}, "b": {T1: {0}}}),
])
def test_the_share_assignment(members: dict[str, set[bytes]], partitions: dict[bytes, int],
                              expected: dict[str, dict[bytes, set[int]]]) -> None:
    assigned = share_assignment({m: frozenset(t) for m, t in members.items()}, partitions)
    assert {m: {t: set(p) for t, p in a.items()} for m, a in assigned.items()} == expected


RECORDS: list[ShareGroupRecord] = [
    ShareGroupEpochRecord("g", 3),
    ShareGroupEpochRecord("g", None),
    ShareMemberMetadataRecord("g", "m1", ShareMemberSubscription("rack-a", "client", "/127.0.0.1", ("t1", "t2"))),
    ShareMemberMetadataRecord("g", "m1", ShareMemberSubscription(None, "", "", ())),
    ShareMemberMetadataRecord("g", "m1", None),
    ShareTargetAssignmentEpochRecord("g", 3),
    ShareTargetAssignmentEpochRecord("g", None),
    ShareTargetAssignmentMemberRecord("g", "m1", {T1: frozenset({0, 2}), T2: frozenset({1})}),
    ShareTargetAssignmentMemberRecord("g", "m1", None),
    ShareCurrentAssignmentRecord("g", "m1", ShareMemberAssignment(3, 2, {T1: frozenset({0})})),
    ShareCurrentAssignmentRecord("g", "m1", None),
]


@pytest.mark.parametrize("record", RECORDS, ids=repr)
def test_every_record_round_trips_through_its_consumer_offsets_entry(record: ShareGroupRecord) -> None:
    key, value = encode_record(record)
    decoded_key = records.decode_key(key)
    assert isinstance(decoded_key, records.SHARE_GROUP_KEYS)
    assert decode_record(decoded_key, value) == record


def test_replaying_the_records_rebuilds_the_group() -> None:
    subscription = ShareMemberSubscription(client_id="c", subscribed_topic_names=("t1",))
    written: list[ShareGroupRecord] = [
        ShareMemberMetadataRecord("g", "m1", subscription), ShareMemberMetadataRecord("g", "m2", subscription),
        ShareGroupEpochRecord("g", 2), ShareTargetAssignmentMemberRecord("g", "m1", {T1: frozenset({0})}),
        ShareTargetAssignmentMemberRecord("g", "m2", {T1: frozenset({0})}), ShareTargetAssignmentEpochRecord("g", 2),
        ShareCurrentAssignmentRecord("g", "m1", ShareMemberAssignment(2, 0, {T1: frozenset({0})})),
        *member_removal_records("g", "m2"),
    ]
    group = ShareGroup("g", 0)
    for record in written:
        key, value = encode_record(record)
        decoded = records.decode_key(key)
        assert isinstance(decoded, records.SHARE_GROUP_KEYS)
        group.replay(decode_record(decoded, value), now_ms=1)
    assert (group.group_epoch, group.assignment_epoch, set(group.members)) == (2, 2, {"m1"})
    assert group.members["m1"].assignment == ShareMemberAssignment(2, 0, {T1: frozenset({0})})
    assert group.target_assignment == {"m1": {T1: frozenset({0})}}
    assert (group.state_name, group.type, group.protocol_type) == ("Stable", "share", "share")
    # share groups keep no committed offsets, and are deleted only when empty
    assert group.validate_offset_commit("m1", None, 2, 9) is ErrorCode.GROUP_ID_NOT_FOUND
    assert group.validate_offset_fetch("m1", 2) is ErrorCode.GROUP_ID_NOT_FOUND
    assert group.validate_delete_group() is ErrorCode.NON_EMPTY_GROUP
    for record in member_removal_records("g", "m1"):
        group.replay(record, now_ms=2)
    assert (group.state_name, group.validate_delete_group(), group.state_timestamp) == ("Empty", ErrorCode.NONE, 2)
    assert [records.decode_key(key) for key, _ in group.tombstone_records()] == [
        records.ShareGroupTargetAssignmentMetadataKey("g"), records.ShareGroupMetadataKey("g")]
