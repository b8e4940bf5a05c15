"""One classic consumer group: members, generation, protocol, state, committed and pending offsets.

State machine (Kafka's GroupMetadata):

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup--> Stable
    Stable / CompletingRebalance --join with new metadata, leave, session expiry--> PreparingRebalance
    PreparingRebalance --every member gone--> Empty
    Empty --DeleteGroups, or its last offset expired--> Dead

Rules:
- The generation rises each time a join phase completes; the first generation a client sees is 1
  (aiokafka sends LeaveGroup only when generation > 0).
- The protocol is the one every member supports with the most first-choice votes, as Kafka selects it.
- A transactional offset (TxnOffsetCommit) stays pending per producer id until its transaction's marker: the commit
  makes it committed unless the committed one of that partition was appended after it (Kafka's
  CommitRecordMetadataAndOffset order), the abort drops it. Deleting an offset deletes the pending ones too.
- Pure bookkeeping: the coordinator owns timers, futures and persistence; this module only decides.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from epoch_broker.broker.groups.records import subscribed_topics


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
    join_waiter: asyncio.Future[Any] | None = None
    sync_waiter: asyncio.Future[Any] | None = None
    session_timer: asyncio.TimerHandle | None = None

    def metadata(self, protocol: str | None) -> bytes:
        return next((m for name, m in self.protocols if name == protocol), b"")

    def same_protocols(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols


@dataclass(slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    # The topic's id when committed (KIP-232): a re-created topic has a new id and the offset is void.
    # None for offsets loaded from the log (the record format has no topic id); bound on first use.
    topic_id: bytes | None = None
    # Where its record's batch is in `__consumer_offsets` (-1 while being appended): the later commit wins.
    log_offset: int = -1


OffsetKey = tuple[str, int]  # (topic, partition)


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
    offsets: dict[OffsetKey, CommittedOffset] = field(default_factory=dict)
    # Transactional offsets by producer id, until the transaction's marker (never an empty inner dict).
    pending_txn_offsets: dict[int, dict[OffsetKey, CommittedOffset]] = field(default_factory=dict)
    join_timer: asyncio.TimerHandle | None = None
    # While an empty group's first join phase is held open (group.initial.rebalance.delay.ms): how much of
    # the rebalance timeout is left to extend it while new members keep arriving. None otherwise.
    initial_delay_remaining_ms: int | None = None
    new_member_joined: bool = False

    def transition(self, state: ClassicGroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp = now_ms

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

    # -- offsets ------------------------------------------------------------------------------------------

    def store_offset(self, key: OffsetKey, committed: CommittedOffset) -> None:
        """Commit an offset unless the one committed was appended after it: a transaction's offsets commit at
        its marker, after plain commits that may be newer."""
        current = self.offsets.get(key)
        if current is None or current.log_offset < committed.log_offset:
            self.offsets[key] = committed

    def stage_txn_offsets(self, producer_id: int,
                          offsets: list[tuple[OffsetKey, CommittedOffset]]) -> dict[OffsetKey, CommittedOffset]:
        """Transactional offsets are pending from their append until `complete_txn`. Returns the pending ones of
        the producer they replace, for `unstage_txn_offsets`."""
        staged = self.pending_txn_offsets.setdefault(producer_id, {})
        replaced = {key: staged[key] for key, _ in offsets if key in staged}
        staged.update(offsets)
        return replaced

    def unstage_txn_offsets(self, producer_id: int, offsets: list[tuple[OffsetKey, CommittedOffset]],
                            replaced: dict[OffsetKey, CommittedOffset]) -> None:
        """Their append failed (a zombie's stale producer epoch, say): those still pending give way to the ones
        they replaced."""
        staged = self.pending_txn_offsets.get(producer_id, {})
        for key, committed in offsets:
            if staged.get(key) is committed:
                if key in replaced:
                    staged[key] = replaced[key]
                else:
                    del staged[key]
        if not staged:
            self.pending_txn_offsets.pop(producer_id, None)

    def complete_txn(self, producer_id: int, commit: bool) -> None:
        """The producer's transaction ended: its pending offsets are committed, or dropped on abort."""
        staged = self.pending_txn_offsets.pop(producer_id, {})
        if commit:
            for key, committed in staged.items():
                self.store_offset(key, committed)

    def has_pending_offset(self, key: OffsetKey) -> bool:
        return any(key in staged for staged in self.pending_txn_offsets.values())

    def has_offsets(self) -> bool:
        """Committed or pending: a group with either is not removed as empty."""
        return bool(self.offsets or self.pending_txn_offsets)

    def all_offsets(self) -> Iterator[tuple[OffsetKey, CommittedOffset]]:
        """Committed, then pending offsets (a partition may come more than once)."""
        yield from self.offsets.items()
        for staged in self.pending_txn_offsets.values():
            yield from staged.items()

    def drop_offsets(self, keys: Iterable[OffsetKey]) -> list[OffsetKey]:
        """Forget the committed and pending offsets of these partitions; returns those that had any."""
        dropped = []
        for key in keys:
            found = self.offsets.pop(key, None) is not None
            for producer_id, staged in list(self.pending_txn_offsets.items()):
                if staged.pop(key, None) is not None:
                    found = True
                    if not staged:
                        del self.pending_txn_offsets[producer_id]
            if found:
                dropped.append(key)
        return dropped
