"""The partitions this broker hosts: created, led and deleted as metadata records arrive; appends and reads.

Rules:
- Partitions follow the metadata (`apply_metadata`): a replica assigned here gets a Partition and a log; a
  removed topic, or a reassignment that completed without this broker, loses both; a leadership with a newer
  epoch is taken before any request sees the partition.
- Every per-partition rule (epoch checks, min.insync.replicas, the idempotence verdict, DivergingEpoch, read
  bounds, KIP-207, truncation) is `Partition`'s; this module finds the partition, follows the metadata and
  schedules what a partition's decision asks for (AlterPartition, a fetcher hand-over).
- A partition followed here goes to the replica fetcher of its leader (`broker/replica/replica_fetcher.py`) on every new
  leader or leader epoch; one led here is taken from the fetchers.
- acks=all completes when the high watermark passes the batch (`Partition.wait_for_replication`, the
  delayed-produce purgatory); on one broker that is right after the local append.
- ISR (leader): a follower fetch that reaches the high watermark and the leader's epoch start adds the
  follower; a periodic check (every replica.lag.time.max.ms / 2) removes followers that have not caught up
  within replica.lag.time.max.ms. Both go to the controller as AlterPartition, one in flight per partition.
- Reads never decode records: they return file ranges (`FileRecords`) that the server sends with sendfile.
- Internal topics (`__consumer_offsets`) use the same logs through `ensure_internal_topic`, `append_internal`
  and `read_internal`, which do decode records: they serve the group coordinator, not the hot path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from epoch_broker.broker.config import BrokerConfig, StartupError, topic_config
from epoch_broker.broker.config.catalogue import CATALOGUE
from epoch_broker.broker.config.definition import LOG_DEFAULTS
from epoch_broker.broker.controller.channel import ControllerChannel
from epoch_broker.broker.controller.replication_control import NewTopic
from epoch_broker.broker.faults import BrokerFaults
from epoch_broker.broker.metadata.image import MetadataCache, TopicState
from epoch_broker.broker.metadata.records import RemoveTopicRecord
from epoch_broker.broker.replica.partition import FetchResult, Partition
from epoch_broker.broker.replica.replica_fetcher import InterBrokerLink, ReplicaFetchers
from epoch_broker.broker.replica.share_persister import SharePersister
from epoch_broker.broker.replica.share_sessions import ShareSessionCache
from epoch_broker.broker.security.listeners import client_security
from epoch_broker.protocol.errors import ErrorCode, KafkaError
from epoch_broker.protocol.records import EndTxnMarker, iter_batches, iter_records, parse_end_txn_marker
from epoch_broker.storage.log import LogConfig
from epoch_broker.storage.log_manager import LogManager
from epoch_broker.storage.log_validator import ValidationRules

if TYPE_CHECKING:
    from epoch_broker.broker.metrics import ProcessMetrics

log = logging.getLogger(__name__)

INTERNAL_APPEND_TIMEOUT_S = 5.0
# A Metadata answer that would name a leader whose replication link broke less than LOST_LINK_WINDOW_S ago waits up
# to LOST_LEADER_HOLD_S for the controller to fence it (`settle_leaders`).
LOST_LINK_WINDOW_S = 5.0
LOST_LEADER_HOLD_S = 0.1


class InternalRecord(NamedTuple):
    """A record of an internal topic as its coordinator replays it."""

    offset: int
    key: bytes | None
    value: bytes | None
    producer_id: int = -1
    transactional: bool = False  # written in a transaction: applies only once its commit marker is read
    marker: EndTxnMarker | None = None  # a control batch: the commit or abort of `producer_id`'s transaction


def log_config_for(config: BrokerConfig, topic_configs: dict[str, Any]) -> LogConfig:
    """storage's LogConfig for a topic, from its effective configs (config.topic_config): every key the catalogue
    maps to a LogConfig field one to one (its `log_field`: segment.bytes, retention.ms, ...), then what no single
    key gives as is: flush.ms unset is the log's default (never), cleanup.policy's list is a set, and four keys make
    the validation rules of client batches."""
    cleanup_policy = frozenset(p for p in topic_configs["cleanup.policy"].split(",") if p)  # empty: neither
    flush_ms = topic_configs["flush.ms"]
    return LogConfig(
        **{key.log_field: topic_configs[key.topic] if key.topic else getattr(config, key.attr)
           for key in CATALOGUE if key.log_field},
        flush_interval_ms=LOG_DEFAULTS.flush_interval_ms if flush_ms is None else flush_ms,
        cleanup_policy=cleanup_policy,
        validation=ValidationRules(
            compacted="compact" in cleanup_policy,
            timestamp_before_max_ms=topic_configs["message.timestamp.before.max.ms"],
            timestamp_after_max_ms=topic_configs["message.timestamp.after.max.ms"],
            check_timestamps=topic_configs["message.timestamp.type"] == "CreateTime"),
    )


def _now_ms() -> float:
    return time.monotonic() * 1000


def _leading(topic: str, led: list[tuple[int, int, int]]) -> str:
    """One log line for the partitions of a topic led here from one metadata change on: `t-0: leading in epoch 3
    from offset 120` for one, and for many (`__consumer_offsets` at a group's first use: 50) one line still,
    `t: leading 50 partitions: 0-49 in epoch 0 from offset 0`, grouped by epoch and offset."""
    if len(led) == 1:
        ((index, epoch, offset),) = led
        return f"{topic}-{index}: leading in epoch {epoch} from offset {offset}"
    by_start: dict[tuple[int, int], list[int]] = {}
    for index, epoch, offset in sorted(led):
        by_start.setdefault((epoch, offset), []).append(index)
    return f"{topic}: leading {len(led)} partitions: " + "; ".join(
        f"{_ranges(indexes)} in epoch {epoch} from offset {offset}" for (epoch, offset), indexes in by_start.items())


def _ranges(indexes: list[int]) -> str:
    """Sorted partition numbers as runs: [0, 1, 2, 5, 7, 8] -> `0-2, 5, 7-8`."""
    runs: list[list[int]] = []
    for index in indexes:
        if runs and index == runs[-1][1] + 1:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)



def _inter_broker_link(config: BrokerConfig) -> InterBrokerLink:
    """This broker's login to its peers' inter-broker listener. A process with its own controller (one node,
    as a test broker with only a SASL listener) has no peer to log in to: a missing login is its error only if
    a fetcher ever needs it; a broker of a cluster cannot start without one."""
    listener = config.inter_broker_listener
    try:
        return InterBrokerLink(listener, client_security(config, listener, config.sasl_mechanism_inter_broker_protocol))
    except StartupError as exc:
        if "controller" not in config.process_roles:
            raise
        return InterBrokerLink(listener, None, str(exc))

class ReplicaManager:
    def __init__(self, config: BrokerConfig, log_manager: LogManager, metadata: MetadataCache,
                 channel: ControllerChannel, faults: BrokerFaults, broker_epoch: Callable[[], int],
                 metrics: ProcessMetrics | None = None) -> None:
        self.config = config
        self.node_id = config.node_id
        self.log_manager = log_manager
        self.metadata = metadata
        self.channel = channel
        self.faults = faults
        self.metrics = metrics
        self.broker_epoch = broker_epoch  # the current epoch changes when the broker re-registers
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.partitions_by_topic_id: dict[bytes, dict[int, Partition]] = {}
        self.stopping = False  # set at shutdown: long polls answer at once
        self.may_open_log: Callable[[], bool] = lambda: True  # the broker's file budget, once it is known
        self.fetchers = ReplicaFetchers(self.node_id, metadata, faults, broker_epoch, _inter_broker_link(config))
        self._isr_check: asyncio.Task[None] | None = None  # started when a replicated partition is first led here
        self._alter_tasks: set[asyncio.Task[None]] = set()
        self._metadata_applied = asyncio.Event()  # set (and replaced) whenever metadata records are applied
        self.share_sessions = ShareSessionCache()  # the share consumers fetching here (KIP-932)
        self.share_persister: SharePersister | None = None  # where share-partition state is durable (set by app)

    # -- following the metadata ---------------------------------------------------------------------

    async def settle_leaders(self, topics: Iterable[TopicState]) -> None:
        """Before a Metadata answer names the leaders of `topics`: if the link to one broke moments ago (this broker
        replicates from it), wait at most LOST_LEADER_HOLD_S while the controller still has it unfenced. A killed
        broker is fenced within milliseconds (the controller finds its listener refusing connections), but a
        client's first leader query can come sooner; answered with the dead leader, librdkafka waits for its 1 s
        topic scan to ask again. A live leader that lost only this link costs one answer the hold (once per lost
        link), never a wrong answer."""
        lost = self.fetchers.recently_lost(LOST_LINK_WINDOW_S)
        suspects = lost and lost & {p.leader for topic in topics for p in topic.partitions.values()}
        if not suspects:
            return
        loop = asyncio.get_running_loop()
        start = loop.time()
        deadline = start + LOST_LEADER_HOLD_S
        while suspects & self.metadata.live_brokers.keys() and (remaining := deadline - loop.time()) > 0:
            applied = self._metadata_applied
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(applied.wait(), remaining)
        still_live = suspects & self.metadata.live_brokers.keys()
        log.info("Metadata answer held %.0f ms: the replication link to leader(s) %s broke moments ago; %s",
                 (loop.time() - start) * 1000, sorted(suspects),
                 f"still unfenced: {sorted(still_live)}" if still_live else "fenced meanwhile")
        # held once: a live leader's link trouble delays no further answer (until the link works and fails again)
        self.fetchers.held_for(still_live)

    def apply_metadata(self, records: list[Any]) -> None:
        """Bring hosted partitions in line with the metadata after `records` were applied to the cache."""
        self._metadata_applied.set()
        self._metadata_applied = asyncio.Event()
        for record in records:
            if isinstance(record, RemoveTopicRecord):
                self._remove_topic(record.topic_id)
        touched = {r.topic_id for r in records if hasattr(r, "topic_id") and not isinstance(r, RemoveTopicRecord)}
        for topic_id in touched:
            topic = self.metadata.topics_by_id.get(topic_id)
            if topic is not None:
                self._sync_topic(topic)

    def _sync_topic(self, topic: TopicState) -> None:
        configs = topic_config(self.config, topic.configs)
        hosted = self.partitions_by_topic_id.setdefault(topic.topic_id, {})
        led: list[tuple[int, int, int]] = []  # (partition, leader epoch, log end offset) led here from now on
        for index, state in topic.partitions.items():
            if self.node_id not in state.replicas:
                if (moved := hosted.pop(index, None)) is not None:  # a reassignment completed without us
                    log.info("%s-%d: no longer a replica here (reassigned to %s): deleting the replica",
                             topic.name, index, list(state.replicas))
                    self._drop_replica(moved)
                continue
            partition = hosted.get(index)
            if partition is None:
                if (topic.name, index) not in self.log_manager.logs and not self.may_open_log():
                    log.error("%s-%d: not hosted here: a new log would exceed this broker's open-files limit "
                              "(raise ulimit -n, or place the partition on other brokers)", topic.name, index)
                    continue
                partition_log = self.log_manager.get_or_create_log(topic.name, index)
                partition = Partition(topic.name, index, topic.topic_id, partition_log, self.node_id, configs,
                                      self.faults, self.metrics)
                hosted[index] = self.partitions[(topic.name, index)] = partition
            partition.configure(configs, log_config_for(self.config, configs))
            followed = partition.leader_id, partition.leader_epoch
            if partition.update(state.leader, state.leader_epoch, state.partition_epoch, state.replicas, state.isr,
                                _now_ms()):
                led.append((index, state.leader_epoch, partition.log.log_end_offset))
                if len(state.replicas) > 1 and self._isr_check is None:
                    self._isr_check = asyncio.create_task(self._check_isr(), name=f"isr-check-{self.node_id}")
            if partition.is_leader or partition.leader_id < 0:
                self.fetchers.unfollow(partition)
            elif (partition.leader_id, partition.leader_epoch) != followed:
                self.fetchers.follow(partition)
        if led:
            log.info("%s", _leading(topic.name, led))

    def _remove_topic(self, topic_id: bytes) -> None:
        for partition in self.partitions_by_topic_id.pop(topic_id, {}).values():
            self._drop_replica(partition)

    def _drop_replica(self, partition: Partition) -> None:
        """The topic was deleted, or the replica reassigned away (what the operator asked: Kafka deletes it too)."""
        del self.partitions[(partition.topic, partition.index)]
        self.fetchers.unfollow(partition)
        partition.remove()
        self.log_manager.delete_log(partition.topic, partition.index)

    def move_strays(self) -> None:
        """Start: logs of partitions the metadata no longer places here (deleted or moved while we were down)
        are renamed `-stray` and left for the operator, never deleted (Kafka 3.7)."""
        for topic, index in list(self.log_manager.logs):
            if (topic, index) not in self.partitions:
                moved = self.log_manager.move_stray_log(topic, index)
                log.warning("%s-%d is not assigned to this broker: its log is kept as %s (delete it once you know "
                            "it is not needed)", topic, index, moved)

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def get_by_id(self, topic_id: bytes, index: int) -> Partition | None:
        return self.partitions_by_topic_id.get(topic_id, {}).get(index)

    def lookup_error(self, topic: str, index: int) -> ErrorCode:
        """Why there is no local partition: the topic exists elsewhere (not leader) or not at all."""
        if self.metadata.partition(topic, index) is not None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    # -- produce ------------------------------------------------------------------------------------

    @property
    def verifies_transactions(self) -> bool:
        """Whether a transactional produce is verified with its coordinator before it opens a transaction in a
        partition (KIP-890): `transaction.partition.verification.enable`, on a broker claiming 3.6 or later."""
        release = self.config.kafka_version
        return self.config.transaction_partition_verification_enable and (
            release is None or release.verifies_transactional_partitions)

    # -- fetch --------------------------------------------------------------------------------------

    def release_waiters(self) -> None:
        """Shutdown: answer every long-polling fetch now."""
        self.stopping = True
        for partition in self.partitions.values():
            partition.wake_waiters()

    async def shutdown(self) -> None:
        """Stop the replica fetchers, the ISR check, AlterPartitions and share state writes in flight (before the
        logs close)."""
        tasks = [*self._alter_tasks, *(task for p in self.partitions.values() for task in p.share_tasks())]
        if self._isr_check is not None:
            tasks.append(self._isr_check)
        for task in tasks:
            task.cancel()
        await asyncio.gather(self.fetchers.shutdown(), *tasks, return_exceptions=True)

    # -- leader: follower fetches and the ISR ---------------------------------------------------------

    def fetch(self, partition: Partition, fetch_offset: int, current_leader_epoch: int, last_fetched_epoch: int,
              replica_id: int, max_bytes: int, first_batch_whole: bool, record_follower_fetch: bool,
              read_committed: bool = False) -> FetchResult:
        """One partition of a Fetch; a follower's fetch that makes it eligible adds it to the ISR (a fenced broker
        stays out: the controller would refuse it)."""
        result = partition.fetch_records(fetch_offset, current_leader_epoch, last_fetched_epoch, replica_id,
                                         max_bytes, first_batch_whole, record_follower_fetch, _now_ms(),
                                         read_committed)
        if (result.follower_fetch_recorded and partition.can_join_isr(replica_id)
                and replica_id in self.metadata.live_brokers):
            self._alter_isr(partition, (*partition.isr, replica_id))
        return result

    async def _check_isr(self) -> None:
        lag_max_ms = self.config.replica_lag_time_max_ms
        while True:
            await asyncio.sleep(lag_max_ms / 2000)
            now_ms = _now_ms()
            for partition in list(self.partitions.values()):
                lagging = partition.out_of_sync(now_ms, lag_max_ms)
                if lagging:
                    log.info("%s-%d: followers %s not caught up within %d ms: leaving the ISR", partition.topic,
                             partition.index, lagging, lag_max_ms)
                    self._alter_isr(partition, tuple(r for r in partition.isr if r not in lagging))

    def _alter_isr(self, partition: Partition, new_isr: tuple[int, ...]) -> None:
        old_isr = partition.isr
        leader_epoch, partition_epoch = partition.begin_isr_change(new_isr)
        task = asyncio.create_task(self._send_alter_partition(partition, old_isr, new_isr, leader_epoch,
                                                              partition_epoch))
        self._alter_tasks.add(task)
        task.add_done_callback(self._alter_tasks.discard)

    async def _send_alter_partition(self, partition: Partition, old_isr: tuple[int, ...], new_isr: tuple[int, ...],
                                    leader_epoch: int, partition_epoch: int) -> None:
        answer = None
        try:
            result = await self.channel.alter_partition(self.node_id, self.broker_epoch(), partition.topic_id,
                                                        partition.index, leader_epoch, partition_epoch, new_isr)
        except (OSError, KafkaError) as exc:
            log.warning("%s-%d: AlterPartition to %s failed: %s", partition.topic, partition.index, list(new_isr), exc)
        else:
            if result.error == ErrorCode.NONE:
                answer = result.leader_epoch, result.partition_epoch, result.isr
                if self.metrics is not None:
                    self.metrics.record_isr_change(len(old_isr), len(result.isr))
            else:
                # The metadata will settle it (INELIGIBLE_REPLICA: a fenced follower; stale epochs: newer records).
                log.info("%s-%d: AlterPartition to %s refused: %s", partition.topic, partition.index, list(new_isr),
                         result.error.name)
        partition.complete_isr_change(new_isr, answer)

    # -- internal topics (the group coordinator's __consumer_offsets) -------------------------------

    async def ensure_internal_topic(self, name: str, partitions: int, replication_factor: int,
                                    configs: dict[str, str]) -> None:
        """Create the topic `name` with `partitions` partitions of `replication_factor` replicas (at most one per
        live broker) and topic `configs` unless it exists.

        When it returns, this broker hosts the partitions it was assigned and leads them where elected (the
        embedded controller commits and publishes the records before returning; a coroutine so that a remote
        controller fits behind the same call). Raises KafkaError if the controller refuses.
        """
        if name in self.metadata.topics_by_name:
            return
        factor = max(1, min(replication_factor, len(self.metadata.live_brokers)))
        (result,) = await self.channel.create_topics([NewTopic(name, partitions, factor, {}, dict(configs))], False)
        if result.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            raise KafkaError(result.error_message or "", result.error_code)

    async def append_internal(self, topic: str, partition: int, batch: bytearray,
                              timeout_s: float = INTERNAL_APPEND_TIMEOUT_S) -> int:
        """Append one record batch to `topic`-`partition` as its leader and return its base offset, once the
        high watermark has passed it (acks=all semantics; immediate on one broker).

        The batch is stamped in place (offsets, leader epoch). Raises KafkaError (NOT_LEADER_OR_FOLLOWER,
        UNKNOWN_TOPIC_OR_PARTITION, CORRUPT_MESSAGE, a storage error, REQUEST_TIMED_OUT) if it cannot be
        appended and replicated.
        """
        hosted = self.get(topic, partition)
        if hosted is None:
            raise KafkaError(f"{topic}-{partition} is not hosted here", self.lookup_error(topic, partition))
        result = hosted.append_records_to_leader(batch, acks_all=True)
        if result.error != ErrorCode.NONE:
            raise KafkaError(result.message or "", result.error)
        error = await hosted.wait_for_replication(result.last_offset, result.leader_epoch, timeout_s)
        if error != ErrorCode.NONE:
            raise KafkaError(f"{topic}-{partition}: not replicated", error)
        return result.base_offset

    def read_internal(self, topic: str, partition: int, start_offset: int = 0) -> Iterator[InternalRecord]:
        """Every record from `start_offset` to the log end, decoded (decompressed); a transaction marker comes as
        one InternalRecord with its `marker` (and no key or value).

        Reads in 1 MiB chunks, so loading a large partition does not hold it all in memory. Raises KafkaError
        when the partition is not hosted here.
        """
        hosted = self.get(topic, partition)
        if hosted is None:
            raise KafkaError(f"{topic}-{partition} is not hosted here", self.lookup_error(topic, partition))
        partition_log = hosted.log
        offset = max(start_offset, partition_log.log_start_offset)
        while offset < partition_log.log_end_offset:
            chunk = partition_log.read_bytes(offset, 1 << 20)
            if not chunk:
                return
            for position, header in iter_batches(chunk):
                if header.is_control:
                    if header.base_offset >= start_offset:
                        yield InternalRecord(header.base_offset, None, None, header.producer_id, True,
                                             parse_end_txn_marker(chunk, position, header))
                else:
                    for record in iter_records(chunk, position, header):
                        if record.offset >= start_offset:
                            yield InternalRecord(record.offset, record.key, record.value, header.producer_id,
                                                 header.is_transactional)
                offset = header.next_offset
