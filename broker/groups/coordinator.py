"""The classic consumer group coordinator: membership, rebalances and committed offsets (KIP-320, KIP-232).

Rules:
- A group lives on the broker that leads its `__consumer_offsets` partition, `abs(java hashCode(group_id)) %
  offsets.topic.num.partitions` as Kafka computes it; `owned` holds the partitions led and loaded here.
- All state is owned by the event loop and mutated between awaits. JoinGroup and SyncGroup park a future on
  the member until the phase completes; every deadline is a loop timer (session expiry per member, the join
  phase per group, the initial rebalance delay), never a polling loop.
- A join phase completes as soon as every known member has rejoined and no MEMBER_ID_REQUIRED member is
  outstanding, else at the rebalance timeout, which removes the dynamic members that did not rejoin. Only
  the first join phase of an empty group waits `group.initial.rebalance.delay.ms` (extended while new
  members keep arriving, up to the rebalance timeout), as Kafka does, so a group forms in one generation.
- A member parked in JoinGroup or SyncGroup is kept alive; its session timer restarts with the answer.
- `__consumer_offsets` is created lazily, as in Kafka: by the first FindCoordinator for a group key, or the first
  JoinGroup/OffsetCommit, never at broker start (`ensure_offsets_topic`). Once it exists, `start()` replays the
  partitions led here in background tasks, so the broker listens at once; a group whose partition is still
  loading gets COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
- Durability: every commit, group metadata change and deletion is appended to the group's `__consumer_offsets`
  partition (formats in `broker/groups/records.py`) and replicated before it is answered; loading replays the
  partitions, so offsets and groups survive a restart. Commits apply in memory after their append (transactional
  ones are pending from its start, so an abort meanwhile drops them); deletions apply first (DeleteGroups marks
  the group Dead while its tombstones are written, so nobody joins it).
  Writes that no request waits for (a group turned empty, a deleted topic, expiry) run as tracked tasks.
- KIP-232, by deleting a topic's offsets when the topic is deleted: each offset remembers the id of its topic
  (from the metadata when committed or loaded); a RemoveTopicRecord tombstones every offset with that id, and
  loading drops (with tombstones) offsets whose topic no longer exists. A re-created topic (new id, no
  offsets) therefore never resurrects old positions, across restarts too.
- Offsets expire per `offsets.retention.minutes` (KIP-211): in an empty group, that long after the group
  became empty; in a simple group (commits only), after the commit; in a consumer group, for topics no
  member subscribes to. A group left with neither members nor offsets is removed with a tombstone.
- Transactions (KIP-98): a TxnOffsetCommit appends its offsets in one transactional batch of the producer, and
  they stay pending per (group, producer id) until the producer's marker on the group's partition: `complete_txn`,
  which the broker calls once the marker is replicated, and loading at the marker alike. A commit makes them
  committed unless a plain commit of that partition was appended after them (log offsets order them, as Kafka's
  CommitRecordMetadataAndOffset); an abort drops them. OffsetFetch never shows a pending offset, and with
  `require_stable` answers UNSTABLE_OFFSET_COMMIT for its partition. Pending offsets keep their group from being
  removed as empty and never expire; deleting an offset (OffsetDelete, a deleted topic, DeleteGroups) deletes the
  pending ones with it, and loading does the same at its tombstone, so nothing comes back after a restart.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from epoch_broker.broker.groups import records
from epoch_broker.broker.groups.classic_group import (
    ClassicGroup,
    ClassicGroupMember,
    ClassicGroupState,
    CommittedOffset,
    OffsetKey,
)
from epoch_broker.broker.metadata.records import RemoveTopicRecord
from epoch_broker.protocol.errors import ErrorCode, KafkaError
from epoch_broker.protocol.records import build_batch

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": "104857600"}
# Kafka's defaults for settings this broker does not expose.
OFFSET_METADATA_MAX_BYTES = 4096  # offset.metadata.max.bytes
RETENTION_CHECK_INTERVAL_S = 600.0  # offsets.retention.check.interval.ms
LOAD_YIELD_RECORDS = 1000  # loading yields to the event loop this often

NO_OFFSET = -1


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, wrapping at 32 bits."""
    h = 0
    encoded = text.encode("utf-16-be")
    for i in range(0, len(encoded), 2):
        h = (31 * h + (encoded[i] << 8 | encoded[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@functools.lru_cache(maxsize=4096)  # every OffsetCommit, Heartbeat... asks; the hash loops over the id in Python
def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's `Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount` (Utils.abs(MIN_VALUE) = 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def leader_location(broker: Any, topic: str, partition: int, listener: str) -> tuple[ErrorCode, int, str, int]:
    """(error, node id, host, port) of the leader of a coordinator's internal `topic`-`partition`, as clients of
    `listener` reach it (COORDINATOR_NOT_AVAILABLE while it has no reachable leader). `broker` is app.Broker."""
    state = broker.metadata.partition(topic, partition)
    if state is None or state.leader < 0:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    if state.leader == broker.node_id:
        config = broker.config
        endpoint = config.advertised_endpoints().get(listener, config.advertised)
        return ErrorCode.NONE, broker.node_id, endpoint.host, endpoint.port
    registration = broker.metadata.brokers.get(state.leader)
    if registration is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    return (ErrorCode.NONE, state.leader, *registration.endpoint(listener))


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    # (member_id, group_instance_id, metadata), only for the leader.
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False  # KIP-814: a static leader back in a Stable group keeps the assignment it made


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class OffsetToCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(slots=True)
class _LoadBatch:
    """The `__consumer_offsets` loads running together (from the first start to the last end): counted for
    the one INFO line that says they are done (50 partitions at a group's first use would be 50 lines)."""

    started: float  # loop time
    partitions: int = 0
    groups: int = 0
    records: int = 0
    skipped: int = 0  # leadership moved while loading
    failed: int = 0

    def unfinished(self) -> str:
        return "".join(f", {n} {what}" for n, what in ((self.skipped, "led elsewhere meanwhile"),
                                                       (self.failed, "failed")) if n)


class GroupCoordinator:
    def __init__(self, broker: Any) -> None:  # broker.app.Broker: typed loosely to avoid an import cycle
        self.broker = broker
        config = broker.config
        self.num_partitions: int = config.offsets_topic_num_partitions
        self.initial_delay_ms: int = config.group_initial_rebalance_delay_ms
        # group.min/max.session.timeout.ms: a JoinGroup's session timeout outside them is INVALID_SESSION_TIMEOUT
        self.session_timeout_bounds_ms = (config.group_min_session_timeout_ms, config.group_max_session_timeout_ms)
        self.retention_ms: int = config.offsets_retention_minutes * 60_000
        self.groups: dict[str, ClassicGroup] = {}
        self.owned: set[int] = set()
        self._retention_timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task] = set()
        self._loading: dict[int, asyncio.Task] = {}  # partitions being replayed (COORDINATOR_LOAD_IN_PROGRESS)
        self._load_batch: _LoadBatch | None = None  # the loads running together: one INFO line when all are done
        # (partition, producer id) -> the groups there with the producer's pending offsets, for `complete_txn`
        self._txn_groups: dict[tuple[int, int], set[str]] = {}

    def now_ms(self) -> int:
        """The broker's wall clock (fault.clock.offset.ms moves it): commit and group-state times, expiry."""
        return self.broker.faults.wall_clock_ms()

    # -- lifecycle ------------------------------------------------------------------------------------------

    async def start(self) -> None:
        self.open()

    def open(self) -> None:
        """Start following the metadata; if `__consumer_offsets` exists, load the partitions led here in the
        background (returns without waiting for them). Never creates the topic. Needs a running event loop."""
        self.broker.metadata_subscribers.append(self._on_metadata)
        self._schedule_retention_check()
        self._load_led()

    async def stop(self) -> None:
        if self._retention_timer is not None:
            self._retention_timer.cancel()
        for task in list(self._loading.values()):
            task.cancel()
        if self._loading:
            await asyncio.gather(*self._loading.values(), return_exceptions=True)
        for partition in list(self.owned):
            self.unload(partition)
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _topic_exists(self) -> bool:
        return OFFSETS_TOPIC in self.broker.metadata.topics_by_name

    async def ensure_offsets_topic(self) -> None:
        """Create `__consumer_offsets` unless it exists (first FindCoordinator or group write), and return once
        the partitions of a topic created here are loaded (they are empty: immediate). Raises KafkaError."""
        if self._topic_exists():
            return
        await self.broker.replica_manager.ensure_internal_topic(
            OFFSETS_TOPIC, self.num_partitions, self.broker.config.offsets_topic_replication_factor,
            OFFSETS_TOPIC_CONFIGS)
        self._load_led()
        await self.wait_loaded()

    async def wait_loaded(self) -> None:
        """Return once no partition is loading."""
        while self._loading:
            await asyncio.gather(*list(self._loading.values()), return_exceptions=True)

    def _load_led(self) -> None:
        """Start loading every partition led here that is neither loaded nor loading."""
        if not self._topic_exists():
            return
        loop = asyncio.get_running_loop()
        for partition in range(self.num_partitions):
            if partition not in self.owned and partition not in self._loading and self._leads(partition):
                if not self._loading:
                    self._load_batch = _LoadBatch(loop.time())
                self._loading[partition] = loop.create_task(self._load_in_background(partition))

    async def _load_in_background(self, partition: int) -> None:
        batch = self._load_batch
        assert batch is not None
        try:
            loaded = await self.load(partition)
        except Exception:
            log.exception("loading __consumer_offsets-%d failed", partition)
            batch.failed += 1
        else:
            if loaded is None:
                batch.skipped += 1
            else:
                batch.partitions += 1
                batch.records += loaded[0]
                batch.groups += loaded[1]
        finally:
            self._loading.pop(partition, None)
        if not self._loading:  # the last of the loads running together (not reached when stop() cancels them)
            self._load_batch = None
            log.info("group coordinator loaded %d __consumer_offsets partitions: %d groups, %d records in %.0f ms%s",
                     batch.partitions, batch.groups, batch.records,
                     (asyncio.get_running_loop().time() - batch.started) * 1000, batch.unfinished())

    async def load(self, partition: int) -> tuple[int, int] | None:
        """Replay one `__consumer_offsets` partition into groups (later records win, tombstones delete).
        Returns (records read, groups loaded), or None if leadership moved meanwhile (nothing loaded).

        A transactional offset is pending until its producer's marker in the partition commits or drops it, as
        `complete_txn` does live; one still pending at the end waits for the marker to come.

        Yields to the event loop every LOAD_YIELD_RECORDS records, so a large partition does not stall the
        broker; the groups appear at once at the end (no await in between), when the partition becomes owned.
        """
        metadata: dict[str, Any] = {}
        loaded: dict[str, ClassicGroup] = {}  # the groups' offsets, committed and pending
        open_txns: dict[int, set[str]] = {}  # producer id -> groups with its pending offsets
        count = 0
        for record in self.broker.replica_manager.read_internal(OFFSETS_TOPIC, partition, 0):
            if record.marker is not None:
                for group_id in open_txns.pop(record.producer_id, ()):
                    loaded[group_id].complete_txn(record.producer_id, record.marker.commit)
                continue
            count += 1
            if count % LOAD_YIELD_RECORDS == 0:
                await asyncio.sleep(0)
            key = records.decode_key(record.key)
            if isinstance(key, records.GroupKey):
                metadata[key.group] = None if record.value is None else records.decode_group_value(record.value)
                continue
            group = loaded.get(key.group)
            if group is None:
                group = loaded[key.group] = ClassicGroup(key.group, partition)
            if record.value is None:  # never transactional: deletions are written outside transactions
                group.drop_offsets([(key.topic, key.partition)])
                continue
            value = records.decode_offset_value(record.value)
            committed = CommittedOffset(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
                                        log_offset=record.offset)
            if record.transactional:
                group.stage_txn_offsets(record.producer_id, [((key.topic, key.partition), committed)])
                open_txns.setdefault(record.producer_id, set()).add(key.group)
            else:
                group.store_offset((key.topic, key.partition), committed)
        if not self._leads(partition):  # leadership moved (or the topic went) while loading
            return None
        for group_id in metadata.keys() | loaded.keys():
            value = metadata.get(group_id)
            group = loaded.get(group_id) or ClassicGroup(group_id, partition)
            if value is None and not group.has_offsets():
                continue
            if value is not None:
                self._restore(group, value)
            # Topic ids from the metadata as it is now, after the last await (a topic deleted meanwhile counts).
            for (topic, _), committed in group.all_offsets():
                committed.topic_id = self._topic_id(topic)
            self.groups[group_id] = group
            for producer_id in group.pending_txn_offsets:
                self._track_txn(group, producer_id)
            # Offsets of a topic that is gone (its deletion's tombstones were lost in a crash).
            self._spawn(self._delete_offsets(group, [k for k, c in group.all_offsets() if c.topic_id is None]))
        self.owned.add(partition)
        loaded_count = sum(1 for g in self.groups.values() if g.partition == partition)
        log.debug("loaded __consumer_offsets-%d: %d records, %d groups", partition, count, loaded_count)
        return count, loaded_count

    def _restore(self, group: ClassicGroup, value: Any) -> None:
        """A group as its last metadata record left it: Stable with its members (who keep heartbeating
        their generation after a coordinator restart), or Empty."""
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.state_timestamp = value.current_state_timestamp
        for m in value.members:
            member = ClassicGroupMember(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout,
                m.session_timeout, group.protocol_type or "", [(group.protocol_name or "", bytes(m.subscription))],
                bytes(m.assignment),
            )
            group.add(member)
            self._arm_session(group, member)
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        group.new_member_joined = False
        group.state = ClassicGroupState.STABLE if group.members else ClassicGroupState.EMPTY

    def unload(self, partition: int) -> None:
        """Stop coordinating the groups of a partition (shutdown, or leadership moved away)."""
        self.owned.discard(partition)
        for group in [g for g in self.groups.values() if g.partition == partition]:
            if group.join_timer is not None:
                group.join_timer.cancel()
            for timer in group.pending_members.values():
                timer.cancel()
            for member in group.members.values():
                self._cancel_session(member)
                _resolve(member.join_waiter, JoinResult(ErrorCode.NOT_COORDINATOR, member.member_id))
                _resolve(member.sync_waiter, SyncResult(ErrorCode.NOT_COORDINATOR))
            del self.groups[group.group_id]
        for key in [k for k in self._txn_groups if k[0] == partition]:
            del self._txn_groups[key]

    # -- broker seams ---------------------------------------------------------------------------------------

    def _leads(self, partition: int) -> bool:
        state = self.broker.metadata.partition(OFFSETS_TOPIC, partition)
        return state is not None and state.leader == self.broker.node_id

    def _topic_id(self, topic: str) -> bytes | None:
        state = self.broker.metadata.topics_by_name.get(topic)
        return None if state is None else state.topic_id

    def _on_metadata(self, metadata_records: list[Any]) -> None:
        """A deleted topic takes its committed offsets with it (KIP-232); a partition newly led here loads, one
        led elsewhere now unloads (its members get NOT_COORDINATOR and find the new coordinator)."""
        for partition in [p for p in self.owned if not self._leads(p)]:
            log.info("__consumer_offsets-%d is led elsewhere now: its groups unload", partition)
            self.unload(partition)
        self._load_led()
        deleted = {r.topic_id for r in metadata_records if isinstance(r, RemoveTopicRecord)}
        if deleted:
            for group in list(self.groups.values()):
                self._spawn(self._delete_offsets(group, [k for k, c in group.all_offsets() if c.topic_id in deleted]))

    def coordinator_error(self, group_id: str) -> ErrorCode:
        partition = partition_for(group_id, self.num_partitions)
        if partition in self.owned:
            return ErrorCode.NONE
        if partition in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if not self._topic_exists():  # nobody asked for a coordinator yet: as Kafka before the topic exists
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NOT_COORDINATOR

    def find_coordinator(self, group_id: str, listener: str) -> tuple[ErrorCode, int, str, int]:
        """(error, node id, host, port) of the leader of the group's `__consumer_offsets` partition, as clients
        of `listener` reach it."""
        return leader_location(self.broker, OFFSETS_TOPIC, partition_for(group_id, self.num_partitions), listener)

    def _append(self, partition: int, entries: Sequence[tuple[bytes, bytes | None]],
                producer: tuple[int, int] | None = None) -> asyncio.Future[Any]:
        """Append records (key, value or None for a tombstone) atomically, in one batch; the future completes with
        its base offset once they are replicated, or raises KafkaError. With a `producer` (id, epoch), the batch is
        that producer's transactional batch, without a sequence, as Kafka writes a TxnOffsetCommit (the partition
        refuses a stale epoch with INVALID_PRODUCER_EPOCH).

        The append is started here, as a task: `append_internal` appends in its first step and tasks start in
        creation order, so records land in the order of these calls, whoever awaits them (a write nobody waits
        for, such as a group turning empty, still precedes a later tombstone of the same group).
        """
        loop = asyncio.get_running_loop()
        if not entries:
            done = loop.create_future()
            done.set_result(None)
            return done
        timestamp = self.now_ms()
        producer_id, producer_epoch = producer or (-1, -1)
        batch = build_batch([(key, value, (), timestamp) for key, value in entries], producer_id=producer_id,
                            producer_epoch=producer_epoch, is_transactional=producer is not None)
        task = loop.create_task(self.broker.replica_manager.append_internal(OFFSETS_TOPIC, partition, batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _spawn(self, write: Awaitable[Any]) -> None:
        """A write that no request waits for: logged if it fails; `stop()` waits for it."""
        task = asyncio.ensure_future(write)
        self._tasks.add(task)
        task.add_done_callback(self._write_done)

    def _write_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("__consumer_offsets write failed: %s", task.exception())

    def _store_group(self, group: ClassicGroup) -> asyncio.Future[Any]:
        """Write the group's metadata record (Kafka's GroupMetadataValue v3)."""
        cls = records.GROUP_METADATA_VALUE
        value = cls.cls(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader=group.leader_id if group.members else None,
            current_state_timestamp=group.state_timestamp,
            members=[
                cls.MemberMetadata(
                    member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                    client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
                    session_timeout=m.session_timeout_ms, subscription=m.metadata(group.protocol_name),
                    assignment=m.assignment,
                )
                for m in group.members.values()
            ],
        )
        return self._append(group.partition, [(records.group_key(group.group_id), records.group_value(value))])

    # -- JoinGroup ------------------------------------------------------------------------------------------

    async def join_group(
        self,
        *,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        client_id: str,
        client_host: str,
        require_known_member_id: bool,
        skip_assignment_supported: bool = False,
    ) -> JoinResult:
        """`skip_assignment_supported`: JoinGroup v9+ (KIP-814), whose clients keep a Stable group's assignment
        when their static leader rejoins."""
        try:
            await self.ensure_offsets_topic()
        except KafkaError:
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
        error = self.coordinator_error(group_id)
        if error is ErrorCode.NONE and not group_id:
            error = ErrorCode.INVALID_GROUP_ID
        low, high = self.session_timeout_bounds_ms
        if error is ErrorCode.NONE and not low <= session_timeout_ms <= high:
            error = ErrorCode.INVALID_SESSION_TIMEOUT
        group = self.groups.get(group_id)
        if error is ErrorCode.NONE and group is None:
            if member_id:  # a member id from a group that no longer exists here
                error = ErrorCode.UNKNOWN_MEMBER_ID
            else:
                group = self.groups[group_id] = ClassicGroup(group_id, partition_for(group_id, self.num_partitions),
                                                      state_timestamp=self.now_ms())
        if error is not ErrorCode.NONE:
            return JoinResult(error, member_id)
        assert group is not None
        if group.state is ClassicGroupState.DEAD:
            # Deleted while this request was on its way: the client rediscovers the coordinator.
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
        if rebalance_timeout_ms < 0:  # JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout
            rebalance_timeout_ms = session_timeout_ms
        if not group.supports(protocol_type, protocols):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        member = ClassicGroupMember("", group_instance_id, client_id, client_host, rebalance_timeout_ms,
                                    session_timeout_ms, protocol_type, protocols)
        if member_id:
            outcome = self._join_known(group, member_id, member)
        else:
            outcome = self._join_new(group, member, require_known_member_id, skip_assignment_supported)
        return await outcome if isinstance(outcome, asyncio.Future) else outcome

    def _join_new(self, group: ClassicGroup, joining: ClassicGroupMember, require_known_member_id: bool,
                  skip_assignment_supported: bool) -> JoinResult | asyncio.Future:
        joining.member_id = f"{joining.group_instance_id or joining.client_id}-{uuid.uuid4()}"
        if joining.group_instance_id is not None:
            # Static members skip the MEMBER_ID_REQUIRED round trip (KIP-345).
            old_id = group.static_members.get(joining.group_instance_id)
            if old_id is not None:
                return self._replace_static(group, group.members[old_id], joining, skip_assignment_supported)
        elif require_known_member_id:
            # KIP-394 (v4+ only: older clients cannot handle it): hand out the id, count it as joining.
            timer = asyncio.get_running_loop().call_later(
                joining.session_timeout_ms / 1000, self._expire_pending, group, joining.member_id
            )
            group.pending_members[joining.member_id] = timer
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, joining.member_id)
        return self._add_and_rebalance(group, joining)

    def _join_known(self, group: ClassicGroup, member_id: str,
                    joining: ClassicGroupMember) -> JoinResult | asyncio.Future:
        joining.member_id = member_id
        pending = group.pending_members.pop(member_id, None)
        if pending is not None:
            pending.cancel()
            return self._add_and_rebalance(group, joining)
        if group.is_fenced(member_id, joining.group_instance_id):
            return JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id)
        member = group.members.get(member_id)
        if member is None or group.state in (ClassicGroupState.EMPTY, ClassicGroupState.DEAD):
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        unchanged = member.same_protocols(joining.protocols)
        if group.state is ClassicGroupState.COMPLETING_REBALANCE and unchanged:
            # A retried JoinGroup of this generation (its answer was lost): answer it again.
            return self._join_result(group, member)
        if group.state is ClassicGroupState.STABLE and unchanged and member_id != group.leader_id:
            # A follower rejoining with nothing new: no rebalance (the leader's rejoin does trigger one).
            return self._join_result(group, member)
        member.protocols = joining.protocols
        member.session_timeout_ms = joining.session_timeout_ms
        member.rebalance_timeout_ms = joining.rebalance_timeout_ms
        member.client_id, member.client_host = joining.client_id, joining.client_host
        return self._join_and_rebalance(group, member)

    def _replace_static(self, group: ClassicGroup, old: ClassicGroupMember, joining: ClassicGroupMember,
                        skip_assignment_supported: bool) -> JoinResult | asyncio.Future:
        """A static member came back under a new member id: the old id is fenced, the place is kept."""
        old_id = old.member_id
        self._cancel_session(old)
        _resolve(old.join_waiter, JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
        _resolve(old.sync_waiter, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        old.join_waiter = old.sync_waiter = None
        member = group.replace_static(old, joining.member_id)
        unchanged = member.same_protocols(joining.protocols)
        member.protocols = joining.protocols
        member.session_timeout_ms = joining.session_timeout_ms
        member.rebalance_timeout_ms = joining.rebalance_timeout_ms
        leader = member.member_id == group.leader_id
        if group.state is ClassicGroupState.STABLE and unchanged and (not leader or skip_assignment_supported):
            # KIP-345: a restarted static follower gets its old assignment back without a rebalance; KIP-814: so
            # does the leader of a client that can be told not to assign again (it still learns the members).
            self._arm_session(group, member)
            self._spawn(self._store_group(group))  # the new member id, as Kafka persists it
            return replace(self._join_result(group, member), skip_assignment=leader)
        return self._join_and_rebalance(group, member)

    def _add_and_rebalance(self, group: ClassicGroup, member: ClassicGroupMember) -> asyncio.Future:
        group.add(member)
        return self._join_and_rebalance(group, member)

    def _join_and_rebalance(self, group: ClassicGroup, member: ClassicGroupMember) -> asyncio.Future:
        """Park the member's JoinGroup, then complete the rebalance under way or start one."""
        waiter = self._park_join(group, member)
        if group.state is ClassicGroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group)
        else:
            self._prepare_rebalance(group)
        return waiter

    def _park_join(self, group: ClassicGroup, member: ClassicGroupMember) -> asyncio.Future:
        # A member that sends JoinGroup again while parked: its previous request is answered, the new one waits.
        _resolve(member.join_waiter, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_waiter = asyncio.get_running_loop().create_future()
        self._cancel_session(member)
        return member.join_waiter

    def _prepare_rebalance(self, group: ClassicGroup) -> None:
        if group.state is ClassicGroupState.COMPLETING_REBALANCE:
            # The assignment being synced is void: parked SyncGroups are told to rejoin.
            for member in group.members.values():
                member.assignment = b""
                _resolve(member.sync_waiter, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
                member.sync_waiter = None
                self._arm_session(group, member)
        if group.join_timer is not None:
            group.join_timer.cancel()
        loop = asyncio.get_running_loop()
        # No members left (the last one left a Stable group): the phase completes at once, to Empty.
        rebalance_timeout_ms = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        initial = group.state is ClassicGroupState.EMPTY and self.initial_delay_ms > 0
        group.transition(ClassicGroupState.PREPARING_REBALANCE, self.now_ms())
        if initial:
            delay = min(self.initial_delay_ms, rebalance_timeout_ms)
            group.initial_delay_remaining_ms = max(rebalance_timeout_ms - self.initial_delay_ms, 0)
            group.new_member_joined = False
            group.join_timer = loop.call_later(delay / 1000, self._initial_delay_elapsed, group)
        else:
            group.join_timer = loop.call_later(rebalance_timeout_ms / 1000, self._complete_join, group)
            self._maybe_complete_join(group)

    def _initial_delay_elapsed(self, group: ClassicGroup) -> None:
        remaining = group.initial_delay_remaining_ms or 0
        if group.new_member_joined and remaining > 0:
            delay = min(self.initial_delay_ms, remaining)
            group.initial_delay_remaining_ms = remaining - delay
            group.new_member_joined = False
            group.join_timer = asyncio.get_running_loop().call_later(delay / 1000, self._initial_delay_elapsed, group)
            return
        self._complete_join(group)

    def _maybe_complete_join(self, group: ClassicGroup) -> None:
        if (group.state is ClassicGroupState.PREPARING_REBALANCE and group.initial_delay_remaining_ms is None
                and group.all_joined()):
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        if group.state is not ClassicGroupState.PREPARING_REBALANCE:
            return
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.initial_delay_remaining_ms = None
        for member in [m for m in group.members.values() if m.join_waiter is None]:
            # Did not rejoin within the rebalance timeout. Static members keep their place (KIP-345).
            if member.group_instance_id is None:
                self._cancel_session(member)
                group.remove(member.member_id)
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.transition(ClassicGroupState.EMPTY, self.now_ms())
            self._spawn(self._store_group(group))
            log.info("group %s is empty at generation %d", group.group_id, group.generation_id)
            return
        group.protocol_name = group.select_protocol()
        leader = group.members.get(group.leader_id or "")
        if leader is None or leader.join_waiter is None:
            group.leader_id = next(m.member_id for m in group.members.values() if m.join_waiter is not None)
        group.transition(ClassicGroupState.COMPLETING_REBALANCE, self.now_ms())
        if (metrics := self.broker.metrics) is not None:
            metrics.record_rebalance(group.group_id)
        log.info("group %s generation %d: %d members, protocol %s, leader %s", group.group_id,
                 group.generation_id, len(group.members), group.protocol_name, group.leader_id)
        for member in group.members.values():
            if member.join_waiter is not None:
                _resolve(member.join_waiter, self._join_result(group, member))
                member.join_waiter = None
            self._arm_session(group, member)

    def _join_result(self, group: ClassicGroup, member: ClassicGroupMember) -> JoinResult:
        members = []
        if member.member_id == group.leader_id:
            members = [(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                       for m in group.members.values()]
        return JoinResult(ErrorCode.NONE, member.member_id, group.generation_id, group.protocol_type,
                          group.protocol_name, group.leader_id or "", members)

    # -- SyncGroup ------------------------------------------------------------------------------------------

    async def sync_group(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        group, member, error = self._member_of(group_id, member_id, group_instance_id, generation_id)
        if error is ErrorCode.NONE and group is not None and (  # (a group whenever the error is NONE)
            (protocol_type is not None and protocol_type != group.protocol_type)
            or (protocol_name is not None and protocol_name != group.protocol_name)
        ):
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL  # SyncGroup v5 names what the member expects
        if error is not ErrorCode.NONE:
            return SyncResult(error)
        assert group is not None and member is not None
        if group.state is ClassicGroupState.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.state is ClassicGroupState.STABLE:
            self._arm_session(group, member)
            return self._sync_result(group, member)
        # CompletingRebalance: wait for the leader's assignment.
        _resolve(member.sync_waiter, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        waiter = member.sync_waiter = asyncio.get_running_loop().create_future()
        self._cancel_session(member)
        if member_id == group.leader_id:
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            generation = group.generation_id
            try:
                await self._store_group(group)
            except KafkaError as exc:  # the members must rejoin, as in Kafka
                log.warning("storing group %s failed: %s", group_id, exc)
                if group.state is ClassicGroupState.COMPLETING_REBALANCE and group.generation_id == generation:
                    self._prepare_rebalance(group)
                return await waiter
            if group.state is not ClassicGroupState.COMPLETING_REBALANCE or group.generation_id != generation:
                return await waiter  # a rebalance started meanwhile and answered the parked members
            group.transition(ClassicGroupState.STABLE, self.now_ms())
            for m in group.members.values():
                if m.sync_waiter is not None:
                    _resolve(m.sync_waiter, self._sync_result(group, m))
                    m.sync_waiter = None
                self._arm_session(group, m)
        return await waiter

    @staticmethod
    def _sync_result(group: ClassicGroup, member: ClassicGroupMember) -> SyncResult:
        return SyncResult(ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name)

    def _member_of(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> tuple[ClassicGroup | None, ClassicGroupMember | None, ErrorCode]:
        """The checks Heartbeat and SyncGroup share, in Kafka's order."""
        error = self.coordinator_error(group_id)
        if error is not ErrorCode.NONE:
            return None, None, error
        group = self.groups.get(group_id)
        if group is None:
            return None, None, ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is ClassicGroupState.DEAD:
            return group, None, ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_fenced(member_id, group_instance_id):
            return group, None, ErrorCode.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None or group.state is ClassicGroupState.EMPTY:
            return group, None, ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return group, member, ErrorCode.ILLEGAL_GENERATION
        return group, member, ErrorCode.NONE

    # -- Heartbeat, LeaveGroup, session expiry --------------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> ErrorCode:
        group, member, error = self._member_of(group_id, member_id, group_instance_id, generation_id)
        if error is not ErrorCode.NONE:
            return error
        assert group is not None and member is not None
        self._arm_session(group, member)
        # During a join phase the heartbeat answer is how a member learns it must rejoin.
        rebalancing = group.state is ClassicGroupState.PREPARING_REBALANCE
        return ErrorCode.REBALANCE_IN_PROGRESS if rebalancing else ErrorCode.NONE

    def leave_group(
        self, group_id: str, leaving: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        """(group error, per member (member_id, group_instance_id, error)) for LeaveGroup."""
        error = self.coordinator_error(group_id)
        if error is not ErrorCode.NONE:
            return error, [(m, i, error) for m, i in leaving]
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [(m, i, ErrorCode.UNKNOWN_MEMBER_ID) for m, i in leaving]
        if group.state is ClassicGroupState.DEAD:
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
            return error, [(m, i, error) for m, i in leaving]
        results = []
        for member_id, instance_id in leaving:
            results.append((member_id, instance_id, self._leave_one(group, member_id, instance_id)))
        return ErrorCode.NONE, results

    def _leave_one(self, group: ClassicGroup, member_id: str, instance_id: str | None) -> ErrorCode:
        if instance_id is not None:
            owner = group.static_members.get(instance_id)
            if owner is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if member_id and member_id != owner:  # an empty member id leaves by instance id alone (KIP-345 admin)
                return ErrorCode.FENCED_INSTANCE_ID
            member_id = owner
        pending = group.pending_members.pop(member_id, None)
        if pending is not None:
            pending.cancel()
            self._maybe_complete_join(group)
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        log.info("member %s leaves group %s", member_id, group.group_id)
        self._remove_member(group, member)
        return ErrorCode.NONE

    def _remove_member(self, group: ClassicGroup, member: ClassicGroupMember) -> None:
        self._cancel_session(member)
        _resolve(member.join_waiter, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        _resolve(member.sync_waiter, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.state in (ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group)
        else:
            self._maybe_complete_join(group)

    def _arm_session(self, group: ClassicGroup, member: ClassicGroupMember) -> None:
        """(Re)start the member's session timer; parked members are kept alive instead."""
        self._cancel_session(member)
        if member.join_waiter is None and member.sync_waiter is None:
            member.session_timer = asyncio.get_running_loop().call_later(
                member.session_timeout_ms / 1000, self._expire_member, group, member
            )

    @staticmethod
    def _cancel_session(member: ClassicGroupMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
            member.session_timer = None

    def _expire_member(self, group: ClassicGroup, member: ClassicGroupMember) -> None:
        member.session_timer = None
        if group.members.get(member.member_id) is member:
            log.info("member %s of group %s: session timeout expired", member.member_id, group.group_id)
            self._remove_member(group, member)

    def _expire_pending(self, group: ClassicGroup, member_id: str) -> None:
        """A MEMBER_ID_REQUIRED member that never came back stops holding up the join phase."""
        if group.pending_members.pop(member_id, None) is not None:
            self._maybe_complete_join(group)

    # -- offsets --------------------------------------------------------------------------------------------

    async def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: list[OffsetToCommit],
    ) -> list[ErrorCode]:
        """OffsetCommit: one error per entry of `offsets`, in order."""
        return await self._store_offsets(group_id, generation_id, member_id, group_instance_id, offsets, None)

    async def commit_txn_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: list[OffsetToCommit],
    ) -> list[ErrorCode]:
        """TxnOffsetCommit: one error per entry of `offsets`, in order. The offsets stay pending until the
        producer's marker on the group's partition (`complete_txn`). The member and generation are checked only
        when given (v3+, KIP-447: generation_id >= 0, a member id or a group instance id)."""
        return await self._store_offsets(group_id, generation_id, member_id, group_instance_id, offsets,
                                         (producer_id, producer_epoch))

    async def _store_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: list[OffsetToCommit],
        producer: tuple[int, int] | None,
    ) -> list[ErrorCode]:
        """Kafka's storeOffsets: plain commits when `producer` is None, else transactional ones of (id, epoch)."""
        try:
            await self.ensure_offsets_topic()
        except KafkaError:
            return [ErrorCode.COORDINATOR_NOT_AVAILABLE] * len(offsets)
        error = self._commit_error(group_id, generation_id, member_id, group_instance_id,
                                   transactional=producer is not None)
        if error is not ErrorCode.NONE:
            return [error] * len(offsets)
        group = self.groups[group_id]
        timestamp = self.now_ms()
        errors: list[ErrorCode] = []
        accepted: list[tuple[OffsetKey, CommittedOffset]] = []
        for o in offsets:
            state = self.broker.metadata.partition(o.topic, o.partition)
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
        if producer is not None:
            # Pending from the start of the append, as in Kafka: an abort marker written meanwhile drops them.
            replaced = group.stage_txn_offsets(producer[0], accepted)
            self._track_txn(group, producer[0])
        try:
            base_offset = await self._append(group.partition, entries, producer)
        except KafkaError as exc:
            log.warning("committing offsets of group %s failed: %s", group_id, exc)
            if producer is not None:
                group.unstage_txn_offsets(producer[0], accepted, replaced)
            return [exc.code if e is ErrorCode.NONE else e for e in errors]
        for key, committed in accepted:
            committed.log_offset = base_offset
            if producer is None:
                group.store_offset(key, committed)
        return errors

    def _commit_error(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None, *,
        transactional: bool,
    ) -> ErrorCode:
        """The checks of an OffsetCommit or a TxnOffsetCommit (Kafka's validateOffsetCommit); a group that does not
        exist yet is created empty (simple consumers and transactional producers keep offsets in such groups)."""
        if transactional and not group_id:  # OffsetCommit still takes the empty group id, as in Kafka
            return ErrorCode.INVALID_GROUP_ID
        error = self.coordinator_error(group_id)
        if error is not ErrorCode.NONE:
            return error
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0 and not transactional:  # a generation of a group that is gone here
                return ErrorCode.ILLEGAL_GENERATION
            group = self.groups[group_id] = ClassicGroup(group_id, partition_for(group_id, self.num_partitions),
                                                  state_timestamp=self.now_ms())
        if group.state is ClassicGroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_fenced(member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if generation_id < 0 and group.state is ClassicGroupState.EMPTY:
            return ErrorCode.NONE
        if transactional and generation_id < 0 and not member_id and group_instance_id is None:
            return ErrorCode.NONE  # TxnOffsetCommit before v3 names no member: nothing to fence
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if transactional:  # as Kafka: a producer's commit neither waits for a rebalance nor keeps the member alive
            return ErrorCode.NONE
        if group.state is ClassicGroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        # Stable, or PreparingRebalance: a member may commit in its revocation callback before rejoining.
        self._arm_session(group, member)
        return ErrorCode.NONE

    def _track_txn(self, group: ClassicGroup, producer_id: int) -> None:
        self._txn_groups.setdefault((group.partition, producer_id), set()).add(group.group_id)

    def complete_txn(self, producer_id: int, partition: int, commit: bool) -> None:
        """A commit (`commit`) or abort marker of `producer_id` is appended and replicated on
        `__consumer_offsets-<partition>`: the producer's pending offsets in that partition's groups become
        committed, or are dropped. Every transaction that ran a TxnOffsetCommit here ends with such a marker."""
        for group_id in self._txn_groups.pop((partition, producer_id), ()):
            group = self.groups.get(group_id)
            if group is not None:  # not deleted meanwhile
                group.complete_txn(producer_id, commit)

    def fetch_offsets(
        self, group_id: str, topics: list[tuple[str, list[int]]] | None, require_stable: bool = False
    ) -> tuple[ErrorCode, list[FetchedOffset]]:
        """Committed offsets of the given partitions (all the group's when `topics` is None); with
        `require_stable`, a partition with a pending transactional offset answers UNSTABLE_OFFSET_COMMIT."""
        error = self.coordinator_error(group_id)
        if error is not ErrorCode.NONE:
            return error, []
        group = self.groups.get(group_id)
        committed = {} if group is None else group.offsets
        if topics is None:
            wanted = sorted(committed)
        else:
            wanted = [(topic, p) for topic, partitions in topics for p in partitions]
        answer = []
        for topic, partition in wanted:
            c = committed.get((topic, partition))
            if require_stable and group is not None and group.has_pending_offset((topic, partition)):
                answer.append(FetchedOffset(topic, partition, NO_OFFSET, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT))
            elif c is None:
                answer.append(FetchedOffset(topic, partition, NO_OFFSET, -1, ""))
            else:
                answer.append(FetchedOffset(topic, partition, c.offset, c.leader_epoch, c.metadata))
        return ErrorCode.NONE, answer

    def _delete_offsets(self, group: ClassicGroup, keys: Iterable[OffsetKey]) -> asyncio.Future[Any]:
        """Drop offsets, committed and pending, with their tombstones (deleted topic, OffsetDelete, expiry)."""
        dropped = group.drop_offsets(keys)
        return self._append(group.partition, [(records.offset_key(group.group_id, t, p), None) for t, p in dropped])

    async def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """OffsetDelete: refused for topics the group's members subscribe to."""
        error = self.coordinator_error(group_id)
        group = self.groups.get(group_id)
        if error is ErrorCode.NONE and (group is None or group.state is ClassicGroupState.DEAD):
            error = ErrorCode.GROUP_ID_NOT_FOUND
        if error is not ErrorCode.NONE:
            return error, []
        assert group is not None
        subscribed = set() if group.state is ClassicGroupState.EMPTY else group.subscribed_topics()
        errors = [
            ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if subscribed is None or topic in subscribed else ErrorCode.NONE
            for topic, _ in partitions
        ]
        await self._delete_offsets(group, [k for k, e in zip(partitions, errors, strict=True) if e is ErrorCode.NONE])
        return ErrorCode.NONE, errors

    # -- admin ----------------------------------------------------------------------------------------------

    def list_groups(self, states: set[str]) -> list[ClassicGroup]:
        """Groups led here, filtered by state name (case-insensitive, as Kafka) when `states` is not empty."""
        wanted = {s.lower() for s in states}
        return [g for g in self.groups.values() if not wanted or g.state.value.lower() in wanted]

    def describe_group(self, group_id: str) -> tuple[ErrorCode, ClassicGroup | None]:
        error = self.coordinator_error(group_id)
        return error, (self.groups.get(group_id) if error is ErrorCode.NONE else None)

    async def delete_group(self, group_id: str) -> ErrorCode:
        error = self.coordinator_error(group_id)
        if error is not ErrorCode.NONE:
            return error
        group = self.groups.get(group_id)
        if group is None or group.state is ClassicGroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.state is not ClassicGroupState.EMPTY:
            return ErrorCode.NON_EMPTY_GROUP
        try:
            await self._remove_group(group)
        except KafkaError as exc:
            return exc.code
        return ErrorCode.NONE

    async def _remove_group(self, group: ClassicGroup) -> None:
        """Tombstone the group and all its offsets (pending ones too), then forget it. Dead while the tombstones
        are written, so no member joins it and no offset is committed to it meanwhile; Empty again if they cannot
        be."""
        keys = list(dict.fromkeys(key for key, _ in group.all_offsets()))
        entries: list[tuple[bytes, bytes | None]] = [(records.offset_key(group.group_id, t, p), None) for t, p in keys]
        entries.append((records.group_key(group.group_id), None))
        group.transition(ClassicGroupState.DEAD, self.now_ms())
        try:
            await self._append(group.partition, entries)
        except KafkaError:
            group.transition(ClassicGroupState.EMPTY, self.now_ms())
            raise
        group.drop_offsets(keys)
        self.groups.pop(group.group_id, None)
        log.info("group %s removed", group.group_id)

    # -- offset retention (KIP-211) -------------------------------------------------------------------------

    def _schedule_retention_check(self) -> None:
        self._retention_timer = asyncio.get_running_loop().call_later(
            RETENTION_CHECK_INTERVAL_S, lambda: self._spawn(self.expire_offsets())
        )

    async def expire_offsets(self) -> None:
        """Remove expired offsets, then groups left with neither members nor offsets; re-arms its timer."""
        deadline = self.now_ms() - self.retention_ms
        for group in list(self.groups.values()):
            if group.state is ClassicGroupState.EMPTY:
                # A simple group (commits only) counts from each commit, a consumer group from becoming empty.
                simple = group.protocol_type is None or group.state_timestamp < 0
                expired = [k for k, c in group.offsets.items()
                           if (c.commit_timestamp if simple else group.state_timestamp) <= deadline]
            elif group.state is ClassicGroupState.STABLE and (subscribed := group.subscribed_topics()) is not None:
                expired = [k for k, c in group.offsets.items()
                           if k[0] not in subscribed and c.commit_timestamp <= deadline]
            else:
                continue
            # A transaction's pending offset may still replace it; its tombstone would drop that one too.
            expired = [k for k in expired if not group.has_pending_offset(k)]
            try:
                await self._delete_offsets(group, expired)
                if group.state is ClassicGroupState.EMPTY and not group.has_offsets() and not group.pending_members:
                    await self._remove_group(group)
            except KafkaError as exc:
                log.warning("expiring offsets of group %s failed: %s", group.group_id, exc)
        self._schedule_retention_check()


def _resolve(waiter: asyncio.Future | None, result: object) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(result)
