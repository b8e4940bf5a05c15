"""One KIP-848 consumer group (`group.protocol=consumer`): members, epochs, target and current assignments.

State is changed only by replaying records (`ConsumerGroup.replay`), the same records the coordinator appends to
`__consumer_offsets` (Kafka's ConsumerGroup*Record types, encoded in `records.py`), so a group rebuilt from the log
by the next coordinator is the group that was written, as Kafka's coordinator replays its own writes.

    group epoch        moves on a membership, subscription or subscribed-topic metadata change
    assignment epoch   the group epoch the target assignment was computed for (Assigning while it lags)
    member epoch       the target epoch a member has reconciled to; a partition moves only once its previous
                       owner stopped listing it (`current_assignment_builder.py`)

States (Kafka's ConsumerGroupState): Empty (no members), Assigning (group epoch > assignment epoch), Reconciling
(a member not yet at the assignment epoch), Stable; Dead once deleted.

Rules:
- `partition_epochs` maps every partition assigned or pending revocation to the epoch of the member holding it; a
  partition is never held by two members (replay raises IllegalStateError rather than let it happen).
- Offset commits: a member must commit with its current member epoch (STALE_MEMBER_EPOCH otherwise, UNKNOWN_MEMBER_ID
  for a stranger) and with OffsetCommit v9+ (UNSUPPORTED_VERSION below, outside transactions); a commit with epoch
  -1 is accepted only while the group is empty (an admin client or a consumer without group management), as Kafka.
- Pure bookkeeping: timers, persistence and the heartbeat's decisions live in `consumer_protocol.py`.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from epoch_broker.broker.groups import records
from epoch_broker.broker.groups.current_assignment_builder import MemberAssignment, MemberState, PartitionEpochs
from epoch_broker.protocol.errors import ErrorCode

Assignment = Mapping[bytes, frozenset[int]]  # topic id -> partitions
EMPTY_ASSIGNMENT: Assignment = {}

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class ConsumerGroupState(StrEnum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """What a member told the coordinator about itself (Kafka's ConsumerGroupMemberMetadataValue)."""

    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None


NEW_MEMBER_ASSIGNMENT = MemberAssignment(
    state=MemberState.STABLE, member_epoch=0, previous_member_epoch=0, assigned={}, pending_revocation={})


@dataclass(eq=False, slots=True)
class ConsumerGroupMember:
    member_id: str
    subscription: MemberSubscription = MemberSubscription()
    assignment: MemberAssignment = NEW_MEMBER_ASSIGNMENT
    session_timer: asyncio.TimerHandle | None = None
    rebalance_timer: asyncio.TimerHandle | None = None  # armed while the member owes a revocation

    @property
    def instance_id(self) -> str | None:
        return self.subscription.instance_id

    @property
    def member_epoch(self) -> int:
        return self.assignment.member_epoch

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.assignment.state is MemberState.STABLE and self.assignment.member_epoch == epoch

    def cancel_timers(self) -> None:
        for timer in (self.session_timer, self.rebalance_timer):
            if timer is not None:
                timer.cancel()
        self.session_timer = self.rebalance_timer = None


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: bytes
    name: str
    partitions: int


# -- the records (keys and values of Kafka's ConsumerGroup*Record types; value None = tombstone) ---------------

@dataclass(frozen=True, slots=True)
class GroupEpochRecord:  # ConsumerGroupMetadataKey/Value
    group_id: str
    epoch: int | None


@dataclass(frozen=True, slots=True)
class SubscriptionMetadataRecord:  # ConsumerGroupPartitionMetadataKey/Value
    group_id: str
    topics: Mapping[str, TopicMetadata] | None


@dataclass(frozen=True, slots=True)
class MemberMetadataRecord:  # ConsumerGroupMemberMetadataKey/Value
    group_id: str
    member_id: str
    subscription: MemberSubscription | None


@dataclass(frozen=True, slots=True)
class TargetAssignmentEpochRecord:  # ConsumerGroupTargetAssignmentMetadataKey/Value
    group_id: str
    epoch: int | None


@dataclass(frozen=True, slots=True)
class TargetAssignmentMemberRecord:  # ConsumerGroupTargetAssignmentMemberKey/Value
    group_id: str
    member_id: str
    partitions: Assignment | None


@dataclass(frozen=True, slots=True)
class CurrentAssignmentRecord:  # ConsumerGroupCurrentMemberAssignmentKey/Value
    group_id: str
    member_id: str
    assignment: MemberAssignment | None


ConsumerGroupRecord = (GroupEpochRecord | SubscriptionMetadataRecord | MemberMetadataRecord
                       | TargetAssignmentEpochRecord | TargetAssignmentMemberRecord | CurrentAssignmentRecord)


def member_removal_records(group_id: str, member_id: str) -> list[ConsumerGroupRecord]:
    """Kafka's removeMember: current assignment, target assignment and member metadata tombstones, in that order."""
    return [CurrentAssignmentRecord(group_id, member_id, None), TargetAssignmentMemberRecord(group_id, member_id, None),
            MemberMetadataRecord(group_id, member_id, None)]


@dataclass(eq=False)
class ConsumerGroup:
    group_id: str
    partition: int  # of __consumer_offsets
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target_assignment: dict[str, Assignment] = field(default_factory=dict)  # member id -> partitions
    partition_epochs: PartitionEpochs = field(default_factory=PartitionEpochs)  # who holds each partition
    subscription_metadata: dict[str, TopicMetadata] = field(default_factory=dict)  # subscribed topics that exist
    # Set when the topics changed (created, deleted, partitions added): the next heartbeat recomputes the
    # subscription metadata and, if it moved, bumps the group epoch.
    metadata_refresh: bool = False
    dead: bool = False
    state_timestamp: int = -1  # ms when the group last turned empty (offset expiry counts from it)

    type = "consumer"

    # -- the Group interface --------------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    @property
    def state_name(self) -> str:
        return self.state.value

    @property
    def protocol_type(self) -> str:
        return "consumer"

    def num_members(self) -> int:
        return len(self.members)

    def is_empty(self) -> bool:
        return not self.members

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscription_metadata

    def validate_offset_commit(self, member_id: str, group_instance_id: str | None, member_epoch: int,
                               api_version: int, transactional: bool = False) -> ErrorCode:
        if member_epoch < 0 and not self.members:
            return ErrorCode.NONE
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        return ErrorCode.NONE if member_epoch == member.member_epoch else ErrorCode.STALE_MEMBER_EPOCH

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        if member_id is None and member_epoch < 0:
            return ErrorCode.NONE
        member = self.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE if member_epoch == member.member_epoch else ErrorCode.STALE_MEMBER_EPOCH

    def validate_offset_delete(self) -> ErrorCode:
        return ErrorCode.GROUP_ID_NOT_FOUND if self.dead else ErrorCode.NONE

    def validate_delete_group(self) -> ErrorCode:
        if self.dead:
            return ErrorCode.GROUP_ID_NOT_FOUND
        return ErrorCode.NONE if self.state is ConsumerGroupState.EMPTY else ErrorCode.NON_EMPTY_GROUP

    def offset_expiration_condition(self) -> Callable[[int], int] | None:
        """As Kafka's ConsumerGroup: always from the commit (only topics nobody subscribes to expire)."""
        return lambda commit_timestamp: commit_timestamp

    def tombstone_records(self) -> list[tuple[bytes, bytes | None]]:
        """Kafka's createGroupTombstoneRecords: each member's three, then the group's."""
        decided: list[ConsumerGroupRecord] = []
        for member_id in self.members:
            decided += member_removal_records(self.group_id, member_id)
        decided += [TargetAssignmentEpochRecord(self.group_id, None), SubscriptionMetadataRecord(self.group_id, None),
                    GroupEpochRecord(self.group_id, None)]
        return [encode_record(record) for record in decided]

    def set_dead(self, dead: bool, now_ms: int) -> None:
        self.dead = dead

    # -- lookups --------------------------------------------------------------------------------------------

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id) if instance_id is not None else None
        return None if member_id is None else self.members.get(member_id)

    def target_of(self, member_id: str) -> Assignment:
        return self.target_assignment.get(member_id, EMPTY_ASSIGNMENT)

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members ask for (ties: the first in name order), else `default`."""
        votes = Counter(m.subscription.server_assignor for m in self.members.values()
                        if m.subscription.server_assignor)
        if not votes:
            return default
        top = max(votes.values())
        return min(name for name, n in votes.items() if n == top)

    # -- replay: the only place state changes ---------------------------------------------------------------

    def replay(self, record: ConsumerGroupRecord, now_ms: int) -> None:
        match record:
            case GroupEpochRecord(epoch=epoch):
                if epoch is None:
                    self.dead = True
                else:
                    self.group_epoch = epoch
            case SubscriptionMetadataRecord(topics=topics):
                self.subscription_metadata = dict(topics or {})
            case MemberMetadataRecord(member_id=member_id, subscription=subscription):
                self._replay_member(member_id, subscription, now_ms)
            case TargetAssignmentEpochRecord(epoch=epoch):
                self.assignment_epoch = epoch if epoch is not None else 0
            case TargetAssignmentMemberRecord(member_id=member_id, partitions=partitions):
                if partitions is None:
                    self.target_assignment.pop(member_id, None)
                else:
                    self.target_assignment[member_id] = partitions
            case CurrentAssignmentRecord(member_id=member_id, assignment=assignment):
                self._replay_current_assignment(member_id, assignment)

    def _replay_member(self, member_id: str, subscription: MemberSubscription | None, now_ms: int) -> None:
        member = self.members.get(member_id)
        if subscription is None:
            if member is None:
                return
            self.partition_epochs.update(member.assignment, None)
            member.cancel_timers()
            del self.members[member_id]
            if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
                del self.static_members[member.instance_id]
            if not self.members:
                self.state_timestamp = now_ms
            return
        if member is None:
            member = self.members[member_id] = ConsumerGroupMember(member_id)
        member.subscription = subscription
        if subscription.instance_id is not None:
            self.static_members[subscription.instance_id] = member_id

    def _replay_current_assignment(self, member_id: str, assignment: MemberAssignment | None) -> None:
        member = self.members.get(member_id)
        if member is None:  # its metadata tombstone came first, or a load of a partial write: nothing to hold
            return
        new = assignment if assignment is not None else NEW_MEMBER_ASSIGNMENT
        self.partition_epochs.update(member.assignment, new)  # raises rather than let two members hold one
        member.assignment = new


# -- to and from `__consumer_offsets` (the formats: records.py) -------------------------------------------------

def topic_partitions_of(cls: Any, assignment: Assignment) -> list[Any]:
    """An assignment as a record value's TopicPartitions structs (`cls`), sorted, empty topics left out."""
    return [cls(topic_id=topic_id, partitions=sorted(partitions))
            for topic_id, partitions in sorted(assignment.items()) if partitions]


