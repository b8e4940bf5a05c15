"""The groups of one `__consumer_offsets` partition, of every type (Kafka's GroupMetadataManager): typed lookup,
ListGroups and DescribeGroups, the classic membership protocol (in `classic_protocol.py`), the consumer protocol
(KIP-848, its decisions in `consumer_protocol.py`) and the share group protocol (KIP-932, `share_protocol.py`),
loading.

Rules:
- One group per id, of one type: `classic_group` / `consumer_group` answer GROUP_ID_NOT_FOUND (KafkaError) for a
  group of the other type, as Kafka 4.0 with `group.consumer.migration.policy` off; DescribeGroups describes a
  consumer group as Dead, as it describes an unknown one. Kafka 4.0's online migration, part one: an EMPTY group
  of one type (say, a classic group left with only its committed offsets) joined with the other protocol is
  converted: its tombstones are written and a group of the new type starts, keeping the offsets. Classic members
  inside a consumer group (the other part) are not supported. A share group is never converted, nor made from
  another type: a share heartbeat to another type's id, or another protocol to a share group's id, is
  GROUP_ID_NOT_FOUND, as Kafka.
- A consumer-protocol or share heartbeat's decisions are records, replayed into the group as they are made and appended
  in one batch; the answer waits for their replication. Records decided by a timer (session or rebalance timeout)
  are appended the same way, by a write nobody waits for.
- A group is created by its first JoinGroup, or as a simple group by the first offset commit without a
  generation (`offset_metadata_manager.py`); it is removed by DeleteGroups or once empty with no offsets left
  (`shard.py` writes the tombstones).
- Loading replays each group's last metadata record (`replay_classic_group`, a tombstone removes the group); once
  the partition is replayed (`on_loaded`) the group ids with offsets but no group become simple groups and the
  restored members' session timers start.
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar

from epoch_broker.broker.groups import records
from epoch_broker.broker.groups.classic_group import ClassicGroup
from epoch_broker.broker.groups.classic_protocol import ClassicGroupProtocol
from epoch_broker.broker.groups.consumer_group import (
    ConsumerGroup,
    ConsumerGroupRecord,
    GroupEpochRecord,
    decode_record,
    encode_record,
)
from epoch_broker.broker.groups.consumer_protocol import ConsumerGroupProtocol, HeartbeatRequest, HeartbeatResult
from epoch_broker.broker.groups.group import Group
from epoch_broker.broker.groups.runtime import ShardRuntime
from epoch_broker.broker.groups.share_group import ShareGroup, ShareGroupRecord
from epoch_broker.broker.groups.share_group import decode_record as decode_share_record
from epoch_broker.broker.groups.share_group import encode_record as encode_share_record
from epoch_broker.broker.groups.share_protocol import ShareGroupProtocol, ShareHeartbeatRequest, ShareHeartbeatResult
from epoch_broker.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)
G = TypeVar("G", ClassicGroup, ConsumerGroup, ShareGroup)


class GroupIdNotFound(KafkaError):
    """A group id of another type than the request's protocol (Kafka's GroupIdNotFoundException)."""

    code = ErrorCode.GROUP_ID_NOT_FOUND


class GroupMetadataManager:
    def __init__(self, runtime: ShardRuntime) -> None:
        self.runtime = runtime
        self.groups: dict[str, Group] = {}
        self.classic = ClassicGroupProtocol(runtime, self)
        self.consumer = ConsumerGroupProtocol(runtime.consumer_group_config, runtime.topics, runtime.now_ms,
                                              self._write_decided)
        self.share = ShareGroupProtocol(runtime.share_group_config, runtime.topics, runtime.now_ms,
                                        self._write_share_decided, runtime.group_config)

    # -- lookup ----------------------------------------------------------------------------------------------

    def group(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def classic_group(self, group_id: str, create_if_missing: bool = False) -> ClassicGroup | None:
        """The classic group of that id, made Empty if missing and `create_if_missing`; None if missing.
        Raises GroupIdNotFound for a consumer group that has members."""
        return self._typed_group(group_id, ClassicGroup, create_if_missing)

    def consumer_group(self, group_id: str, create_if_missing: bool = False) -> ConsumerGroup | None:
        """The consumer group of that id, made if missing and `create_if_missing` (a member joins); None if
        missing. Raises GroupIdNotFound for a classic group that has members."""
        return self._typed_group(group_id, ConsumerGroup, create_if_missing)

    def share_group(self, group_id: str, create_if_missing: bool = False) -> ShareGroup | None:
        """The share group of that id, made if missing and `create_if_missing` (a member joins); None if missing.
        Raises GroupIdNotFound for a group of another type."""
        return self._typed_group(group_id, ShareGroup, create_if_missing)

    def _typed_group(self, group_id: str, kind: type[G], create_if_missing: bool) -> G | None:
        group = self.groups.get(group_id)
        if (group is not None and not isinstance(group, kind) and create_if_missing and group.is_empty()
                and ShareGroup not in (kind, type(group))):
            self._convert(group, kind.type)
            group = None
        if group is None:
            if not create_if_missing:
                return None
            made = kind(group_id, self.runtime.partition, state_timestamp=self.runtime.now_ms())
            self.groups[group_id] = made
            return made
        if not isinstance(group, kind):
            raise GroupIdNotFound(f"Group {group_id} is a {group.type} group with members, not a {kind.type} group.")
        return group

    def _convert(self, group: Group, to: str) -> None:
        """Kafka 4.0's online migration of an empty group: its tombstones go first (appends keep call order),
        the offsets stay (they belong to the group id)."""
        log.info("group %s: empty %s group converted to a %s group", group.group_id, group.type, to)
        if isinstance(group, ConsumerGroup):
            for member in group.members.values():
                member.cancel_timers()
        self.runtime.spawn(self.runtime.append(group.tombstone_records()))
        del self.groups[group.group_id]

    # -- the consumer protocol -------------------------------------------------------------------------------

    async def consumer_group_heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        """Raises KafkaError with the heartbeat's error; answers once its records are replicated."""
        self.consumer.validate(request)
        group = self.consumer_group(request.group_id, create_if_missing=request.member_epoch == 0)
        if group is None:
            raise GroupIdNotFound(f"Group {request.group_id} not found.")
        now = self.runtime.now_ms()
        decided: list[ConsumerGroupRecord] = []

        def emit(record: ConsumerGroupRecord) -> None:
            group.replay(record, now)
            decided.append(record)

        try:
            result = self.consumer.heartbeat(group, request, emit)
        finally:
            # what was replayed is written even when the heartbeat then failed: memory and log stay one
            written = self.runtime.append([encode_record(r) for r in decided]) if decided else None
            self._count_rebalances(decided)
            if not decided and group.group_epoch == 0 and not group.members:
                self.groups.pop(group.group_id, None)  # made for this join, which failed: never written
        if written is not None:
            await written
        return result

    # -- the share group protocol ----------------------------------------------------------------------------

    async def share_group_heartbeat(self, request: ShareHeartbeatRequest) -> ShareHeartbeatResult:
        """Raises KafkaError with the heartbeat's error; answers once its records are replicated."""
        self.share.validate(request)
        group = self.share_group(request.group_id, create_if_missing=request.member_epoch == 0)
        if group is None:
            raise GroupIdNotFound(f"Group {request.group_id} not found.")
        now = self.runtime.now_ms()
        decided: list[ShareGroupRecord] = []

        def emit(record: ShareGroupRecord) -> None:
            group.replay(record, now)
            decided.append(record)

        try:
            result = self.share.heartbeat(group, request, emit)
        finally:
            written = self.runtime.append([encode_share_record(r) for r in decided]) if decided else None
            if not decided and group.group_epoch == 0 and not group.members:
                self.groups.pop(group.group_id, None)  # made for this join, which failed: never written
        if written is not None:
            await written
        return result

    def _write_share_decided(self, group: ShareGroup, decided: list[ShareGroupRecord]) -> None:
        if decided:
            self.runtime.spawn(self.runtime.append([encode_share_record(r) for r in decided]))

    def _write_decided(self, group: ConsumerGroup, decided: list[ConsumerGroupRecord]) -> None:
        if decided:
            self.runtime.spawn(self.runtime.append([encode_record(r) for r in decided]))
            self._count_rebalances(decided)

    def _count_rebalances(self, decided: list[ConsumerGroupRecord]) -> None:
        """Metrics: each group epoch bump decided (a join, a subscription or metadata change, a leave, a fencing)
        is a rebalance; loading replays records without deciding them, so a new coordinator counts none."""
        for record in decided:
            if isinstance(record, GroupEpochRecord) and record.epoch is not None:
                self.runtime.record_consumer_group_rebalance(record.group_id)

    def on_topics_changed(self) -> None:
        self.consumer.on_topics_changed(g for g in self.groups.values() if isinstance(g, ConsumerGroup))
        self.share.on_topics_changed(g for g in self.groups.values() if isinstance(g, ShareGroup))

    def on_offset_commit(self, group: Group, member_id: str) -> None:
        """An OffsetCommit of this member was accepted: a classic member's commit keeps its session alive."""
        if isinstance(group, ClassicGroup) and (member := group.members.get(member_id)) is not None:
            self.classic.arm_session(group, member)

    # -- ListGroups, DescribeGroups --------------------------------------------------------------------------

    def list_groups(self, states: set[str]) -> list[Group]:
        """Filtered by state name (case-insensitive, as Kafka) when `states` is not empty."""
        wanted = {s.lower() for s in states}
        return [g for g in self.groups.values() if not wanted or g.state_name.lower() in wanted]

    def describe_group(self, group_id: str) -> ClassicGroup:
        """DescribeGroups describes classic groups; GroupIdNotFound, with Kafka's words, for an unknown id or a
        group of another type."""
        group = self.groups.get(group_id)
        if group is None:
            raise GroupIdNotFound(f"Group {group_id} not found.")
        if not isinstance(group, ClassicGroup):
            raise GroupIdNotFound(f"Group {group_id} is not a classic group.")
        return group

    def remove(self, group_id: str) -> None:
        self.groups.pop(group_id, None)

    # -- loading, unloading ----------------------------------------------------------------------------------

    def replay_consumer_group_record(self, key: records.ConsumerGroupKey, value: bytes | None) -> None:
        """A ConsumerGroup* record (key v3-v8) read while loading; the group epoch's tombstone removes the group."""
        group = self.groups.get(key.group)
        if not isinstance(group, ConsumerGroup):
            if value is None:
                return
            group = self.groups[key.group] = ConsumerGroup(key.group, self.runtime.partition)
        group.replay(decode_record(key, value), self.runtime.now_ms())
        if group.dead:
            del self.groups[key.group]

    def replay_share_group_record(self, key: records.ShareGroupKey, value: bytes | None) -> None:
        """A ShareGroup* record (key v10-v14) read while loading; the group epoch's tombstone removes the group."""
        group = self.groups.get(key.group)
        if not isinstance(group, ShareGroup):
            if value is None:
                return
            group = self.groups[key.group] = ShareGroup(key.group, self.runtime.partition)
        group.replay(decode_share_record(key, value), self.runtime.now_ms())
        if group.dead:
            del self.groups[key.group]

    def replay_classic_group(self, group_id: str, value: Any) -> None:
        """A GroupMetadata record: the group as it left it (a later record replaces it), or gone (tombstone)."""
        if value is None:
            self.groups.pop(group_id, None)
        else:
            self.groups[group_id] = ClassicGroup.from_record(group_id, self.runtime.partition, value)

    def on_loaded(self, offset_group_ids: set[str]) -> None:
        """The partition is replayed: a group id with offsets and no group is a simple group (Empty, no
        protocol), and the restored members' session timers start."""
        for group_id in offset_group_ids - self.groups.keys():
            self.groups[group_id] = ClassicGroup(group_id, self.runtime.partition)
        for group in self.groups.values():
            if isinstance(group, ClassicGroup):
                for member in group.members.values():
                    self.classic.arm_session(group, member)
            elif isinstance(group, ConsumerGroup):
                self.consumer.on_loaded(group)
            elif isinstance(group, ShareGroup):
                self.share.on_loaded(group)

    def unload(self) -> None:
        for group in self.groups.values():
            if isinstance(group, ClassicGroup):
                self.classic.unload(group)
            elif isinstance(group, ConsumerGroup | ShareGroup):
                for member in group.members.values():
                    member.cancel_timers()
        self.groups.clear()
