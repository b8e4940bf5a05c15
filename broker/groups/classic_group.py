"""One classic consumer group (Kafka's classic/ClassicGroup): members, generation, protocol, state. Its committed
offsets are not group state: they live in `offset_metadata_manager.py`.

State machine (Kafka's ClassicGroupState):

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup--> Stable
    Stable / CompletingRebalance --join with new metadata, leave, session expiry--> PreparingRebalance
    PreparingRebalance --every member gone--> Empty
    Empty --DeleteGroups, or its last offset expired--> Dead

Rules:
- The generation rises each time a join phase completes; the first generation a client sees is 1
  (aiokafka sends LeaveGroup only when generation > 0).
- The protocol is the one every member supports with the most first-choice votes, as Kafka selects it.
- A "simple" group (offsets committed with generation -1 by a consumer without group management, or by a
  transactional producer) is an Empty classic group with no protocol type, as Kafka creates it.
- Offset commits (Kafka's ClassicGroup.validateOffsetCommit): a Dead group is COORDINATOR_NOT_AVAILABLE (it is being
  deleted); a fenced static member FENCED_INSTANCE_ID; generation -1 is taken only while the group is Empty, and a
  TxnOffsetCommit naming no member (before v3) always; otherwise the member must be known (UNKNOWN_MEMBER_ID) and of
  the current generation (ILLEGAL_GENERATION). An OffsetCommit waits for the assignment (REBALANCE_IN_PROGRESS in
  CompletingRebalance; PreparingRebalance is allowed: a member may commit in its revocation callback); a
  TxnOffsetCommit does not, as in Kafka.
- Offset expiry (KIP-211, `offset_expiration_condition`): in an Empty group, from when it became empty (from each
  commit in a simple group); in a Stable consumer-protocol group, from each commit, for topics no member subscribes
  to; never otherwise.
- Pure bookkeeping: `classic_protocol.py` owns timers, parked requests and persistence; this module only decides.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from epoch_broker.broker.groups import records
from epoch_broker.broker.groups.records import subscribed_topics
from epoch_broker.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from epoch_broker.broker.groups.classic_protocol import JoinResult, SyncResult


class ClassicGroupState(StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(eq=False, slots=True)
class ClassicGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata) in the member's order of preference
    assignment: bytes = b""
    # Set while the member's JoinGroup / SyncGroup request is parked until the phase completes.
    join_waiter: asyncio.Future[JoinResult] | None = None
    sync_waiter: asyncio.Future[SyncResult] | None = None
    session_timer: asyncio.TimerHandle | None = None

    def metadata(self, protocol: str | None) -> bytes:
        return next((m for name, m in self.protocols if name == protocol), b"")

    def same_protocols(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols


@dataclass(eq=False)
class ClassicGroup:
    group_id: str
    partition: int  # of __consumer_offsets
    state: ClassicGroupState = ClassicGroupState.EMPTY
    state_timestamp: int = -1  # ms when the state last changed (offset expiry counts from it)
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, ClassicGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    # Members told MEMBER_ID_REQUIRED (JoinGroup v4+), with the timer that forgets them.
    pending_members: dict[str, asyncio.TimerHandle] = field(default_factory=dict)
    join_timer: asyncio.TimerHandle | None = None
    # While an empty group's first join phase is held open (group.initial.rebalance.delay.ms): how much of
    # the rebalance timeout is left to extend it while new members keep arriving. None otherwise.
    initial_delay_remaining_ms: int | None = None
    new_member_joined: bool = False

    type = "classic"

    def transition(self, state: ClassicGroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp = now_ms

    @classmethod
    def from_record(cls, group_id: str, partition: int, value: Any) -> ClassicGroup:
        """The group as its last GroupMetadataValue left it: Stable with its members (who keep heartbeating their
        generation after a coordinator restart), or Empty. Kafka's ClassicGroup.fromRecord; no timer is armed."""
        group = cls(group_id, partition, generation_id=value.generation, protocol_type=value.protocol_type or None,
                    protocol_name=value.protocol, state_timestamp=value.current_state_timestamp)
        for m in value.members:
            group.add(ClassicGroupMember(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout,
                m.session_timeout, group.protocol_type or "", [(group.protocol_name or "", bytes(m.subscription))],
                bytes(m.assignment),
            ))
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        group.new_member_joined = False
        group.state = ClassicGroupState.STABLE if group.members else ClassicGroupState.EMPTY
        return group

    def metadata_record(self) -> tuple[bytes, bytes]:
        """The group's GroupMetadataKey v2 / GroupMetadataValue v3 record (Kafka's newGroupMetadataRecord)."""
        cls = records.GROUP_METADATA_VALUE
        value = cls.cls(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=self.protocol_name,
            leader=self.leader_id if self.members else None,
            current_state_timestamp=self.state_timestamp,
            members=[
                cls.MemberMetadata(
                    member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                    client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
                    session_timeout=m.session_timeout_ms, subscription=m.metadata(self.protocol_name),
                    assignment=m.assignment,
                )
                for m in self.members.values()
            ],
        )
        return records.group_key(self.group_id), records.group_value(value)

    # -- the Group interface (group.py) -------------------------------------------------------------------

    @property
    def state_name(self) -> str:
        return self.state.value

    def num_members(self) -> int:
        return len(self.members)

    def is_empty(self) -> bool:
        """Empty, and no member id handed out with MEMBER_ID_REQUIRED is still expected back."""
        return self.state is ClassicGroupState.EMPTY and not self.pending_members

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Whether a member consumes `topic`; True when that cannot be known (a protocol other than "consumer", or
        a subscription that does not decode), so its offsets are kept."""
        if self.state is ClassicGroupState.EMPTY:
            return False
        subscribed = self.subscribed_topics()
        return subscribed is None or topic in subscribed

    def validate_offset_commit(self, member_id: str, group_instance_id: str | None,
                               generation_id_or_member_epoch: int, api_version: int,
                               transactional: bool = False) -> ErrorCode:
        """The rules are in the module's docstring; every OffsetCommit version is served alike."""
        generation_id = generation_id_or_member_epoch
        if self.state is ClassicGroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.is_fenced(member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if generation_id < 0 and self.state is ClassicGroupState.EMPTY:
            return ErrorCode.NONE
        if transactional and generation_id < 0 and not member_id and group_instance_id is None:
            return ErrorCode.NONE  # TxnOffsetCommit before v3 names no member: nothing to fence
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != self.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if not transactional and self.state is ClassicGroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        """A classic group's offsets are anyone's to read (OffsetFetch names a member only for consumer groups)."""
        return ErrorCode.NONE

    def validate_offset_delete(self) -> ErrorCode:
        return ErrorCode.GROUP_ID_NOT_FOUND if self.state is ClassicGroupState.DEAD else ErrorCode.NONE

    def validate_delete_group(self) -> ErrorCode:
        if self.state is ClassicGroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        return ErrorCode.NONE if self.state is ClassicGroupState.EMPTY else ErrorCode.NON_EMPTY_GROUP

    def offset_expiration_condition(self) -> Callable[[int], int] | None:
        """Given an offset's commit timestamp, the time its retention counts from; None: nothing expires now."""
        if self.state is ClassicGroupState.EMPTY:
            if self.protocol_type is None or self.state_timestamp < 0:  # a simple group: from each commit
                return lambda commit_timestamp: commit_timestamp
            emptied = self.state_timestamp
            return lambda _: emptied
        if self.state is ClassicGroupState.STABLE and self.subscribed_topics() is not None:
            return lambda commit_timestamp: commit_timestamp
        return None

    def tombstone_records(self) -> list[tuple[bytes, bytes | None]]:
        return [(records.group_key(self.group_id), None)]

    def set_dead(self, dead: bool, now_ms: int) -> None:
        self.transition(ClassicGroupState.DEAD if dead else ClassicGroupState.EMPTY, now_ms)

    # -- membership ---------------------------------------------------------------------------------------

    def add(self, member: ClassicGroupMember) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type  # kept when the group empties, as Kafka does
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.new_member_joined = True

    def remove(self, member_id: str) -> ClassicGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static(self, old: ClassicGroupMember, new_member_id: str) -> ClassicGroupMember:
        """A static member rejoined with an unknown member id: it takes over the old member's place."""
        del self.members[old.member_id]
        old.member_id = new_member_id
        self.members[new_member_id] = old
        assert old.group_instance_id is not None
        self.static_members[old.group_instance_id] = new_member_id
        if self.leader_id is None or self.leader_id not in self.members:
            self.leader_id = new_member_id
        return old

    def is_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        """A static member id that no longer owns its group.instance.id (a newer instance replaced it)."""
        if group_instance_id is None:
            return False
        owner = self.static_members.get(group_instance_id)
        return owner is not None and owner != member_id

    def all_joined(self) -> bool:
        return not self.pending_members and all(m.join_waiter is not None for m in self.members.values())

    # -- protocols ----------------------------------------------------------------------------------------

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Can a member with these protocols join? (Else INCONSISTENT_GROUP_PROTOCOL.)"""
        if not protocol_type or not protocols:
            return False
        if not self.members:
            return True
        names = {name for name, _ in protocols}
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; most votes wins, ties to the leader's order."""
        candidates = self.candidate_protocols()
        votes = Counter(
            next(name for name, _ in m.protocols if name in candidates) for m in self.members.values()
        )
        leader = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        order = [name for name, _ in leader.protocols if name in candidates]
        return max(order, key=lambda name: (votes[name], -order.index(name)))

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol); None when it cannot be known."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            found = subscribed_topics(member.metadata(self.protocol_name))
            if found is None:
                return None
            topics.update(found)
        return topics

