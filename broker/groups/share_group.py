"""One share group (KIP-932): members, epochs and their assignments; the records of its membership.

A share group is the third group type beside classic and consumer groups. Its members heartbeat with
ShareGroupHeartbeat as KIP-848 members do, and the coordinator assigns them partitions, but a partition may be
assigned to several members at once: the records of a partition are shared out by its leader (ShareFetch, the
share-partitions of `broker/replica/share_partition.py`), not by the assignment. So there is no revocation: a
member's assignment is its target as soon as it is computed (Kafka's ShareGroupAssignmentBuilder).

State is changed only by replaying records (`ShareGroup.replay`), the records the coordinator appends to
`__consumer_offsets` (Kafka's ShareGroup*Record types, encoded in `records.py`), as `consumer_group.py` does.

    group epoch        moves on a membership or subscription change, or when the subscribed topics change
    assignment epoch   the group epoch the target assignment was computed for
    member epoch       the assignment epoch of the member's current assignment

States (Kafka's ShareGroupState): Empty (no members), Stable; Dead once deleted.

Rules:
- Share groups keep no committed offsets: OffsetCommit, OffsetFetch and OffsetDelete on a share group's id are
  GROUP_ID_NOT_FOUND, as Kafka answers (the share-partitions' start offsets are the group's progress).
- Pure bookkeeping: timers, persistence and the heartbeat's decisions live in `share_protocol.py`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from epoch_broker.broker.groups import records
from epoch_broker.broker.groups.consumer_group import (
    EMPTY_ASSIGNMENT,
    Assignment,
    TopicMetadata,
    assignment_of,
    topic_partitions_of,
)
from epoch_broker.broker.groups.current_assignment_builder import MemberState
from epoch_broker.protocol.errors import ErrorCode

LEAVE_GROUP_MEMBER_EPOCH = -1


class ShareGroupState(StrEnum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ShareMemberSubscription:
    """What a member told the coordinator about itself (Kafka's ShareGroupMemberMetadataValue)."""

    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareMemberAssignment:
    """A member's current assignment (Kafka's ShareGroupCurrentMemberAssignmentValue)."""

    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = field(default_factory=dict)


@dataclass(eq=False, slots=True)
class ShareGroupMember:
    member_id: str
    subscription: ShareMemberSubscription = ShareMemberSubscription()
    assignment: ShareMemberAssignment = ShareMemberAssignment()
    session_timer: asyncio.TimerHandle | None = None

    @property
    def member_epoch(self) -> int:
        return self.assignment.member_epoch

    def cancel_timers(self) -> None:
        if self.session_timer is not None:
            self.session_timer.cancel()
            self.session_timer = None


# -- the records (keys and values of Kafka's ShareGroup*Record types; value None = tombstone) ---------------------

@dataclass(frozen=True, slots=True)
class ShareGroupEpochRecord:  # ShareGroupMetadataKey/Value
    group_id: str
    epoch: int | None


@dataclass(frozen=True, slots=True)
class ShareMemberMetadataRecord:  # ShareGroupMemberMetadataKey/Value
    group_id: str
    member_id: str
    subscription: ShareMemberSubscription | None


@dataclass(frozen=True, slots=True)
class ShareTargetAssignmentEpochRecord:  # ShareGroupTargetAssignmentMetadataKey/Value
    group_id: str
    epoch: int | None


@dataclass(frozen=True, slots=True)
class ShareTargetAssignmentMemberRecord:  # ShareGroupTargetAssignmentMemberKey/Value
    group_id: str
    member_id: str
    partitions: Assignment | None


@dataclass(frozen=True, slots=True)
class ShareCurrentAssignmentRecord:  # ShareGroupCurrentMemberAssignmentKey/Value
    group_id: str
    member_id: str
    assignment: ShareMemberAssignment | None


ShareGroupRecord = (ShareGroupEpochRecord | ShareMemberMetadataRecord | ShareTargetAssignmentEpochRecord
                    | ShareTargetAssignmentMemberRecord | ShareCurrentAssignmentRecord)


def member_removal_records(group_id: str, member_id: str) -> list[ShareGroupRecord]:
    """Kafka's removeMember: current assignment, target assignment and member metadata tombstones, in that order."""
    return [ShareCurrentAssignmentRecord(group_id, member_id, None),
            ShareTargetAssignmentMemberRecord(group_id, member_id, None),
            ShareMemberMetadataRecord(group_id, member_id, None)]


@dataclass(eq=False)
class ShareGroup:
    group_id: str
    partition: int  # of __consumer_offsets
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    target_assignment: dict[str, Assignment] = field(default_factory=dict)  # member id -> partitions
    # The subscribed topics that exist: computed, never persisted (Kafka 4.1 dropped its record), so a loaded group
    # recomputes it at the next heartbeat (`metadata_refresh`), as it does after a topic change.
    subscription_metadata: dict[str, TopicMetadata] = field(default_factory=dict)
    metadata_refresh: bool = False
    dead: bool = False
    state_timestamp: int = -1

    type = "share"

    # -- the Group interface --------------------------------------------------------------------------------

    @property
    def state(self) -> ShareGroupState:
        if self.dead:
            return ShareGroupState.DEAD
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    @property
    def state_name(self) -> str:
        return self.state.value

    @property
    def protocol_type(self) -> str:
        return "share"

    def num_members(self) -> int:
        return len(self.members)

    def is_empty(self) -> bool:
        return not self.members

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscription_metadata

    def validate_offset_commit(self, member_id: str, group_instance_id: str | None, member_epoch: int,
                               api_version: int, transactional: bool = False) -> ErrorCode:
        return ErrorCode.GROUP_ID_NOT_FOUND

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        return ErrorCode.GROUP_ID_NOT_FOUND

    def validate_offset_delete(self) -> ErrorCode:
        return ErrorCode.GROUP_ID_NOT_FOUND

    def validate_delete_group(self) -> ErrorCode:
        if self.dead:
            return ErrorCode.GROUP_ID_NOT_FOUND
        return ErrorCode.NONE if not self.members else ErrorCode.NON_EMPTY_GROUP

    def offset_expiration_condition(self) -> Callable[[int], int] | None:
        return None

    def tombstone_records(self) -> list[tuple[bytes, bytes | None]]:
        decided: list[ShareGroupRecord] = []
        for member_id in self.members:
            decided += member_removal_records(self.group_id, member_id)
        decided += [ShareTargetAssignmentEpochRecord(self.group_id, None), ShareGroupEpochRecord(self.group_id, None)]
        return [encode_record(record) for record in decided]

    def set_dead(self, dead: bool, now_ms: int) -> None:
        self.dead = dead

    def target_of(self, member_id: str) -> Assignment:
        return self.target_assignment.get(member_id, EMPTY_ASSIGNMENT)

    # -- replay: the only place state changes ---------------------------------------------------------------

    def replay(self, record: ShareGroupRecord, now_ms: int) -> None:
        match record:
            case ShareGroupEpochRecord(epoch=epoch):
                if epoch is None:
                    self.dead = True
                else:
                    self.group_epoch = epoch
            case ShareMemberMetadataRecord(member_id=member_id, subscription=subscription):
                member = self.members.get(member_id)
                if subscription is None:
                    if member is not None:
                        member.cancel_timers()
                        del self.members[member_id]
                        if not self.members:
                            self.state_timestamp = now_ms
                elif member is None:
                    self.members[member_id] = ShareGroupMember(member_id, subscription)
                else:
                    member.subscription = subscription
            case ShareTargetAssignmentEpochRecord(epoch=epoch):
                self.assignment_epoch = epoch if epoch is not None else 0
            case ShareTargetAssignmentMemberRecord(member_id=member_id, partitions=partitions):
                if partitions is None:
                    self.target_assignment.pop(member_id, None)
                else:
                    self.target_assignment[member_id] = partitions
            case ShareCurrentAssignmentRecord(member_id=member_id, assignment=assignment):
                if (member := self.members.get(member_id)) is not None:
                    member.assignment = assignment if assignment is not None else ShareMemberAssignment()


# -- to and from `__consumer_offsets` (the formats: records.py) -------------------------------------------------

def encode_record(record: ShareGroupRecord) -> tuple[bytes, bytes | None]:
    """The (key, value) entry of a record; value None is a tombstone."""
    key: records.ShareGroupKey
    value: Any = None
    match record:
        case ShareGroupEpochRecord(group_id=group_id, epoch=epoch):
            key = records.ShareGroupMetadataKey(group_id)
            if epoch is not None:
                value = records.SHARE_GROUP_METADATA_VALUE.cls(epoch=epoch)
        case ShareMemberMetadataRecord(group_id=group_id, member_id=member_id, subscription=s):
            key = records.ShareGroupMemberMetadataKey(group_id, member_id)
            if s is not None:
                value = records.SHARE_GROUP_MEMBER_METADATA_VALUE.cls(
                    rack_id=s.rack_id, client_id=s.client_id, client_host=s.client_host,
                    subscribed_topic_names=list(s.subscribed_topic_names))
        case ShareTargetAssignmentEpochRecord(group_id=group_id, epoch=epoch):
            key = records.ShareGroupTargetAssignmentMetadataKey(group_id)
            if epoch is not None:
                value = records.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE.cls(assignment_epoch=epoch)
        case ShareTargetAssignmentMemberRecord(group_id=group_id, member_id=member_id, partitions=partitions):
            key = records.ShareGroupTargetAssignmentMemberKey(group_id, member_id)
            if partitions is not None:
                message = records.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE
                value = message.cls(topic_partitions=topic_partitions_of(message.TopicPartition, partitions))
        case ShareCurrentAssignmentRecord(group_id=group_id, member_id=member_id, assignment=a):
            key = records.ShareGroupCurrentMemberAssignmentKey(group_id, member_id)
            if a is not None:
                message = records.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE
                value = message.cls(member_epoch=a.member_epoch, previous_member_epoch=a.previous_member_epoch,
                                    state=MemberState.STABLE.value_id,
                                    assigned_partitions=topic_partitions_of(message.TopicPartitions, a.assigned))
    return records.encode_key(key), records.encode_value(key, value)


def decode_record(key: records.ShareGroupKey, buf: bytes | None) -> ShareGroupRecord:
    """The record of a loaded (key, value) entry (raises DecodeError on a malformed value)."""
    value = records.decode_value(key, buf)
    match key:
        case records.ShareGroupMetadataKey(group=group_id):
            return ShareGroupEpochRecord(group_id, None if value is None else value.epoch)
        case records.ShareGroupMemberMetadataKey(group=group_id, member_id=member_id):
            return ShareMemberMetadataRecord(group_id, member_id, None if value is None else ShareMemberSubscription(
                rack_id=value.rack_id, client_id=value.client_id, client_host=value.client_host,
                subscribed_topic_names=tuple(value.subscribed_topic_names)))
        case records.ShareGroupTargetAssignmentMetadataKey(group=group_id):
            return ShareTargetAssignmentEpochRecord(group_id, None if value is None else value.assignment_epoch)
        case records.ShareGroupTargetAssignmentMemberKey(group=group_id, member_id=member_id):
            return ShareTargetAssignmentMemberRecord(
                group_id, member_id, None if value is None else assignment_of(value.topic_partitions))
        case records.ShareGroupCurrentMemberAssignmentKey(group=group_id, member_id=member_id):
            return ShareCurrentAssignmentRecord(group_id, member_id, None if value is None else ShareMemberAssignment(
                member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
                assigned=assignment_of(value.assigned_partitions)))
    raise TypeError(f"not a share-group key: {key!r}")


def share_assignment(members: Mapping[str, frozenset[bytes]], partitions: Mapping[bytes, int]) -> dict[str, Assignment]:
    """Kafka's share SimpleAssignor, balanced: per topic, its subscribers in member id order take its partitions
    round-robin; with more subscribers than partitions each subscriber gets one partition, so a partition is shared
    by several members and every member gets work. `members`: member id -> subscribed topic ids; `partitions`:
    topic id -> partition count."""
    assignment: dict[str, dict[bytes, set[int]]] = {member_id: {} for member_id in members}
    for topic_id, count in sorted(partitions.items()):
        subscribers = sorted(m for m, topics in members.items() if topic_id in topics)
        if not subscribers or count <= 0:
            continue
        if len(subscribers) <= count:
            for index in range(count):
                assignment[subscribers[index % len(subscribers)]].setdefault(topic_id, set()).add(index)
        else:
            for index, member_id in enumerate(subscribers):
                assignment[member_id].setdefault(topic_id, set()).add(index % count)
    return {member_id: {t: frozenset(p) for t, p in topics.items()} for member_id, topics in assignment.items()}