def assignment_of(topic_partitions: list[Any]) -> dict[bytes, frozenset[int]]:
    """A record value's TopicPartitions structs as an assignment."""
    return {bytes(tp.topic_id): frozenset(tp.partitions) for tp in topic_partitions if tp.partitions}


def encode_record(record: ConsumerGroupRecord) -> tuple[bytes, bytes | None]:
    """The (key, value) entry of a record; value None is a tombstone."""
    key: records.ConsumerGroupKey
    value: Any = None
    match record:
        case GroupEpochRecord(group_id=group_id, epoch=epoch):
            key = records.ConsumerGroupMetadataKey(group_id)
            if epoch is not None:
                value = records.CONSUMER_GROUP_METADATA_VALUE.cls(epoch=epoch)
        case SubscriptionMetadataRecord(group_id=group_id, topics=topics):
            key = records.ConsumerGroupPartitionMetadataKey(group_id)
            if topics is not None:
                message = records.CONSUMER_GROUP_PARTITION_METADATA_VALUE
                value = message.cls(topics=[
                    message.TopicMetadata(topic_id=t.topic_id, topic_name=t.name, num_partitions=t.partitions,
                                          partition_metadata=[]) for t in topics.values()])
        case MemberMetadataRecord(group_id=group_id, member_id=member_id, subscription=s):
            key = records.ConsumerGroupMemberMetadataKey(group_id, member_id)
            if s is not None:
                value = records.CONSUMER_GROUP_MEMBER_METADATA_VALUE.cls(
                    instance_id=s.instance_id, rack_id=s.rack_id, client_id=s.client_id, client_host=s.client_host,
                    subscribed_topic_names=list(s.subscribed_topic_names),
                    subscribed_topic_regex=s.subscribed_topic_regex, rebalance_timeout_ms=s.rebalance_timeout_ms,
                    server_assignor=s.server_assignor)
        case TargetAssignmentEpochRecord(group_id=group_id, epoch=epoch):
            key = records.ConsumerGroupTargetAssignmentMetadataKey(group_id)
            if epoch is not None:
                value = records.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE.cls(assignment_epoch=epoch)
        case TargetAssignmentMemberRecord(group_id=group_id, member_id=member_id, partitions=partitions):
            key = records.ConsumerGroupTargetAssignmentMemberKey(group_id, member_id)
            if partitions is not None:
                message = records.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE
                value = message.cls(topic_partitions=topic_partitions_of(message.TopicPartition, partitions))
        case CurrentAssignmentRecord(group_id=group_id, member_id=member_id, assignment=a):
            key = records.ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id)
            if a is not None:
                message = records.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE
                value = message.cls(
                    member_epoch=a.member_epoch, previous_member_epoch=a.previous_member_epoch,
                    state=a.state.value_id,
                    assigned_partitions=topic_partitions_of(message.TopicPartitions, a.assigned),
                    partitions_pending_revocation=topic_partitions_of(message.TopicPartitions, a.pending_revocation))
    return records.encode_key(key), records.encode_value(key, value)


