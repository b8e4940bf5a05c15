"""The durable state of share-partitions (KIP-932), kept by the share group's coordinator: what Kafka's share
coordinator (`ShareCoordinatorShard`) keeps in `__share_group_state`, kept here in the group's own
`__consumer_offsets` partition (records.py: ShareSnapshotKey/Value).

Why not a `__share_group_state` topic: the guarantees are the ones every group record has already (a write is
answered once replicated to the ISR; the latest value per key survives compaction; the coordinator's successor
replays it), and a group's share state then moves, loads, and is deleted with the group itself (DeleteGroups
writes its tombstones in the group's own batch: no DeleteShareGroupState round). What is given up is Kafka's
spread of one group's share-partitions over many coordinators, a scaling concern for large clusters.

Rules:
- One snapshot per (group, topic id, partition): the state epoch, the leader epoch of the last leader that read
  or wrote it, the share-partition start offset and the state batches (0 available, 2 acknowledged, 4 archived,
  each with its delivery count). A write replaces the whole snapshot (our leaders always send the whole state,
  where Kafka's leaders send the batches that changed and its shard merges them).
- Reads and writes name the leader epoch of the share-partition's leader. A read at a newer epoch than the stored
  one records it (a snapshot written with it) before answering, so a leader of an older epoch is fenced from then
  on: its writes get FENCED_LEADER_EPOCH, as its reads do (a deposed leader that still believes it leads).
- A write whose state epoch is not the stored one is FENCED_STATE_EPOCH: the state was reset (AlterShareGroupOffsets,
  DeleteShareGroupOffsets) since that leader read it; it must read again.
- A read of a share-partition never written answers state epoch 0 and start offset -1 (uninitialized): the leader
  chooses the start from share.auto.offset.reset and writes it.
- Records reach the log through the runtime's one write path. `states` follows the log in append order: a snapshot
  is taken into it when appended, not once replicated, and put back if its append fails (unless a later one
  replaced it meanwhile). So a reset decided while a leader's write is in flight builds on that write and lands
  after it, as replay will see them. The leader epoch a request brings is taken at once (`_leader_epochs`), so a
  fencing read is in force for the writes behind it.
- AlterShareGroupOffsets and DeleteShareGroupOffsets (`reset`, for an empty group) write a new snapshot per
  share-partition: the state epoch one higher than the stored one, no state batches, and the start offset given
  (alter) or UNINITIALIZED (delete: the next leader starts afresh from share.auto.offset.reset). Delete writes
  such a snapshot rather than a tombstone: a tombstone would forget the state epoch too, and a leader still holding
  the state it read at epoch 0 would then pass the state-epoch check and write its stale state back.
- DescribeShareGroupOffsets reads the stored start offset, leader epoch and how many records past the start the
  state batches hold as delivered for good (`delivery_complete_count`: acknowledged or archived), Kafka's
  ReadShareGroupStateSummary. The share-partitions of a group "with state" are those whose start offset is set.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from epoch_broker.broker.groups import records
from epoch_broker.broker.groups.group import Entry
from epoch_broker.broker.groups.records import ShareSnapshotKey
from epoch_broker.broker.groups.runtime import ShardRuntime
from epoch_broker.protocol.errors import ErrorCode, KafkaError

UNINITIALIZED = -1  # the start offset of a share-partition never written
ACKNOWLEDGED, ARCHIVED = 2, 4  # state batches' delivery states that are final (0 is available)


class StateBatch(NamedTuple):
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


class ShareState(NamedTuple):
    """What is stored of one share-partition."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]
    snapshot_epoch: int = 0


NOT_WRITTEN = ShareState(0, -1, UNINITIALIZED, ())


