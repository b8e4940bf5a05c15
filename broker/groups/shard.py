"""One `__consumer_offsets` partition led and loaded here (Kafka's GroupCoordinatorShard): its groups
(`GroupMetadataManager`) and their offsets (`OffsetMetadataManager`), the records that rebuild them, and the
work that needs both managers.

Rules:
- `replay` applies one record read while loading, by its key's type: OffsetCommit (key v0-1) to the offset
  manager, GroupMetadata (key v2) and the consumer and share groups' records (key v3-v14) to the group manager, the
  share-partitions' state (key v1000) to the share state manager (`share_state.py`). Transaction markers
  go to `replay_end_transaction_marker`. Nothing is visible to requests until the coordinator installs the shard
  after `on_loaded`.
- Deleting a group (DeleteGroups, or expiry of an empty group with no offsets left) writes the tombstones of all
  its offsets (pending ones too), of its share-partitions' state and of the group in one batch. The group is
  Dead while they are written, so nobody joins it and no offset is committed to it meanwhile; Empty again if
  they cannot be. Only once they are replicated are the group and its offsets forgotten.
- Expiry (KIP-211) runs group by group: first the expired offsets' tombstones, then, for a group left empty with
  no offsets (committed or pending), the group's.
"""

from __future__ import annotations

import logging

from epoch_broker.broker.groups import records
from epoch_broker.broker.groups.group import Group
from epoch_broker.broker.groups.group_metadata_manager import GroupMetadataManager
from epoch_broker.broker.groups.offset_metadata_manager import NO_PRODUCER_ID, OffsetMetadataManager
from epoch_broker.broker.groups.runtime import ShardRuntime
from epoch_broker.broker.groups.share_state import ShareStateManager
from epoch_broker.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)


class GroupCoordinatorShard:
    def __init__(self, runtime: ShardRuntime) -> None:
        self.runtime = runtime
        self.partition = runtime.partition
        self.groups = GroupMetadataManager(runtime)
        self.offsets = OffsetMetadataManager(runtime, self.groups)
        self.share_states = ShareStateManager(runtime)  # the share-partitions' durable state (KIP-932)

    # -- loading ---------------------------------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None, log_offset: int, producer_id: int = NO_PRODUCER_ID) -> None:
        """One record of the partition, read while loading (`producer_id`: of a transactional record, else -1)."""
        decoded = records.decode_key(key)
        if isinstance(decoded, records.OffsetKey):
            self.offsets.replay(decoded, value, log_offset, producer_id)
        elif isinstance(decoded, records.GroupKey):
            group_value = None if value is None else records.decode_group_value(value)
            self.groups.replay_classic_group(decoded.group, group_value)
        elif isinstance(decoded, records.ShareSnapshotKey):
            self.share_states.replay(decoded, value)
        elif isinstance(decoded, records.SHARE_GROUP_KEYS):  # a share group's record (KIP-932)
            self.groups.replay_share_group_record(decoded, value)
        else:  # a consumer group's record (KIP-848)
            self.groups.replay_consumer_group_record(decoded, value)

    def replay_end_transaction_marker(self, producer_id: int, commit: bool) -> None:
        self.offsets.complete_txn(producer_id, commit)

    def on_loaded(self) -> None:
        self.offsets.on_loaded()
        self.groups.on_loaded(set(self.offsets.offsets))

    def unload(self) -> None:
        """Leadership moved away, or shutdown: timers stop, parked requests are answered NOT_COORDINATOR."""
        self.groups.unload()

    # -- DeleteGroups, expiry --------------------------------------------------------------------------------

    async def delete_group(self, group_id: str) -> ErrorCode:
        group = self.groups.group(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        error = group.validate_delete_group()
        if error is not ErrorCode.NONE:
            return error
        try:
            await self._remove_group(group)
        except KafkaError as exc:
            return exc.code
        return ErrorCode.NONE

    async def _remove_group(self, group: Group) -> None:
        entries = [*self.offsets.group_tombstones(group.group_id), *self.share_states.tombstones(group.group_id),
                   *group.tombstone_records()]
        group.set_dead(True, self.runtime.now_ms())
        try:
            await self.runtime.append(entries)
        except KafkaError:
            group.set_dead(False, self.runtime.now_ms())
            raise
        self.offsets.delete_group(group.group_id)
        self.share_states.forget(group.group_id)
        self.groups.remove(group.group_id)
        log.info("group %s removed", group.group_id)

    async def expire_offsets(self, deadline_ms: int) -> None:
        """Remove offsets whose retention ended at `deadline_ms`, then groups left with neither members nor offsets."""
        for group in list(self.groups.groups.values()):
            if group.offset_expiration_condition() is None:
                continue
            try:
                await self.offsets.drop_offsets(group.group_id, self.offsets.expired_offsets(group, deadline_ms))
                if group.is_empty() and not self.offsets.has_offsets(group.group_id):
                    await self._remove_group(group)
            except KafkaError as exc:
                log.warning("expiring offsets of group %s failed: %s", group.group_id, exc)
