"""Committed offsets of one `__consumer_offsets` partition's groups, and the pending transactional ones (Kafka's
OffsetMetadataManager). Offsets are kept per group id, apart from the groups: a group's type never matters here
but through the Group interface (`group.py`).

Rules:
- OffsetCommit and TxnOffsetCommit (Kafka's storeOffsets): the group validates the member and its generation or
  epoch; a group id with no group gets a simple one (an Empty classic group), as Kafka creates it for a consumer
  without group management or a transactional producer, unless the commit names a generation (ILLEGAL_GENERATION:
  a group that is gone here). A TxnOffsetCommit needs a group id (INVALID_GROUP_ID; OffsetCommit takes the empty
  one, as Kafka). Per entry: UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE (offset.metadata.max.bytes).
- Commits apply in memory after their append is replicated; a failed append answers its error and keeps the
  previous offsets. Each offset remembers where its batch is in the log: the later append wins.
- Transactions (KIP-98): a TxnOffsetCommit appends its offsets in one transactional batch of the producer; they are
  pending per (group, producer id) from the start of the append (an abort marker meanwhile drops them) until the
  producer's marker on this partition: `complete_txn`, called once the marker is replicated, and loading at the
  marker alike. A commit makes them committed unless a plain commit of that partition was appended after them
  (Kafka's CommitRecordMetadataAndOffset order); an abort drops them. OffsetFetch never shows a pending offset,
  and with `require_stable` answers UNSTABLE_OFFSET_COMMIT for its partition. Pending offsets keep their group from
  being removed as empty and never expire; deleting an offset (OffsetDelete, a deleted topic, DeleteGroups) deletes
  the pending ones with it, and loading does the same at its tombstone, so nothing comes back after a restart.
- KIP-232, by deleting a topic's offsets when the topic is deleted: each offset remembers the id of its topic
  (from the metadata when committed or loaded); a RemoveTopicRecord tombstones every offset with that id, and
  loading drops (with tombstones) offsets whose topic no longer exists, so a re-created topic (new id, no offsets)
  never resurrects old positions, across restarts too.
- Expiry (KIP-211, `offsets.retention.minutes`): an offset expires once the retention passed since the timestamp
  its group's `offset_expiration_condition` gives, for a topic the group is not subscribed to, unless a pending
  transactional offset may still replace it.
- OffsetDelete refuses the topics the group is subscribed to (GROUP_SUBSCRIBED_TO_TOPIC).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from epoch_broker.broker.groups import records
from epoch_broker.broker.groups.group import Group
from epoch_broker.broker.groups.runtime import ShardRuntime
from epoch_broker.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from epoch_broker.broker.groups.group_metadata_manager import GroupMetadataManager

log = logging.getLogger(__name__)

OFFSET_METADATA_MAX_BYTES = 4096  # offset.metadata.max.bytes (Kafka's default; not exposed)
NO_OFFSET = -1
NO_PRODUCER_ID = -1
LATEST_API_VERSION = 0x7FFF  # a caller that names no request version: the newest version's rules

OffsetKey = tuple[str, int]  # (topic, partition)


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


@dataclass(frozen=True, slots=True)
class OffsetToCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error: ErrorCode = ErrorCode.NONE


class GroupOffsets:
    """One group id's committed offsets and its transactional ones pending per producer id."""

    __slots__ = ("offsets", "pending_txn_offsets")

    def __init__(self) -> None:
        self.offsets: dict[OffsetKey, CommittedOffset] = {}
        # Transactional offsets by producer id, until the transaction's marker (never an empty inner dict).
        self.pending_txn_offsets: dict[int, dict[OffsetKey, CommittedOffset]] = {}

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