class ShareStateManager:
    def __init__(self, runtime: ShardRuntime) -> None:
        self.runtime = runtime
        self.states: dict[ShareSnapshotKey, ShareState] = {}
        self._leader_epochs: dict[ShareSnapshotKey, int] = {}  # the newest a request brought (fencing at once)

    # -- loading ---------------------------------------------------------------------------------------------

    def replay(self, key: ShareSnapshotKey, value: bytes | None) -> None:
        if value is None:
            self.states.pop(key, None)
            self._leader_epochs.pop(key, None)
            return
        decoded = records.decode_share_snapshot_value(value)
        self.states[key] = ShareState(
            decoded.state_epoch, decoded.leader_epoch, decoded.start_offset,
            tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                  for b in decoded.state_batches), decoded.snapshot_epoch)
        self._leader_epochs[key] = max(self._leader_epochs.get(key, -1), decoded.leader_epoch)

    # -- ReadShareGroupState, WriteShareGroupState -----------------------------------------------------------

    async def read(self, key: ShareSnapshotKey, leader_epoch: int) -> tuple[ErrorCode, ShareState]:
        """The stored state (NOT_WRITTEN if none), fencing leaders of older epochs from now on."""
        error = self._fence(key, leader_epoch)
        if error is not ErrorCode.NONE:
            return error, NOT_WRITTEN
        stored = self.states.get(key)
        if stored is None:
            return ErrorCode.NONE, NOT_WRITTEN
        if stored.leader_epoch < leader_epoch:
            try:
                stored = await self._store(key, stored._replace(leader_epoch=leader_epoch))
            except KafkaError as exc:
                return exc.code, NOT_WRITTEN
        return ErrorCode.NONE, stored

    async def write(self, key: ShareSnapshotKey, state: ShareState) -> ErrorCode:
        """Replace the stored state with `state` (its leader epoch and state epoch checked first)."""
        error = self._fence(key, state.leader_epoch)
        if error is not ErrorCode.NONE:
            return error
        if state.state_epoch != self.states.get(key, NOT_WRITTEN).state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        try:
            await self._store(key, state)
        except KafkaError as exc:
            return exc.code
        return ErrorCode.NONE

    def _fence(self, key: ShareSnapshotKey, leader_epoch: int) -> ErrorCode:
        if leader_epoch < self._leader_epochs.get(key, -1):
            return ErrorCode.FENCED_LEADER_EPOCH
        self._leader_epochs[key] = leader_epoch
        return ErrorCode.NONE

    async def _store(self, key: ShareSnapshotKey, state: ShareState) -> ShareState:
        stored = self._next(key, state)
        await self._append({key: stored})
        return stored

    def _next(self, key: ShareSnapshotKey, state: ShareState) -> ShareState:
        return state._replace(snapshot_epoch=(self.states.get(key, NOT_WRITTEN).snapshot_epoch + 1) & 0xFFFF)

    async def _append(self, snapshots: Mapping[ShareSnapshotKey, ShareState], before: Iterable[Entry] = ()) -> None:
        """Append `snapshots` in one batch (after the `before` entries) and take them into `states` at once (the
        module's rules); put the previous ones back if the append fails. Raises KafkaError."""
        previous = {key: self.states.get(key) for key in snapshots}
        self.states.update(snapshots)
        try:
            await self.runtime.append([*before, *((records.share_snapshot_key(key), _value(state))
                                                  for key, state in snapshots.items())])
        except KafkaError:
            for key, state in snapshots.items():
                if self.states.get(key) is state:  # not replaced by a later write meanwhile
                    if (old := previous[key]) is None:
                        del self.states[key]
                    else:
                        self.states[key] = old
            raise

    # -- AlterShareGroupOffsets, DeleteShareGroupOffsets, DescribeShareGroupOffsets -------------------------

    async def reset(self, starts: Mapping[ShareSnapshotKey, int], before: Iterable[Entry] = ()) -> None:
        """Reset these share-partitions to these start offsets (UNINITIALIZED: start afresh), one batch with the
        `before` entries: the state epoch one higher, so their leaders are fenced (FENCED_STATE_EPOCH) and read
        them again. The caller checked that the group is empty. Raises KafkaError."""
        snapshots = {}
        for key, start_offset in starts.items():
            stored = self.states.get(key, NOT_WRITTEN)
            snapshots[key] = self._next(key, ShareState(stored.state_epoch + 1, stored.leader_epoch, start_offset, ()))
        await self._append(snapshots, before)

    def initialized(self, group_id: str, topic_id: bytes | None = None) -> list[ShareSnapshotKey]:
        """The group's share-partitions whose start offset is set (of that topic only, when given)."""
        return sorted((key for key, state in self.of_group(group_id).items()
                       if state.start_offset != UNINITIALIZED and topic_id in (None, key.topic_id)),
                      key=lambda key: (key.topic_id, key.partition))

    # -- the group's share state as a whole -----------------------------------------------------------------

    def of_group(self, group_id: str) -> dict[ShareSnapshotKey, ShareState]:
        return {key: state for key, state in self.states.items() if key.group == group_id}

    def tombstones(self, group_id: str, topic_ids: Iterable[bytes] | None = None) -> list[Entry]:
        """The tombstones of the group's share state (of those topics only, when given)."""
        wanted = None if topic_ids is None else set(topic_ids)
        return [(records.share_snapshot_key(key), None) for key in self.of_group(group_id)
                if wanted is None or key.topic_id in wanted]

    def forget(self, group_id: str, topic_ids: Iterable[bytes] | None = None) -> None:
        """The tombstones of `tombstones(group_id, topic_ids)` are replicated."""
        wanted = None if topic_ids is None else set(topic_ids)
        for key in [k for k in self.of_group(group_id) if wanted is None or k.topic_id in wanted]:
            self.replay(key, None)


def delivery_complete_count(state: ShareState) -> int:
    """How many records from the start offset on the state batches hold as acknowledged or archived: the part of
    the share-partition past its start that is done (Kafka's deliveryCompleteCount; the lag leaves it out)."""
    return sum(b.last_offset - max(b.first_offset, state.start_offset) + 1
               for b in state.state_batches
               if b.delivery_state in (ACKNOWLEDGED, ARCHIVED) and b.last_offset >= state.start_offset)


def _value(state: ShareState) -> bytes:
    value = records.SHARE_SNAPSHOT_VALUE
    return records.share_snapshot_value(value.cls(
        snapshot_epoch=state.snapshot_epoch, state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
        start_offset=state.start_offset,
        state_batches=[value.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                        delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                       for b in state.state_batches]))