def decode_record(key: records.ConsumerGroupKey, buf: bytes | None) -> ConsumerGroupRecord:
    """The record of a loaded (key, value) entry (raises DecodeError on a malformed value)."""
    value = records.decode_value(key, buf)
    match key:
        case records.ConsumerGroupMetadataKey(group=group_id):
            return GroupEpochRecord(group_id, None if value is None else value.epoch)
        case records.ConsumerGroupPartitionMetadataKey(group=group_id):
            return SubscriptionMetadataRecord(group_id, None if value is None else {
                t.topic_name: TopicMetadata(bytes(t.topic_id), t.topic_name, t.num_partitions) for t in value.topics})
        case records.ConsumerGroupMemberMetadataKey(group=group_id, member_id=member_id):
            return MemberMetadataRecord(group_id, member_id, None if value is None else MemberSubscription(
                instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
                client_host=value.client_host, rebalance_timeout_ms=value.rebalance_timeout_ms,
                subscribed_topic_names=tuple(value.subscribed_topic_names),
                subscribed_topic_regex=value.subscribed_topic_regex, server_assignor=value.server_assignor))
        case records.ConsumerGroupTargetAssignmentMetadataKey(group=group_id):
            return TargetAssignmentEpochRecord(group_id, None if value is None else value.assignment_epoch)
        case records.ConsumerGroupTargetAssignmentMemberKey(group=group_id, member_id=member_id):
            return TargetAssignmentMemberRecord(
                group_id, member_id, None if value is None else assignment_of(value.topic_partitions))
        case records.ConsumerGroupCurrentMemberAssignmentKey(group=group_id, member_id=member_id):
            return CurrentAssignmentRecord(group_id, member_id, None if value is None else MemberAssignment(
                state=MemberState.from_value_id(value.state), member_epoch=value.member_epoch,
                previous_member_epoch=value.previous_member_epoch,
                assigned=assignment_of(value.assigned_partitions),
                pending_revocation=assignment_of(value.partitions_pending_revocation)))
    raise TypeError(f"not a consumer-group key: {key!r}")
