"""What every group type offers the coordinator without it knowing the type (Kafka's Group interface): a classic
group (`classic_group.ClassicGroup`, JoinGroup/SyncGroup) and a KIP-848 consumer group (ConsumerGroupHeartbeat).

Rules:
- The offset manager (`offset_metadata_manager.py`) validates commits, fetches and deletes, and expires offsets,
  only through this interface; the group metadata manager lists, describes and deletes through it. Anything
  else (joining, heartbeats, assignments) belongs to the group's own protocol module.
- `type` is the name ListGroups v5 shows and filters by ("classic", "consumer"); `state_name` the state as ListGroups
  and DescribeGroups show it (case-insensitive filter).
- The validations answer an ErrorCode (NONE to accept) instead of raising: the callers map it per entry.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Protocol

from epoch_broker.protocol.errors import ErrorCode

Entry = tuple[bytes, bytes | None]  # a `__consumer_offsets` record: key, value (None for a tombstone)


class Group(Protocol):
    group_id: str
    partition: int  # of __consumer_offsets

    @property
    def type(self) -> str:
        """"classic" or "consumer" (Kafka's Group.GroupType)."""

    @property
    def state(self) -> StrEnum:
        """The group's state; its value is `state_name`."""

    @property
    def state_name(self) -> str:
        """The state as ListGroups and DescribeGroups name it (Empty, Stable, ..., Dead)."""

    @property
    def protocol_type(self) -> str | None:
        """ListGroups' protocol type: the classic members' ("consumer", "connect"...), None for a simple group;
        "consumer" for a consumer group."""

    def num_members(self) -> int: ...

    def is_empty(self) -> bool:
        """No members: a group left with no offsets either is removed (offset expiry)."""

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """A member consumes `topic` (OffsetDelete refuses its offsets, expiry keeps them)."""

    def validate_offset_commit(self, member_id: str, group_instance_id: str | None,
                               generation_id_or_member_epoch: int, api_version: int,
                               transactional: bool = False) -> ErrorCode:
        """OffsetCommit (`transactional`: TxnOffsetCommit) of this member at this generation or member epoch."""

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        """OffsetFetch v9+ names the member and its epoch (consumer groups); None and -1 for older versions."""

    def validate_offset_delete(self) -> ErrorCode: ...

    def validate_delete_group(self) -> ErrorCode:
        """DeleteGroups: GROUP_ID_NOT_FOUND for a deleted group, NON_EMPTY_GROUP while it has members."""

    def offset_expiration_condition(self) -> Callable[[int], int] | None:
        """Given an offset's commit timestamp, the timestamp its retention counts from (KIP-211); None while no
        offset of the group may expire. Only offsets of topics it is not subscribed to expire."""

    def tombstone_records(self) -> list[Entry]:
        """The records that delete the group (its offsets' tombstones are the offset manager's)."""

    def set_dead(self, dead: bool, now_ms: int) -> None:
        """Dead while its tombstones are written (nobody joins or commits meanwhile); `dead=False` puts it back
        (Empty) when they could not be."""
