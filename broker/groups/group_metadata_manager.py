"""The groups of one `__consumer_offsets` partition, of every type (Kafka's GroupMetadataManager): typed lookup,
ListGroups and DescribeGroups, the classic membership protocol (in `classic_protocol.py`), loading.

Rules:
- One group per id, of one type: `classic_group` answers GROUP_ID_NOT_FOUND (KafkaError) for a group of another
  type, as Kafka 4.0's getOrMaybeCreateClassicGroup; DescribeGroups describes such a group as Dead, as it
  describes an unknown one. (Kafka also lets classic members join a consumer group, and converts an empty
  group on a join of the other protocol: not done here yet; `classic_group` is where that goes.)
- A group is created by its first JoinGroup, or as a simple group by the first offset commit without a
  generation (`offset_metadata_manager.py`); it is removed by DeleteGroups or once empty with no offsets left
  (`shard.py` writes the tombstones).
- Loading replays each group's last metadata record (`replay_classic_group`, a tombstone removes the group); once
  the partition is replayed (`on_loaded`) the group ids with offsets but no group become simple groups and the
  restored members' session timers start.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.groups.classic_group import ClassicGroup
from epoch_broker.broker.groups.classic_protocol import ClassicGroupProtocol
from epoch_broker.broker.groups.group import Group
from epoch_broker.broker.groups.runtime import ShardRuntime
from epoch_broker.protocol.errors import ErrorCode, KafkaError


class GroupIdNotFound(KafkaError):
    """A group id of another type than the request's protocol (Kafka's GroupIdNotFoundException)."""

    code = ErrorCode.GROUP_ID_NOT_FOUND


class GroupMetadataManager:
    def __init__(self, runtime: ShardRuntime) -> None:
        self.runtime = runtime
        self.groups: dict[str, Group] = {}
        self.classic = ClassicGroupProtocol(runtime, self)

    # -- lookup ----------------------------------------------------------------------------------------------

    def group(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def classic_group(self, group_id: str, create_if_missing: bool = False) -> ClassicGroup | None:
        """The classic group of that id, made Empty if missing and `create_if_missing`; None if missing.
        Raises GroupIdNotFound for a group of another type."""
        group = self.groups.get(group_id)
        if group is None:
            if not create_if_missing:
                return None
            classic = ClassicGroup(group_id, self.runtime.partition, state_timestamp=self.runtime.now_ms())
            self.groups[group_id] = classic
            return classic
        if not isinstance(group, ClassicGroup):
            raise GroupIdNotFound(f"group {group_id} is not a classic group")
        return group

    def on_offset_commit(self, group: Group, member_id: str) -> None:
        """An OffsetCommit of this member was accepted: a classic member's commit keeps its session alive."""
        if isinstance(group, ClassicGroup) and (member := group.members.get(member_id)) is not None:
            self.classic.arm_session(group, member)

    # -- ListGroups, DescribeGroups --------------------------------------------------------------------------

    def list_groups(self, states: set[str]) -> list[Group]:
        """Filtered by state name (case-insensitive, as Kafka) when `states` is not empty."""
        wanted = {s.lower() for s in states}
        return [g for g in self.groups.values() if not wanted or g.state_name.lower() in wanted]

    def describe_group(self, group_id: str) -> ClassicGroup | None:
        """DescribeGroups describes classic groups; None (described as Dead) for another type or an unknown id."""
        try:
            return self.classic_group(group_id)
        except GroupIdNotFound:
            return None

    def remove(self, group_id: str) -> None:
        self.groups.pop(group_id, None)

    # -- loading, unloading ----------------------------------------------------------------------------------

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

    def unload(self) -> None:
        for group in self.groups.values():
            if isinstance(group, ClassicGroup):
                self.classic.unload(group)
        self.groups.clear()
