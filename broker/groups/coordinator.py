"""The group coordinator service: which broker coordinates a group, the `__consumer_offsets` partitions it leads
and loads, and the one write path; the groups and offsets themselves live in one `GroupCoordinatorShard` per
partition (`shard.py`: `group_metadata_manager.py`, `classic_protocol.py`, `offset_metadata_manager.py`).

Rules:
- A group lives on the broker that leads its `__consumer_offsets` partition, `abs(java hashCode(group_id)) %
  offsets.topic.num.partitions` as Kafka computes it; `shards` holds the partitions led and loaded here. Each
  request is answered NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS or COORDINATOR_NOT_AVAILABLE here
  (`coordinator_error`), else routed to the shard of its group's partition.
- All state is owned by the event loop and mutated between awaits; every deadline is a loop timer.
- `__consumer_offsets` is created lazily, as in Kafka: by the first FindCoordinator for a group key, or the first
  JoinGroup/OffsetCommit, never at broker start (`ensure_offsets_topic`). Once it exists, `start()` replays the
  partitions led here in background tasks, so the broker listens at once; a group whose partition is still
  loading gets COORDINATOR_LOAD_IN_PROGRESS, which clients retry. A partition led elsewhere now is unloaded: its
  shard is dropped (its members get NOT_COORDINATOR and find the new coordinator).
- Loading replays a partition's records into a new shard (`GroupCoordinatorShard.replay`, the markers with
  `replay_end_transaction_marker`), yielding to the loop every LOAD_YIELD_RECORDS records; the shard is installed
  at once at the end (no await in between), unless leadership moved meanwhile.
- Durability: every commit, group metadata change and deletion is appended to the group's partition (formats in
  `records.py`) through `append` and replicated before it is answered; loading replays the partitions, so offsets
  and groups survive a restart. Writes that no request waits for run as tracked tasks (`spawn`).
- Transactions: the broker calls `complete_txn` once a producer's marker is replicated on a partition.
- Offsets are expired every offsets.retention.check.interval.ms (Kafka's default, 10 minutes), per shard.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from epoch_broker.broker.eager import start_eagerly
from epoch_broker.broker.groups.classic_group import ClassicGroup
from epoch_broker.broker.groups.classic_protocol import JoinResult, SyncResult
from epoch_broker.broker.groups.consumer_group import ConsumerGroup
from epoch_broker.broker.groups.consumer_protocol import ConsumerGroupConfig, HeartbeatRequest, HeartbeatResult
from epoch_broker.broker.groups.group import Entry, Group
from epoch_broker.broker.groups.offset_metadata_manager import (
    LATEST_API_VERSION,
    NO_PRODUCER_ID,
    CommittedOffset,
    FetchedOffset,
    OffsetKey,
    OffsetToCommit,
)
from epoch_broker.broker.groups.records import ShareSnapshotKey
from epoch_broker.broker.groups.runtime import ShardRuntime
from epoch_broker.broker.groups.shard import GroupCoordinatorShard
from epoch_broker.broker.groups.share_group import ShareGroup, ShareGroupEpochRecord, encode_record
from epoch_broker.broker.groups.share_protocol import ShareGroupConfig, ShareHeartbeatRequest, ShareHeartbeatResult
from epoch_broker.broker.groups.share_state import NOT_WRITTEN, UNINITIALIZED, ShareState, delivery_complete_count
from epoch_broker.broker.metadata.records import PartitionRecord, RemoveTopicRecord, TopicRecord
from epoch_broker.protocol.errors import ErrorCode, KafkaError
from epoch_broker.protocol.records import build_batch

__all__ = ["OFFSETS_TOPIC", "FetchedOffset", "GroupCoordinator", "JoinResult", "OffsetToCommit", "ShareOffsetsError",
           "SharePartitionOffset", "SyncResult", "java_string_hash", "leader_location", "partition_for"]

log = logging.getLogger(__name__)
G = TypeVar("G", ConsumerGroup, ShareGroup)

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": "104857600"}
# Kafka's defaults for settings this broker does not expose.
RETENTION_CHECK_INTERVAL_S = 600.0  # offsets.retention.check.interval.ms
LOAD_YIELD_RECORDS = 1000  # loading yields to the event loop this often


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


class SharePartitionOffset(NamedTuple):
    """One share-partition as DescribeShareGroupOffsets answers it (Kafka's defaults where nothing is stored)."""

    partition: int
    start_offset: int = UNINITIALIZED
    leader_epoch: int = 0
    lag: int = -1  # unknown


class ShareOffsetsError(NamedTuple):
    """A group-level refusal of AlterShareGroupOffsets / DeleteShareGroupOffsets, with Kafka's message."""

    error: ErrorCode
    message: str | None = None


TOPIC_NOT_HOSTED = "This server does not host this topic-partition."  # Errors.UNKNOWN_TOPIC_OR_PARTITION.message()
NO_OFFSETS_TO_DELETE = "There is no offset information to delete."
NON_EMPTY_SHARE_GROUP = "The group is not empty."  # Errors.NON_EMPTY_GROUP.message(), GroupNotEmptyException's


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


class _Groups(Mapping[str, Group]):
    """Every group coordinated here, over the shards (status, metrics and tests read it; requests use a shard)."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self._coordinator = coordinator

    def __getitem__(self, group_id: str) -> Group:
        shard = self._coordinator.shard_of(group_id)
        group = None if shard is None else shard.groups.group(group_id)
        if group is None:
            raise KeyError(group_id)
        return group

    def __iter__(self) -> Iterator[str]:
        for shard in list(self._coordinator.shards.values()):
            yield from list(shard.groups.groups)

    def __len__(self) -> int:
        return sum(len(shard.groups.groups) for shard in self._coordinator.shards.values())


class GroupCoordinator:
    def __init__(self, broker: Any) -> None:  # broker.app.Broker: typed loosely to avoid an import cycle
        self.broker = broker
        config = broker.config
        self.num_partitions: int = config.offsets_topic_num_partitions
        self.initial_delay_ms: int = config.group_initial_rebalance_delay_ms
        # group.min/max.session.timeout.ms: a JoinGroup's session timeout outside them is INVALID_SESSION_TIMEOUT
        self.session_timeout_bounds_ms = (config.group_min_session_timeout_ms, config.group_max_session_timeout_ms)
        self.retention_ms: int = config.offsets_retention_minutes * 60_000
        self.consumer_group_config = ConsumerGroupConfig(
            session_timeout_ms=config.group_consumer_session_timeout_ms,
            heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
            assignors=config.group_consumer_assignors)
        self.share_group_config = ShareGroupConfig(
            session_timeout_ms=config.group_share_session_timeout_ms,
            heartbeat_interval_ms=config.group_share_heartbeat_interval_ms, max_size=config.group_share_max_size)
        self.shards: dict[int, GroupCoordinatorShard] = {}  # the partitions led and loaded here
        self.groups: Mapping[str, Group] = _Groups(self)
        self._retention_timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Future[Any]] = set()  # appends and spawned writes
        self._loading: dict[int, asyncio.Task[None]] = {}  # partitions being replayed (COORDINATOR_LOAD_IN_PROGRESS)
        self._load_batch: _LoadBatch | None = None  # the loads running together: one INFO line when all are done

    @property
    def owned(self) -> set[int]:
        """The `__consumer_offsets` partitions led and loaded here."""
        return set(self.shards)

    def now_ms(self) -> int:
        """The broker's wall clock (fault.clock.offset.ms moves it): commit and group-state times, expiry."""
        now: int = self.broker.faults.wall_clock_ms()
        return now

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
        for partition in list(self.shards):
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
            if partition not in self.shards and partition not in self._loading and self._leads(partition):
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
        """Replay one `__consumer_offsets` partition into a new shard (later records win, tombstones delete) and
        install it. Returns (records read, groups loaded), or None if leadership moved meanwhile (nothing loaded).

        A transactional offset is pending until its producer's marker in the partition commits or drops it, as
        `complete_txn` does live; one still pending at the end waits for the marker to come.
        """
        shard = GroupCoordinatorShard(ShardRuntime(self, partition))
        count = 0
        for record in self.broker.replica_manager.read_internal(OFFSETS_TOPIC, partition, 0):
            if record.marker is not None:
                shard.replay_end_transaction_marker(record.producer_id, record.marker.commit)
                continue
            count += 1
            if count % LOAD_YIELD_RECORDS == 0:
                await asyncio.sleep(0)
            shard.replay(record.key, record.value, record.offset,
                         record.producer_id if record.transactional else NO_PRODUCER_ID)
        if not self._leads(partition):  # leadership moved (or the topic went) while loading
            return None
        shard.on_loaded()
        self.shards[partition] = shard
        loaded_count = len(shard.groups.groups)
        log.debug("loaded __consumer_offsets-%d: %d records, %d groups", partition, count, loaded_count)
        return count, loaded_count

    def unload(self, partition: int) -> None:
        """Stop coordinating the groups of a partition (shutdown, or leadership moved away)."""
        shard = self.shards.pop(partition, None)
        if shard is not None:
            shard.unload()

    # -- broker seams ---------------------------------------------------------------------------------------

    def _leads(self, partition: int) -> bool:
        state = self.broker.metadata.partition(OFFSETS_TOPIC, partition)
        return state is not None and state.leader == self.broker.node_id

    def _on_metadata(self, metadata_records: list[Any]) -> None:
        """A deleted topic takes its committed offsets with it (KIP-232); a partition newly led here loads, one
        led elsewhere now unloads (its members get NOT_COORDINATOR and find the new coordinator)."""
        for partition in [p for p in self.shards if not self._leads(p)]:
            log.info("__consumer_offsets-%d is led elsewhere now: its groups unload", partition)
            self.unload(partition)
        self._load_led()
        deleted: set[bytes | None] = {r.topic_id for r in metadata_records if isinstance(r, RemoveTopicRecord)}
        if deleted:
            for shard in list(self.shards.values()):
                shard.offsets.drop_deleted_topics(deleted)
        if any(isinstance(r, TopicRecord | PartitionRecord | RemoveTopicRecord) for r in metadata_records):
            for shard in self.shards.values():  # consumer groups recheck their subscribed topics
                shard.groups.on_topics_changed()

    def coordinator_error(self, group_id: str) -> ErrorCode:
        partition = partition_for(group_id, self.num_partitions)
        if partition in self.shards:
            return ErrorCode.NONE
        if partition in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if not self._topic_exists():  # nobody asked for a coordinator yet: as Kafka before the topic exists
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NOT_COORDINATOR

    def shard_of(self, group_id: str) -> GroupCoordinatorShard | None:
        """The shard of the group's partition, if led and loaded here."""
        return self.shards.get(partition_for(group_id, self.num_partitions))

    def _shard(self, group_id: str) -> GroupCoordinatorShard:
        """The shard of a group whose `coordinator_error` is NONE (no await since)."""
        return self.shards[partition_for(group_id, self.num_partitions)]

    def find_coordinator(self, group_id: str, listener: str) -> tuple[ErrorCode, int, str, int]:
        """(error, node id, host, port) of the leader of the group's `__consumer_offsets` partition, as clients
        of `listener` reach it."""
        return leader_location(self.broker, OFFSETS_TOPIC, partition_for(group_id, self.num_partitions), listener)

    def append(self, partition: int, entries: Sequence[Entry],
               producer: tuple[int, int] | None = None) -> asyncio.Future[Any]:
        """Append records (key, value or None for a tombstone) atomically, in one batch; the future completes with
        its base offset once they are replicated (None for no entries), or raises KafkaError. With a `producer`
        (id, epoch), the batch is that producer's transactional batch, without a sequence, as Kafka writes a
        TxnOffsetCommit (the partition refuses a stale epoch with INVALID_PRODUCER_EPOCH). Managers reach it as
        `ShardRuntime.append`.

        The append happens here, before this returns (`append_internal` started eagerly: it appends before its
        first wait, for replication), so records land in the order of these calls, whoever awaits them (a write
        nobody waits for, such as a group turning empty, still precedes a later tombstone of the same group); on
        one broker the future is done at once and the request awaiting it goes on without a loop trip.
        """
        if not entries:
            done = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done
        timestamp = self.now_ms()
        producer_id, producer_epoch = producer or (-1, -1)
        batch = build_batch([(key, value, (), timestamp) for key, value in entries], producer_id=producer_id,
                            producer_epoch=producer_epoch, is_transactional=producer is not None)
        appended = start_eagerly(self.broker.replica_manager.append_internal(OFFSETS_TOPIC, partition, batch))
        if not appended.done():  # waiting for followers: stop() waits for it
            self._tasks.add(appended)
            appended.add_done_callback(self._tasks.discard)
        return appended

    def spawn(self, write: Awaitable[Any]) -> None:
        """A write that no request waits for: logged if it fails; `stop()` waits for it."""
        task = asyncio.ensure_future(write)
        self._tasks.add(task)
        task.add_done_callback(self._write_done)

    def _write_done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("__consumer_offsets write failed: %s", task.exception())

    # -- the classic protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup ---------------------------------

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
        if error is not ErrorCode.NONE:
            return JoinResult(error, member_id)
        return await self._shard(group_id).groups.classic.join_group(
            group_id=group_id, member_id=member_id, group_instance_id=group_instance_id,
            session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=rebalance_timeout_ms,
            protocol_type=protocol_type, protocols=protocols, client_id=client_id, client_host=client_host,
            require_known_member_id=require_known_member_id, skip_assignment_supported=skip_assignment_supported)

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
        error = self.coordinator_error(group_id)
        if error is not ErrorCode.NONE:
            return SyncResult(error)
        return await self._shard(group_id).groups.classic.sync_group(
            group_id=group_id, generation_id=generation_id, member_id=member_id,
            group_instance_id=group_instance_id, protocol_type=protocol_type, protocol_name=protocol_name,
            assignments=assignments)

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> ErrorCode:
        error = self.coordinator_error(group_id)
        if error is not ErrorCode.NONE:
            return error
        return self._shard(group_id).groups.classic.heartbeat(group_id, member_id, group_instance_id, generation_id)

    def leave_group(
        self, group_id: str, leaving: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        """(group error, per member (member_id, group_instance_id, error)) for LeaveGroup."""
        error = self.coordinator_error(group_id)
        if error is not ErrorCode.NONE:
            return error, [(m, i, error) for m, i in leaving]
        return self._shard(group_id).groups.classic.leave_group(group_id, leaving)

    # -- the consumer protocol (KIP-848): ConsumerGroupHeartbeat, ConsumerGroupDescribe ---------------------

    async def consumer_group_heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        """Raises KafkaError with the heartbeat's error (and Kafka's message)."""
        return await (await self._heartbeat_shard(request.group_id)).groups.consumer_group_heartbeat(request)

    async def _heartbeat_shard(self, group_id: str) -> GroupCoordinatorShard:
        """The shard a heartbeat of a modern group (consumer, share) goes to; KafkaError with the coordinator's
        error (COORDINATOR_NOT_AVAILABLE while `__consumer_offsets` cannot be made)."""
        try:
            await self.ensure_offsets_topic()
        except KafkaError as e:
            raise KafkaError(str(e), ErrorCode.COORDINATOR_NOT_AVAILABLE) from None
        error = self.coordinator_error(group_id)
        if error is not ErrorCode.NONE:
            raise KafkaError(f"this broker does not coordinate group {group_id} ({error.name})", error)
        return self._shard(group_id)

    def describe_consumer_group(self, group_id: str) -> tuple[ErrorCode, ConsumerGroup | None]:
        """(NONE, the group), or the coordinator's error, or GROUP_ID_NOT_FOUND for an unknown or classic group."""
        return self._described(group_id, ConsumerGroup)

    def _described(self, group_id: str, kind: type[G]) -> tuple[ErrorCode, G | None]:
        error = self.coordinator_error(group_id)
        if error is not ErrorCode.NONE:
            return error, None
        group = self._shard(group_id).groups.group(group_id)
        if not isinstance(group, kind) or group.dead:
            return ErrorCode.GROUP_ID_NOT_FOUND, None
        return ErrorCode.NONE, group

    # -- share groups (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe ------------------------------------

    async def share_group_heartbeat(self, request: ShareHeartbeatRequest) -> ShareHeartbeatResult:
        """Raises KafkaError with the heartbeat's error (and Kafka's message)."""
        return await (await self._heartbeat_shard(request.group_id)).groups.share_group_heartbeat(request)

    async def read_share_state(self, key: ShareSnapshotKey, leader_epoch: int) -> tuple[ErrorCode, ShareState]:
        """ReadShareGroupState of one share-partition (`share_state.py`), or the coordinator's error."""
        error = self.coordinator_error(key.group)
        if error is not ErrorCode.NONE:
            return error, NOT_WRITTEN
        return await self._shard(key.group).share_states.read(key, leader_epoch)

    async def write_share_state(self, key: ShareSnapshotKey, state: ShareState) -> ErrorCode:
        """WriteShareGroupState of one share-partition (`share_state.py`), or the coordinator's error."""
        error = self.coordinator_error(key.group)
        if error is not ErrorCode.NONE:
            return error
        return await self._shard(key.group).share_states.write(key, state)

    def describe_share_group(self, group_id: str) -> tuple[ErrorCode, ShareGroup | None]:
        """(NONE, the group), or the coordinator's error, or GROUP_ID_NOT_FOUND for an unknown group or one of
        another type."""
        return self._described(group_id, ShareGroup)

    # -- share group offsets (KIP-932): DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets

    def describe_share_group_offsets(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]] | None
    ) -> tuple[ErrorCode, list[tuple[str, bytes, list[SharePartitionOffset]]]]:
        """(coordinator error, per topic (name, id, partitions)) of the stored share state, Kafka's
        describeShareGroupOffsets: `topics` None means every share-partition of the group whose start offset is
        set. As Kafka, the group is not looked up: an unknown group, or one of another type, has no state, and a
        topic or partition without state answers start offset -1 (a topic that does not exist with the zero id),
        never an error. The lag (KIP-1226) is the high watermark less the start offset less the records past it
        already acknowledged or archived; -1 when unknown: no start offset, or the partition not led here (Kafka
        asks its leader with ListOffsets, not done here)."""
        error = self.coordinator_error(group_id)
        if error is not ErrorCode.NONE:
            return error, []
        states = self._shard(group_id).share_states
        by_name = self.broker.metadata.topics_by_name
        if topics is None:
            by_id = self.broker.metadata.topics_by_id
            wanted: dict[bytes, list[int]] = {}
            for key in states.initialized(group_id):
                if key.topic_id in by_id:  # a deleted topic's state is not described (Kafka reads the image)
                    wanted.setdefault(key.topic_id, []).append(key.partition)
            named = [(by_id[topic_id].name, topic_id, partitions) for topic_id, partitions in wanted.items()]
        else:
            named = [(name, by_name[name].topic_id if name in by_name else bytes(16), list(partitions))
                     for name, partitions in topics]
        answered = []
        for name, topic_id, partitions in named:
            described = []
            for partition in partitions:
                stored = states.states.get(ShareSnapshotKey(group_id, topic_id, partition))
                if stored is None or stored.start_offset == UNINITIALIZED:
                    described.append(SharePartitionOffset(partition))
                    continue
                end = self._high_watermark(name, partition)
                lag = -1 if end is None else end - stored.start_offset - delivery_complete_count(stored)
                described.append(SharePartitionOffset(partition, stored.start_offset, stored.leader_epoch, lag))
            answered.append((name, topic_id, described))
        return ErrorCode.NONE, answered

    def _high_watermark(self, topic: str, partition: int) -> int | None:
        """The high watermark of a partition led here (the log end a ListOffsets LATEST answers), else None."""
        replica = self.broker.replica_manager.get(topic, partition)
        if replica is None or replica.leader_error(-1) != ErrorCode.NONE:
            return None
        high_watermark: int = replica.log.high_watermark
        return high_watermark

    async def alter_share_group_offsets(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[tuple[int, int]]]]
    ) -> ShareOffsetsError | list[tuple[str, bytes, list[tuple[int, ErrorCode]]]]:
        """AlterShareGroupOffsets of the (topic, [(partition, start offset)]) given: per topic (name, id, [(partition,
        error)]), or the group's refusal. As Kafka's alterShareGroupOffsets: a missing group is made, an empty
        share group (it survives a restart: its epoch record is written with the offsets); a group of another type
        is GROUP_ID_NOT_FOUND, one with members NON_EMPTY_GROUP; a topic that does not exist, or a partition past
        its count, UNKNOWN_TOPIC_OR_PARTITION. The offsets of one request are written in one batch
        (`ShareStateManager.reset`)."""
        try:
            shard = await self._heartbeat_shard(group_id)
        except KafkaError as exc:
            return ShareOffsetsError(exc.code)
        existing = shard.groups.group(group_id)
        if existing is not None and not isinstance(existing, ShareGroup):
            return ShareOffsetsError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        made = existing is None
        group = shard.groups.share_group(group_id, create_if_missing=True)
        if group is None or group.dead:  # None never (made if missing); dead: its deletion is being written
            return ShareOffsetsError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if not group.is_empty():
            return ShareOffsetsError(ErrorCode.NON_EMPTY_GROUP, NON_EMPTY_SHARE_GROUP)
        starts: dict[ShareSnapshotKey, int] = {}
        answered = []
        for name, partitions in topics:
            topic = self.broker.metadata.topics_by_name.get(name)
            topic_id = bytes(16) if topic is None else topic.topic_id
            results = []
            for partition, start_offset in partitions:
                if topic is None or partition not in topic.partitions:
                    results.append((partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                starts[ShareSnapshotKey(group_id, topic_id, partition)] = start_offset
                results.append((partition, ErrorCode.NONE))
            answered.append((name, topic_id, results))
        made_group = group if made else None
        try:
            await shard.share_states.reset(starts, [encode_record(ShareGroupEpochRecord(group_id, 0))] if made else ())
        except KafkaError as exc:
            if made_group is not None and made_group.is_empty() and shard.groups.group(group_id) is made_group:
                shard.groups.remove(group_id)  # as if never made: nothing of it was written
            return ShareOffsetsError(exc.code)
        return answered

    async def delete_share_group_offsets(
        self, group_id: str, topic_names: Sequence[str]
    ) -> ShareOffsetsError | list[tuple[str, bytes, ErrorCode, str | None]]:
        """DeleteShareGroupOffsets of whole topics: per topic (name, id, error, message), or the group's refusal.
        As Kafka's initiateDeleteShareGroupOffsets: the group must be an empty share group (GROUP_ID_NOT_FOUND for
        an unknown group or one of another type, NON_EMPTY_GROUP with members); a topic that does not exist, or
        with no share-partition whose start offset is set, is UNKNOWN_TOPIC_OR_PARTITION. Each share-partition is
        reset to an unset start offset (`ShareStateManager.reset`), all in one batch, so the next leader to read it
        starts afresh from share.auto.offset.reset."""
        error = self.coordinator_error(group_id)
        if error is not ErrorCode.NONE:
            return ShareOffsetsError(error)
        shard = self._shard(group_id)
        group = shard.groups.group(group_id)
        if group is not None and not isinstance(group, ShareGroup):
            return ShareOffsetsError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if group is None or group.dead:
            return ShareOffsetsError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if not group.is_empty():
            return ShareOffsetsError(ErrorCode.NON_EMPTY_GROUP, NON_EMPTY_SHARE_GROUP)
        starts: dict[ShareSnapshotKey, int] = {}
        answered: list[tuple[str, bytes, ErrorCode, str | None]] = []
        for name in dict.fromkeys(topic_names):  # a topic named twice is answered once
            topic = self.broker.metadata.topics_by_name.get(name)
            if topic is None:
                answered.append((name, bytes(16), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, TOPIC_NOT_HOSTED))
                continue
            keys = shard.share_states.initialized(group_id, topic.topic_id)
            if not keys:
                answered.append((name, topic.topic_id, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, NO_OFFSETS_TO_DELETE))
                continue
            starts.update(dict.fromkeys(keys, UNINITIALIZED))
            answered.append((name, topic.topic_id, ErrorCode.NONE, None))
        try:
            await shard.share_states.reset(starts)
        except KafkaError as exc:
            return ShareOffsetsError(exc.code)
        return answered

    # -- offsets --------------------------------------------------------------------------------------------

    async def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: list[OffsetToCommit],
        api_version: int = LATEST_API_VERSION,
    ) -> list[ErrorCode]:
        """OffsetCommit: one error per entry of `offsets`, in order. `generation_id` is a consumer group member's
        member epoch (v9+ for those members)."""
        return await self._store_offsets(group_id, generation_id, member_id, group_instance_id, offsets, None,
                                         api_version)

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

    async def _store_offsets(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                             offsets: list[OffsetToCommit], producer: tuple[int, int] | None,
                             api_version: int = LATEST_API_VERSION) -> list[ErrorCode]:
        try:
            await self.ensure_offsets_topic()
        except KafkaError:
            return [ErrorCode.COORDINATOR_NOT_AVAILABLE] * len(offsets)
        if producer is not None and not group_id:  # OffsetCommit still takes the empty group id, as in Kafka
            return [ErrorCode.INVALID_GROUP_ID] * len(offsets)
        error = self.coordinator_error(group_id)
        if error is not ErrorCode.NONE:
            return [error] * len(offsets)
        return await self._shard(group_id).offsets.commit_offsets(group_id, generation_id, member_id,
                                                                  group_instance_id, offsets, producer, api_version)

    def complete_txn(self, producer_id: int, partition: int, commit: bool) -> None:
        """A commit (`commit`) or abort marker of `producer_id` is appended and replicated on
        `__consumer_offsets-<partition>`: the producer's pending offsets in that partition's groups become
        committed, or are dropped. Every transaction that ran a TxnOffsetCommit here ends with such a marker."""
        shard = self.shards.get(partition)
        if shard is not None:
            shard.replay_end_transaction_marker(producer_id, commit)

    def fetch_offsets(
        self, group_id: str, topics: list[tuple[str, list[int]]] | None, require_stable: bool = False,
        member_id: str | None = None, member_epoch: int = -1,
    ) -> tuple[ErrorCode, list[FetchedOffset]]:
        """Committed offsets of the given partitions (all the group's when `topics` is None); with
        `require_stable`, a partition with a pending transactional offset answers UNSTABLE_OFFSET_COMMIT. v9+ name
        a consumer group member and its epoch (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID)."""
        error = self.coordinator_error(group_id)
        if error is not ErrorCode.NONE:
            return error, []
        return self._shard(group_id).offsets.fetch_offsets(group_id, topics, require_stable, member_id, member_epoch)

    async def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """OffsetDelete: refused for topics the group's members subscribe to."""
        error = self.coordinator_error(group_id)
        if error is not ErrorCode.NONE:
            return error, []
        return await self._shard(group_id).offsets.delete_offsets(group_id, partitions)

    def committed_offsets(self) -> Iterator[tuple[str, OffsetKey, CommittedOffset]]:
        """(group id, (topic, partition), offset) of every committed offset coordinated here (status, metrics)."""
        for shard in list(self.shards.values()):
            for group_id, group_offsets in shard.offsets.offsets.items():
                for key, committed in group_offsets.offsets.items():
                    yield group_id, key, committed

    # -- admin ----------------------------------------------------------------------------------------------

    def list_groups(self, states: set[str]) -> list[Group]:
        """Groups led here, filtered by state name (case-insensitive, as Kafka) when `states` is not empty."""
        return [g for shard in self.shards.values() for g in shard.groups.list_groups(states)]

    def describe_group(self, group_id: str) -> tuple[ErrorCode, ClassicGroup | None]:
        """The group's classic group, or the error of a group this broker does not coordinate; raises GroupIdNotFound
        for an unknown id or a group of another type."""
        error = self.coordinator_error(group_id)
        return error, (self._shard(group_id).groups.describe_group(group_id) if error is ErrorCode.NONE else None)

    async def delete_group(self, group_id: str) -> ErrorCode:
        error = self.coordinator_error(group_id)
        if error is not ErrorCode.NONE:
            return error
        return await self._shard(group_id).delete_group(group_id)

    # -- offset retention (KIP-211) -------------------------------------------------------------------------

    def _schedule_retention_check(self) -> None:
        self._retention_timer = asyncio.get_running_loop().call_later(
            RETENTION_CHECK_INTERVAL_S, lambda: self.spawn(self.expire_offsets())
        )

    async def expire_offsets(self) -> None:
        """Remove expired offsets, then groups left with neither members nor offsets; re-arms its timer."""
        deadline = self.now_ms() - self.retention_ms
        for partition, shard in list(self.shards.items()):
            if self.shards.get(partition) is shard:  # not unloaded meanwhile
                await shard.expire_offsets(deadline)
        self._schedule_retention_check()