class OffsetMetadataManager:
    def __init__(self, runtime: ShardRuntime, groups: GroupMetadataManager) -> None:
        self.runtime = runtime
        self.groups = groups
        self.offsets: dict[str, GroupOffsets] = {}  # group id -> its offsets
        # producer id -> the group ids with its pending offsets here, for `complete_txn`
        self._open_txns: dict[int, set[str]] = {}

    def offsets_of(self, group_id: str) -> GroupOffsets | None:
        return self.offsets.get(group_id)

    def has_offsets(self, group_id: str) -> bool:
        offsets = self.offsets.get(group_id)
        return offsets is not None and offsets.has_offsets()

    # -- OffsetCommit, TxnOffsetCommit -----------------------------------------------------------------------

    async def commit_offsets(
        self,
        group_id: str,
        generation_id_or_member_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: list[OffsetToCommit],
        producer: tuple[int, int] | None,
        api_version: int = LATEST_API_VERSION,
    ) -> list[ErrorCode]:
        """Kafka's storeOffsets: plain commits when `producer` is None, else transactional ones of (id, epoch).
        One error per entry of `offsets`, in order."""
        error = self._validate_commit(group_id, generation_id_or_member_epoch, member_id, group_instance_id,
                                      api_version, transactional=producer is not None)
        if error is not ErrorCode.NONE:
            return [error] * len(offsets)
        timestamp = self.runtime.now_ms()
        errors: list[ErrorCode] = []
        accepted: list[tuple[OffsetKey, CommittedOffset]] = []
        for o in offsets:
            state = self.runtime.topic_partition(o.topic, o.partition)
            if state is None:
                errors.append(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif o.metadata is not None and len(o.metadata.encode()) > OFFSET_METADATA_MAX_BYTES:
                errors.append(ErrorCode.OFFSET_METADATA_TOO_LARGE)
            else:
                errors.append(ErrorCode.NONE)
                committed = CommittedOffset(o.offset, o.leader_epoch, o.metadata or "", timestamp, state.topic_id)
                accepted.append(((o.topic, o.partition), committed))
        if not accepted:
            return errors
        entries = [(records.offset_key(group_id, topic, partition),
                    records.offset_value(c.offset, c.leader_epoch, c.metadata, c.commit_timestamp))
                   for (topic, partition), c in accepted]
        # The group's offsets as they are now: a group deleted during the append takes them along.
        group_offsets = self.offsets.setdefault(group_id, GroupOffsets())
        if producer is not None:
            # Pending from the start of the append, as in Kafka: an abort marker written meanwhile drops them.
            replaced = group_offsets.stage_txn_offsets(producer[0], accepted)
            self._open_txns.setdefault(producer[0], set()).add(group_id)
        try:
            base_offset = await self.runtime.append(entries, producer)
        except KafkaError as exc:
            log.warning("committing offsets of group %s failed: %s", group_id, exc)
            if producer is not None:
                group_offsets.unstage_txn_offsets(producer[0], accepted, replaced)
            return [exc.code if e is ErrorCode.NONE else e for e in errors]
        for key, committed in accepted:
            committed.log_offset = base_offset
            if producer is None:
                group_offsets.store_offset(key, committed)
        return errors

    def _validate_commit(self, group_id: str, generation_id_or_member_epoch: int, member_id: str,
                         group_instance_id: str | None, api_version: int, *, transactional: bool) -> ErrorCode:
        group: Group | None = self.groups.group(group_id)
        if group is None:
            if generation_id_or_member_epoch >= 0 and not transactional:  # a generation of a group gone here
                return ErrorCode.ILLEGAL_GENERATION
            group = self.groups.classic_group(group_id, create_if_missing=True)
            assert group is not None
        error = group.validate_offset_commit(member_id, group_instance_id, generation_id_or_member_epoch,
                                             api_version, transactional)
        if error is ErrorCode.NONE and not transactional:
            self.groups.on_offset_commit(group, member_id)
        return error

    def complete_txn(self, producer_id: int, commit: bool) -> None:
        """A commit (`commit`) or abort marker of `producer_id` is appended and replicated on this partition (or
        read while loading it): the producer's pending offsets here become committed, or are dropped."""
        for group_id in self._open_txns.pop(producer_id, ()):
            group_offsets = self.offsets.get(group_id)
            if group_offsets is not None:  # not deleted meanwhile
                group_offsets.complete_txn(producer_id, commit)

    # -- OffsetFetch -----------------------------------------------------------------------------------------

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None, require_stable: bool = False,
                      member_id: str | None = None, member_epoch: int = -1) -> tuple[ErrorCode, list[FetchedOffset]]:
        """Committed offsets of the given partitions (all the group's when `topics` is None); with
        `require_stable`, a partition with a pending transactional offset answers UNSTABLE_OFFSET_COMMIT."""
        group = self.groups.group(group_id)
        if group is not None:
            error = group.validate_offset_fetch(member_id, member_epoch)
            if error is not ErrorCode.NONE:
                return error, []
        group_offsets = self.offsets.get(group_id)
        committed = {} if group_offsets is None else group_offsets.offsets
        if topics is None:
            wanted = sorted(committed)
        else:
            wanted = [(topic, p) for topic, partitions in topics for p in partitions]
        answer = []
        for topic, partition in wanted:
            c = committed.get((topic, partition))
            if require_stable and group_offsets is not None and group_offsets.has_pending_offset((topic, partition)):
                answer.append(FetchedOffset(topic, partition, NO_OFFSET, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT))
            elif c is None:
                answer.append(FetchedOffset(topic, partition, NO_OFFSET, -1, ""))
            else:
                answer.append(FetchedOffset(topic, partition, c.offset, c.leader_epoch, c.metadata))
        return ErrorCode.NONE, answer

    # -- OffsetDelete, deleted topics, expiry, deleted groups -----------------------------------------------

    async def delete_offsets(self, group_id: str, partitions: list[OffsetKey]) -> tuple[ErrorCode, list[ErrorCode]]:
        """OffsetDelete: refused for topics the group's members subscribe to."""
        group = self.groups.group(group_id)
        error = ErrorCode.GROUP_ID_NOT_FOUND if group is None else group.validate_offset_delete()
        if error is not ErrorCode.NONE:
            return error, []
        assert group is not None
        errors = [ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if group.is_subscribed_to_topic(topic) else ErrorCode.NONE
                  for topic, _ in partitions]
        await self.drop_offsets(group_id, [k for k, e in zip(partitions, errors, strict=True) if e is ErrorCode.NONE])
        return ErrorCode.NONE, errors

    def drop_offsets(self, group_id: str, keys: Iterable[OffsetKey]) -> asyncio.Future[Any]:
        """Drop offsets, committed and pending, with their tombstones (deleted topic, OffsetDelete, expiry)."""
        group_offsets = self.offsets.get(group_id)
        dropped = [] if group_offsets is None else group_offsets.drop_offsets(keys)
        return self.runtime.append([(records.offset_key(group_id, t, p), None) for t, p in dropped])

    def drop_deleted_topics(self, topic_ids: set[bytes | None]) -> None:
        """KIP-232: tombstone every offset (committed or pending) of these topic ids, a write per group."""
        for group_id, group_offsets in list(self.offsets.items()):
            self.runtime.spawn(self.drop_offsets(
                group_id, [k for k, c in group_offsets.all_offsets() if c.topic_id in topic_ids]))

    def expired_offsets(self, group: Group, deadline_ms: int) -> list[OffsetKey]:
        """The group's offsets whose retention ended at `deadline_ms` (now less offsets.retention.minutes)."""
        condition = group.offset_expiration_condition()
        group_offsets = self.offsets.get(group.group_id)
        if condition is None or group_offsets is None:
            return []
        # A transaction's pending offset may still replace it; its tombstone would drop that one too.
        return [k for k, c in group_offsets.offsets.items()
                if not group.is_subscribed_to_topic(k[0]) and condition(c.commit_timestamp) <= deadline_ms
                and not group_offsets.has_pending_offset(k)]

    def group_tombstones(self, group_id: str) -> list[tuple[bytes, bytes | None]]:
        """The tombstones of every offset of the group, committed or pending (DeleteGroups, expiry)."""
        group_offsets = self.offsets.get(group_id)
        offsets = () if group_offsets is None else group_offsets.all_offsets()
        keys = dict.fromkeys(key for key, _ in offsets)  # a partition both committed and pending: one tombstone
        return [(records.offset_key(group_id, t, p), None) for t, p in keys]

    def delete_group(self, group_id: str) -> None:
        """The group's tombstones are replicated: forget its offsets."""
        self.offsets.pop(group_id, None)

    # -- loading ---------------------------------------------------------------------------------------------

    def replay(self, key: records.OffsetKey, value: bytes | None, log_offset: int, producer_id: int) -> None:
        """An OffsetCommit record read while loading: a tombstone (never transactional: deletions are written
        outside transactions) drops committed and pending offsets; a transactional one is pending until its
        producer's marker (`complete_txn`)."""
        group_offsets = self.offsets.setdefault(key.group, GroupOffsets())
        if value is None:
            group_offsets.drop_offsets([(key.topic, key.partition)])
            return
        decoded = records.decode_offset_value(value)
        committed = CommittedOffset(decoded.offset, decoded.leader_epoch, decoded.metadata, decoded.commit_timestamp,
                                    log_offset=log_offset)
        if producer_id != NO_PRODUCER_ID:
            group_offsets.stage_txn_offsets(producer_id, [((key.topic, key.partition), committed)])
            self._open_txns.setdefault(producer_id, set()).add(key.group)
        else:
            group_offsets.store_offset((key.topic, key.partition), committed)

    def on_loaded(self) -> None:
        """The partition is replayed: offsets forget the groups with none left, bind their topics' ids from the
        metadata as it is now (a topic deleted meanwhile counts), and those of a topic that is gone (its
        deletion's tombstones were lost in a crash) are deleted."""
        for group_id, group_offsets in list(self.offsets.items()):
            if not group_offsets.has_offsets():
                del self.offsets[group_id]
                continue
            for (topic, _), committed in group_offsets.all_offsets():
                committed.topic_id = self.runtime.topic_id(topic)
            self.runtime.spawn(self.drop_offsets(
                group_id, [k for k, c in group_offsets.all_offsets() if c.topic_id is None]))
