"""One partition on this broker: the one writer of its state and the one place a per-partition rule is decided
(Kafka's `Partition`: `appendRecordsToLeader`, `fetchRecords`, `truncateTo`, `checkCurrentLeaderEpoch`).

`ReplicaManager` routes requests here and schedules what a decision asks for (an AlterPartition, a fetcher
hand-over); handlers turn the results into responses; the replica fetcher calls the follower side. Nobody else
assigns a field of a Partition or writes its log (tests/broker/test_partition_ownership.py checks).

Rules:
- Becoming leader with a newer epoch records (epoch, log end offset) in the epoch cache, which checkpoints it,
  before the partition accepts a produce (KIP-101): the epoch's start offset is on disk before its data.
  Metadata with an older (leader epoch, partition epoch) is ignored (KIP-232).
- KIP-320 (`check_leader_epoch`): -1 skips the check; equal serves; a lower epoch is FENCED_LEADER_EPOCH (74,
  the client is behind); a higher one UNKNOWN_LEADER_EPOCH (75, we are behind). Every API checks it first,
  then NOT_LEADER_OR_FOLLOWER off the leader (`leader_error`). Produce (KIP-359) takes the same check.
- Produce (`append_records_to_leader`): the epoch check; acks=all needs min.insync.replicas in the ISR before
  anything is appended (NOT_ENOUGH_REPLICAS); each batch within max.message.bytes; the idempotent producer's
  sequence checked (a duplicate is answered with the original offsets); then offsets and the leader epoch are
  stamped and the batches written. A batch whose codec this broker cannot decode (an id Kafka leaves undefined,
  attributes 5-7) is UNSUPPORTED_COMPRESSION_TYPE, which producers do not retry, with one WARNING naming the
  codec and the client: never the silent retries of a CORRUPT_MESSAGE until the producer times out.
- Fetch (`fetch_records`): the epoch check; with last_fetched_epoch (v12+), a fetcher whose history diverged
  from ours gets DivergingEpoch (where our history of that epoch ends) and no records; consumers read up to the
  high watermark (read_committed: the last stable offset, with the aborted transactions of what they read),
  followers up to the log end; a follower's fetch records its log end.
- Transactions (KIP-98): a producer's data is judged by the producer state (sequence, epoch, INVALID_TXN_STATE
  outside its open transaction); a coordinator's marker (`append_end_txn_marker`) is refused from an older
  coordinator epoch (TRANSACTION_COORDINATOR_FENCED) or producer epoch (INVALID_PRODUCER_EPOCH).
- KIP-890 verification (Kafka's VerificationGuard): a client's transactional batch that would open its producer's
  transaction here (none open) needs the coordinator's word that the partition is in that transaction. The produce
  takes the producer's guard (`maybe_start_transaction_verification`) before asking, and the append needs the
  partition to still hold that same guard, else INVALID_TXN_STATE and nothing is written. Any transactional write
  of the producer here (its first batch, a marker) drops its guard, so an answer that crossed an abort marker opens
  nothing (Kafka's ABA case: verified, aborted, a new transaction without this partition, the stale answer lands);
  so does leaving leadership, since this replica's markers then come through replication. Appends that pass no
  guard (None: the coordinators' own writes, a broker not verifying) are not checked.
- KIP-207: the log end at the moment of becoming leader is kept; until the high watermark reaches it, offsets
  are not available to consumers (`fetch_offset_for_timestamp` answers OFFSET_NOT_AVAILABLE), unless the topic
  allows unclean elections (a truncated history is accepted there anyway).
- As leader, every follower fetch records the follower's log end and when it last caught up (Kafka's rule:
  its fetch offset reached the leader's log end at this fetch or at the previous one). A follower that has not
  fetched in the current leader epoch has an unknown log end, which holds the high watermark back.
- The high watermark is the lowest log end over the maximal ISR: the ISR plus the members of a pending
  AlterPartition (so an expansion never lets it pass a joining follower). It never moves backwards. When it
  moves, or the ISR or leadership changes, waiting fetches and acks=all produces are woken through futures:
  nothing polls.
- ISR changes: one AlterPartition in flight (`begin_isr_change`); its answer counts only in the leader epoch
  that asked (`complete_isr_change`).
- Follower truncation (`truncate_to_epoch_end`): down to min(the leader's end of the answered epoch, our own
  end of it); if we never had the answered epoch (KIP-279) we cut to the end of our largest epoch below it and
  ask again; an undefined answer keeps the log. Never to the high watermark (KIP-101).
- Share groups (KIP-932): the share-partitions (`share_partition.py`: the in-flight records of one share group
  here) live on the leader and change only through `share_fetch`, `share_acknowledge` and `share_release_member`,
  each after the leader check (NOT_LEADER_OR_FOLLOWER off the leader) and after expiring the locks that ran out.
  Their state is durable at the share group's coordinator (`share_persister.py`): a leader first reads it, at its
  leader epoch (fencing the leaders before it); state never written starts where the group's
  `share.auto.offset.reset` says (the high watermark, the log start, or the first record since a time) and is
  written at once. What the state holds past this log's end is forgotten (a leader change with truncation: those
  offsets will hold other records). Acquisitions and acknowledgements are written before they are answered:
  records are sent only once their delivery counts are durable, an acknowledgement succeeds only once it is;
  releases (sessions ending) and lock expiries are written behind. A write that fails (a newer leader read the
  state, its offsets were reset, the coordinator is unreachable) drops the share-partition: nothing of it is
  answered, and the next share fetch reads the durable state again.
  A share fetch reads from the share-partition's next fetch offset up to the high watermark (read_committed
  groups: the last stable offset, the batches of aborted transactions archived as they are acquired) and sends
  the whole batches holding what it acquired. One timer per share-partition expires its locks and wakes waiting
  fetches; records released or expired wake them too. A log start past the share-partition's start (retention,
  DeleteRecords) archives what it passed. Leaving leadership drops the share-partitions.
- `fault.high.watermark.held`: follower fetches see `follower_high_watermark`, frozen at the value the high
  watermark had when the hold began.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from epoch_broker.broker import events
from epoch_broker.broker.faults import BrokerFaults
from epoch_broker.broker.groups.records import ShareSnapshotKey
from epoch_broker.broker.replica.share_partition import (
    AcquiredRecords,
    SharePartition,
    ShareSnapshot,
)
from epoch_broker.broker.replica.share_persister import SharePersister, ShareWriter
from epoch_broker.protocol.errors import (
    ErrorCode,
    KafkaError,
    OffsetOutOfRange,
    UnsupportedCompressionTypeError,
    UnsupportedForMessageFormat,
)
from epoch_broker.protocol.records import LOG_OVERHEAD, BatchHeader, EndTxnMarker, build_end_txn_marker, iter_batches
from epoch_broker.storage.file_records import FileRecords
from epoch_broker.storage.log import LATEST_TIMESTAMP, AppendInfo, LogConfig, PartitionLog
from epoch_broker.storage.producer_state import Verdict
from epoch_broker.storage.transaction_index import AbortedTxn

if TYPE_CHECKING:
    from epoch_broker.broker.metrics import ProcessMetrics

log = logging.getLogger(__name__)

CONSUMER = -1  # replica ids that are not brokers (Kafka's FetchRequest.CONSUMER_REPLICA_ID, DEBUGGING_REPLICA_ID)
DEBUGGING = -2
# ListOffsets' special timestamps; with no tiered storage the local log start is the log start, and nothing is
# in remote storage (LATEST_TIERED and EARLIEST_PENDING_UPLOAD answer offset -1, as Kafka without it)
EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -2, -1, -3, -4, -5, -6
_VERDICT_ERRORS = {
    Verdict.OUT_OF_ORDER_SEQUENCE: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    Verdict.INVALID_PRODUCER_EPOCH: ErrorCode.INVALID_PRODUCER_EPOCH,
    Verdict.INVALID_TXN_STATE: ErrorCode.INVALID_TXN_STATE,
    Verdict.COORDINATOR_FENCED: ErrorCode.TRANSACTION_COORDINATOR_FENCED,
}


class VerificationGuard:
    """One verification of one producer's transaction in one partition, compared by identity (Kafka's
    VerificationGuard)."""

    __slots__ = ()


NO_GUARD = VerificationGuard()  # Kafka's SENTINEL: a verifying broker's produce that took no guard; verifies nothing


class TransactionVerification(NamedTuple):
    """What a produce must ask the coordinator before its batches may open a transaction here."""

    guard: VerificationGuard
    producer_id: int
    producer_epoch: int


@dataclass(slots=True)
class AppendResult:
    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    last_offset: int = -1
    leader_epoch: int = -1  # the leader epoch the batches were appended in
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    record_errors: tuple[tuple[int, str], ...] = ()  # (index of a record in its batch, why it was refused)


@dataclass(slots=True)
class FetchResult:
    """One partition's part of a Fetch. `diverging_epoch` is (epoch, end offset) when the fetcher's log diverged."""

    error: ErrorCode = ErrorCode.NONE
    records: FileRecords | bytes = b""
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: list[AbortedTxn] | None = None  # read_committed: those overlapping the records
    diverging_epoch: tuple[int, int] | None = None
    follower_fetch_recorded: bool = False


@dataclass(frozen=True, slots=True)
class ShareSettings:
    """A share group's settings for its share-partitions (the group.share.* keys; share.auto.offset.reset)."""

    record_lock_duration_ms: int
    delivery_count_limit: int
    max_record_locks: int
    # where a new share-partition starts (share.auto.offset.reset), as ListOffsets names it: LATEST_TIMESTAMP (-1,
    # the high watermark), EARLIEST_TIMESTAMP (-2, the log start) or a timestamp (the first record since; by_duration)
    start_timestamp: int = LATEST_TIMESTAMP
    read_committed: bool = False  # share.isolation.level: up to the last stable offset, aborted batches archived


@dataclass(slots=True)
class ShareFetchResult:
    """One partition's part of a ShareFetch: the batches holding the acquired records, and the ranges acquired."""

    error: ErrorCode = ErrorCode.NONE
    records: bytes = b""
    acquired: tuple[AcquiredRecords, ...] = ()


def _aborted_batches(headers: list[tuple[int, BatchHeader]], aborted: list[AbortedTxn]) -> list[tuple[int, int]]:
    """The (base, last) offsets of the transactional data batches an aborted transaction wrote."""
    return [(header.base_offset, header.last_offset) for _, header in headers
            if header.is_transactional and not header.is_control
            and any(txn.producer_id == header.producer_id and txn.first_offset <= header.base_offset <= txn.last_offset
                    for txn in aborted)]


async def wait_for_change(partitions: list[Partition], timeout_s: float) -> None:
    """A long poll: until one of `partitions` wakes its waiters (an append, a high watermark or leadership move,
    records released to share groups) or `timeout_s` passes."""
    future = asyncio.get_running_loop().create_future()
    for partition in partitions:
        partition.add_waiter(future)
    try:
        await asyncio.wait((future,), timeout=timeout_s)
    finally:
        for partition in partitions:
            partition.remove_waiter(future)


def _now_ms() -> int:
    """The clock of acquisition locks (monotonic: a wall-clock step must not expire or extend them)."""
    return int(time.monotonic() * 1000)


@dataclass(slots=True)
class OffsetAnswer:
    """ListOffsets for one partition: the offset, the timestamp of its record, and its leader epoch."""

    error: ErrorCode = ErrorCode.NONE
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1


class ActiveProducer(NamedTuple):
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower in the current leader epoch."""

    log_end: int = -1  # unknown until it fetches in this epoch
    last_caught_up_ms: float = 0.0
    last_fetch_leader_end: int = -1  # the leader's log end at the previous fetch
    last_fetch_ms: float = 0.0


class Partition:
    def __init__(self, topic: str, index: int, topic_id: bytes, log: PartitionLog, node_id: int,
                 configs: dict[str, Any], faults: BrokerFaults, metrics: ProcessMetrics | None = None) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.node_id = node_id
        self.configs = configs  # effective topic configs (config.topic_config)
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.faults = faults
        self.metrics = metrics  # counts this partition's events (None: metrics are off)
        self.leader_log_end_at_election = 0  # KIP-207, and the start offset of the current leader epoch
        # The leader epoch from which this broker has led without a break (-1: not leading): an acks=all produce
        # appended before a break is never acknowledged, even if the broker leads again by then.
        self.leading_since_epoch = -1
        self.followers: dict[int, FollowerState] = {}
        self.pending_isr: tuple[int, ...] | None = None  # the ISR asked for by the AlterPartition in flight
        self._held_high_watermark: int | None = None
        self._waiters: set[asyncio.Future[None]] = set()
        self._verification_guards: dict[int, VerificationGuard] = {}  # by producer id (KIP-890)
        self.share_partitions: dict[str, SharePartition] = {}  # by share group id, on the leader (KIP-932)
        self._share_writers: dict[str, ShareWriter] = {}  # their durable state (none: kept in memory only)
        self._share_loading: dict[str, asyncio.Future[ErrorCode]] = {}
        self._share_writes_behind: set[asyncio.Task[ErrorCode]] = set()
        self._share_timers: dict[str, asyncio.TimerHandle] = {}

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index}, leader={self.leader_id}, epoch={self.leader_epoch})"

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.node_id

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def under_min_isr(self) -> bool:
        min_insync_replicas: int = self.configs["min.insync.replicas"]
        return len(self.isr) < min_insync_replicas

    def follower_lags(self) -> dict[int, int]:
        """As leader: how many offsets each follower lacks (all of the log until it fetches in this epoch)."""
        log_end = self.log.log_end_offset
        return {replica: log_end - max(follower.log_end, 0) for replica, follower in self.followers.items()}

    # -- following the metadata ---------------------------------------------------------------------

    def configure(self, configs: dict[str, Any], log_config: LogConfig) -> None:
        """The topic's effective configs changed (or were first known)."""
        self.configs = configs
        self.log.config = log_config

    def update(self, leader: int, leader_epoch: int, partition_epoch: int, replicas: tuple[int, ...],
               isr: tuple[int, ...], now_ms: float) -> bool:
        """Apply the controller's view of this partition; returns True if this broker just became its leader
        (or, as leader, entered a new epoch)."""
        if (leader_epoch, partition_epoch) < (self.leader_epoch, self.partition_epoch):
            return False  # metadata never goes backwards (KIP-232)
        new_leader_epoch = leader == self.node_id and leader_epoch > self.leader_epoch
        changed = (leader, leader_epoch, isr) != (self.leader_id, self.leader_epoch, self.isr)
        if leader != self.node_id:
            self.leading_since_epoch = -1
            self._verification_guards.clear()
            self._drop_share_partitions()
        elif not self.is_leader:
            self.leading_since_epoch = leader_epoch
        self.leader_id, self.leader_epoch, self.partition_epoch = leader, leader_epoch, partition_epoch
        self.replicas, self.isr = replicas, isr
        if new_leader_epoch:
            end = self.log.log_end_offset
            self.log.epoch_cache.assign(leader_epoch, end)  # checkpointed before any produce of the epoch
            self.leader_log_end_at_election = end
            self.pending_isr = None  # an answer for the old epoch is ignored (see `complete_isr_change`)
            # Kafka's reset: ISR members count as caught up now, so the new leader does not drop them at once.
            self.followers = {r: FollowerState(last_caught_up_ms=now_ms if r in isr else 0.0)
                              for r in replicas if r != self.node_id}
        if self.is_leader:
            self.maybe_advance_high_watermark()
        if changed:
            self.wake_waiters()  # acks=all waiters re-check leadership and the ISR size
        return new_leader_epoch

    def remove(self) -> None:
        """The topic was deleted: nobody leads here any more, and every waiter is answered."""
        self.leader_id = -1
        self.leading_since_epoch = -1
        self._drop_share_partitions()
        self.wake_waiters()

    # -- the leader-epoch check (KIP-320, KIP-359) ----------------------------------------------------

    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.NONE
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.UNKNOWN_LEADER_EPOCH

    def leader_error(self, current_leader_epoch: int) -> ErrorCode:
        """The KIP-320 check, then NOT_LEADER_OR_FOLLOWER if this broker does not lead the partition."""
        error = self.check_leader_epoch(current_leader_epoch)
        if error == ErrorCode.NONE and not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return error

    # -- produce --------------------------------------------------------------------------------------

    def maybe_start_transaction_verification(self, records: Any) -> TransactionVerification | None:
        """KIP-890: if the batches' transactional producer has no transaction open here, its guard (taken now, or the
        one a verification in flight took) and who to verify; None when there is nothing to verify (no
        transactional batch, its transaction open here) or the append will refuse the batches anyway (not the
        leader, bad framing)."""
        if not self.is_leader:
            return None
        try:
            for _, header in iter_batches(records):
                if header.is_transactional and not header.is_control and header.producer_id >= 0:
                    if header.producer_id in self.log.producer_state.open_txns:
                        return None
                    guard = self._verification_guards.setdefault(header.producer_id, VerificationGuard())
                    return TransactionVerification(guard, header.producer_id, header.producer_epoch)
        except KafkaError:
            return None
        return None

    def append_records_to_leader(self, records: Any, current_leader_epoch: int = -1, acks_all: bool = False,
                                 client: str = "this broker", verification_guard: VerificationGuard | None = None
                                 ) -> AppendResult:
        """Validate and append one partition's batches as leader (the frame bytes are stamped in place). `client`
        names the sender in the log; `verification_guard` is the KIP-890 guard the produce verified with (NO_GUARD
        if none), None for an append that is not verified."""
        error = self.leader_error(current_leader_epoch)
        if error != ErrorCode.NONE:
            return AppendResult(error)
        min_isr = self.configs["min.insync.replicas"]
        if acks_all and len(self.isr) < min_isr:
            return AppendResult(ErrorCode.NOT_ENOUGH_REPLICAS,
                                message=f"ISR {list(self.isr)} is smaller than min.insync.replicas {min_isr}")
        try:
            refused = self._check_batches(records, verification_guard)
            if refused is not None:
                return refused
            info = self.log.append_as_leader(records, self.leader_epoch)
            if self._verification_guards:  # the producer's transaction is open here now: its guard has served
                for _, header in iter_batches(records):
                    if header.is_transactional:
                        self._verification_guards.pop(header.producer_id, None)
            if self.metrics is not None:
                self.metrics.record_produce(self.topic, len(records), info.last_offset - info.first_offset + 1)
        except UnsupportedForMessageFormat as exc:  # Kafka's answer to an old message set in Produce v3+
            return AppendResult(ErrorCode.INVALID_RECORD, message=f"record batches of magic 2 only: {exc}")
        except UnsupportedCompressionTypeError as exc:  # the producer gives up at once: say why where operators look
            log.warning("%s-%d: Produce from %s answered UNSUPPORTED_COMPRESSION_TYPE: %s", self.topic, self.index,
                        client, exc)
            return AppendResult(exc.code, message=str(exc))
        except KafkaError as exc:
            return AppendResult(exc.code, message=str(exc), record_errors=exc.record_errors)
        return self._appended(info)

    def append_end_txn_marker(self, producer_id: int, producer_epoch: int, marker: EndTxnMarker,
                              timestamp: int) -> AppendResult:
        """A transaction coordinator's commit or abort marker for one producer (WriteTxnMarkers), as leader."""
        if not self.is_leader:
            return AppendResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        verdict = self.log.producer_state.check_marker(producer_id, producer_epoch, marker.coordinator_epoch)
        if verdict is not Verdict.OK:
            return AppendResult(_VERDICT_ERRORS[verdict], message=f"marker for producer {producer_id} epoch "
                                f"{producer_epoch}, coordinator epoch {marker.coordinator_epoch}: {verdict.value}")
        batch = build_end_txn_marker(producer_id, producer_epoch, marker, timestamp)
        try:
            info = self.log.append_as_leader(batch, self.leader_epoch, from_client=False)
        except KafkaError as exc:
            return AppendResult(exc.code, message=str(exc))
        self._verification_guards.pop(producer_id, None)  # a verification that crossed the marker opens nothing
        return self._appended(info)

    def _appended(self, info: AppendInfo) -> AppendResult:
        self.maybe_advance_high_watermark()
        # Followers long-polling for data must see it now, although the high watermark has not moved (it moves
        # only once they have it): otherwise every acks=all produce waits out a follower's fetch max wait.
        self.wake_waiters()
        return AppendResult(ErrorCode.NONE, info.first_offset, info.last_offset, self.leader_epoch,
                            info.log_append_time, self.log.log_start_offset)

    def _check_batches(self, records: Any, verification_guard: VerificationGuard | None) -> AppendResult | None:
        """max.message.bytes, the idempotent producer's sequence and KIP-890's guard; a duplicate batch is answered
        as the original was (DUPLICATE_SEQUENCE_NUMBER is success to the producer), before the guard is looked
        at (as Kafka)."""
        max_bytes = self.configs["max.message.bytes"]
        producer_state = self.log.producer_state
        for _, header in iter_batches(records):
            if header.total_size > max_bytes:
                return AppendResult(ErrorCode.MESSAGE_TOO_LARGE,
                                    message=f"batch of {header.total_size} bytes > max.message.bytes {max_bytes}")
            if header.producer_id < 0:
                continue
            check = producer_state.check_and_update(header.producer_id, header.producer_epoch,
                                                    header.base_sequence, header.last_sequence,
                                                    header.is_transactional)
            if check.verdict is Verdict.DUPLICATE:
                # in this log now, in this leadership: acks=all waits for it as for a new batch
                return AppendResult(ErrorCode.NONE, check.first_offset, check.last_offset, self.leader_epoch,
                                    log_start_offset=self.log.log_start_offset)
            if (verification_guard is not None and header.is_transactional
                    and header.producer_id not in producer_state.open_txns
                    and (verification_guard is NO_GUARD
                         or self._verification_guards.get(header.producer_id) is not verification_guard)):
                return AppendResult(ErrorCode.INVALID_TXN_STATE,
                                    message="Record was not part of an ongoing transaction")
            if check.verdict is not Verdict.OK:
                return AppendResult(_VERDICT_ERRORS[check.verdict],
                                    message=f"producer {header.producer_id}: {check.verdict.value}")
        return None

    # -- fetch ----------------------------------------------------------------------------------------

    def fetch_records(self, fetch_offset: int, current_leader_epoch: int, last_fetched_epoch: int,
                      replica_id: int, max_bytes: int, first_batch_whole: bool, record_follower_fetch: bool,
                      now_ms: float, read_committed: bool = False) -> FetchResult:
        """One partition's Fetch: the epoch check, DivergingEpoch, the read bound (high watermark for consumers,
        log end for followers), and, when `record_follower_fetch`, the follower's log end. Batches come as file
        ranges, never decoded."""
        error = self.leader_error(current_leader_epoch)
        if error != ErrorCode.NONE:
            if error == ErrorCode.FENCED_LEADER_EPOCH and self.metrics is not None:
                self.metrics.record_fenced_fetch(self.topic, replica_id >= 0)
            if error == ErrorCode.FENCED_LEADER_EPOCH and replica_id >= 0:
                # A replica fetching in an old epoch (KIP-320's zombie) is visible in this broker's log: the
                # fetcher may be handed over (or stopped) before it reads the answer, so its own log cannot
                # always say so. Once per hand-over: a fenced fetcher waits for newer metadata.
                log.info("%s-%d: Fetch from replica %d in leader epoch %d fenced (the partition is in epoch %d)",
                         self.topic, self.index, replica_id, current_leader_epoch, self.leader_epoch)
            return FetchResult(error)
        partition_log = self.log
        result = FetchResult(log_start_offset=partition_log.log_start_offset,
                             high_watermark=self.follower_high_watermark if replica_id >= 0
                             else partition_log.high_watermark,
                             last_stable_offset=partition_log.last_stable_offset)
        if last_fetched_epoch >= 0:
            epoch, end_offset = partition_log.end_offset_for_epoch(last_fetched_epoch)
            if end_offset < fetch_offset or epoch < last_fetched_epoch:
                # The fetcher's log diverged from ours: tell it where our history of that epoch ends (and, as
                # Kafka, do not take its fetch offset as its log end).
                result.diverging_epoch = (epoch, end_offset)
                return result
        if replica_id >= 0:
            upper_bound = partition_log.log_end_offset
        else:
            upper_bound = result.last_stable_offset if read_committed else partition_log.high_watermark
        try:
            read = partition_log.read(fetch_offset, max_bytes, upper_bound, first_batch_whole)
        except OffsetOutOfRange:
            result.error = ErrorCode.OFFSET_OUT_OF_RANGE
            return result
        if read.size:
            result.records = FileRecords(read.slices, read.size)
            if read_committed:
                result.aborted_transactions = partition_log.aborted_transactions(fetch_offset, read.next_offset)
        if record_follower_fetch and replica_id >= 0:
            self._record_follower_fetch(replica_id, fetch_offset, now_ms)
            result.follower_fetch_recorded = True
            # the high watermark may have moved with this fetch: answer the new one
            result.high_watermark = self.follower_high_watermark
        return result

    # -- share groups (KIP-932) -----------------------------------------------------------------------

    async def share_fetch(self, group_id: str, member_id: str, settings: ShareSettings,
                          persister: SharePersister | None, max_records: int, batch_size: int,
                          max_bytes: int) -> ShareFetchResult:
        """Acquire records of this partition for a share group member: the batches holding them and the
        acquired ranges (none when nothing is available: the caller may wait on this partition's futures).
        `persister`: where the share-partition's state is durable (None: in memory only)."""
        error = await self._load_share_partition(group_id, settings, persister)
        if error != ErrorCode.NONE:
            return ShareFetchResult(error)
        share = self.share_partitions[group_id]
        now = _now_ms()
        share.expire_locks(now)
        if self.log.log_start_offset > share.start_offset:
            share.log_start_moved(self.log.log_start_offset)
        fetch_offset = share.next_fetch_offset()
        upper_bound = self.log.last_stable_offset if settings.read_committed else self.log.high_watermark
        if not share.can_acquire_records() or fetch_offset >= upper_bound or max_records <= 0:
            return ShareFetchResult()
        try:
            read = self.log.read(fetch_offset, max_bytes, upper_bound, True)
        except OffsetOutOfRange:
            return ShareFetchResult()
        if not read.size:
            return ShareFetchResult()
        data = b"".join(os.pread(piece.fd, piece.size, piece.position) for piece in read.slices)
        headers = list(iter_batches(data))
        spans = [(pos, pos + header.batch_length + LOG_OVERHEAD, header.base_offset,
                  header.base_offset + header.last_offset_delta) for pos, header in headers]
        aborted: list[tuple[int, int]] = []
        if settings.read_committed:
            aborted = _aborted_batches(headers, self.log.aborted_transactions(fetch_offset, read.next_offset))
        acquired = share.acquire(member_id, fetch_offset, [(base, last) for _, _, base, last in spans], max_records,
                                 now, batch_size=batch_size if batch_size > 0 else None, aborted=aborted)
        self._schedule_share_timer(group_id)
        if not acquired.records:
            return ShareFetchResult()
        error = await self._write_share_state(group_id, share)  # the delivery counts, before any delivery
        if error == ErrorCode.INVALID_RECORD_STATE:  # the group's offsets were reset: read them again, silently
            return ShareFetchResult()
        if error != ErrorCode.NONE:
            return ShareFetchResult(error)
        sent = spans[acquired.batches]
        return ShareFetchResult(records=data[sent[0][0]:sent[-1][1]], acquired=acquired.records)

    async def share_acknowledge(self, group_id: str, member_id: str,
                                batches: list[tuple[int, int, list[int]]]) -> ErrorCode:
        """A member's acknowledgements of records it acquired here (ACCEPT, RELEASE, REJECT, GAP): atomic, the
        share-partition's error otherwise (INVALID_RECORD_STATE, INVALID_REQUEST), answered once durable."""
        error = self.leader_error(-1)
        if error != ErrorCode.NONE:
            return error
        share = self.share_partitions.get(group_id)
        if share is None:
            return ErrorCode.INVALID_RECORD_STATE  # nothing was acquired here for this group (or it was reloaded)
        share.expire_locks(_now_ms())
        available = share.available_count
        error = share.acknowledge(member_id, batches)
        if share.available_count > available:
            self.wake_waiters()  # released records can go to a waiting member
        self._schedule_share_timer(group_id)
        if error != ErrorCode.NONE:
            return error
        return await self._write_share_state(group_id, share)

    def share_release_member(self, group_id: str, member_id: str) -> None:
        """The member's share session closed: what it still holds here becomes available again."""
        share = self.share_partitions.get(group_id)
        if share is not None and share.release_member(member_id):
            self.wake_waiters()
            self._schedule_share_timer(group_id)
            self._write_share_state_behind(group_id, share)

    def share_group_left(self, group_id: str) -> None:
        """No member of the group has a share session here any more: once what it changed is durable and nothing
        is acquired, the share-partition is dropped, so the next member reads the state afresh (AlterShareGroup-
        Offsets and DeleteShareGroupOffsets reset it only while the group is empty), as Kafka's leader drops a
        group's share-partitions when the group turns empty."""
        if (share := self.share_partitions.get(group_id)) is not None:
            self._behind(self._forget_when_written(group_id, share))

    async def _forget_when_written(self, group_id: str, share: SharePartition) -> ErrorCode:
        error = await self._write_share_state(group_id, share)
        writer = self._share_writers.get(group_id)
        if error == ErrorCode.NONE and share.acquired_count == 0 and (writer is None or writer.task is None):
            self._drop_share_partition(group_id, share)
        return error

    async def _load_share_partition(self, group_id: str, settings: ShareSettings,
                                    persister: SharePersister | None) -> ErrorCode:
        """Make sure the group's share-partition is here, read from its durable state (one read for concurrent
        fetches); the leader check first."""
        while True:
            error = self.leader_error(-1)
            if error != ErrorCode.NONE or group_id in self.share_partitions:
                return error
            loading = self._share_loading.get(group_id)
            if loading is None:
                loading = self._share_loading[group_id] = asyncio.ensure_future(
                    self._read_share_partition(group_id, settings, persister))
                loading.add_done_callback(lambda done: self._share_loading.pop(group_id, None)
                                          if self._share_loading.get(group_id) is done else None)
            error = await asyncio.shield(loading)
            if error != ErrorCode.NONE:
                return error

    async def _read_share_partition(self, group_id: str, settings: ShareSettings,
                                    persister: SharePersister | None) -> ErrorCode:
        leader_epoch = self.leader_epoch
        key = ShareSnapshotKey(group_id, self.topic_id, self.index)
        start_offset, snapshot = -1, None
        if persister is not None:
            error, state = await persister.read(key, leader_epoch)
            if error != ErrorCode.NONE:
                return _share_state_error(error)
            start_offset = state.start_offset
            snapshot = ShareSnapshot(state.state_epoch, state.start_offset,
                                     state.state_batches)
        if self.leader_error(-1) != ErrorCode.NONE or self.leader_epoch != leader_epoch:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER  # leadership moved while the state was read
        if snapshot is None or start_offset < 0:
            found = None
            if settings.start_timestamp != LATEST_TIMESTAMP:  # earliest (-2), or the first record since a time
                found = self.log.offset_for_timestamp(settings.start_timestamp)
            start = min(found[0], self.log.high_watermark) if found is not None else self.log.high_watermark
            state_epoch = 0 if snapshot is None else snapshot.state_epoch
            share = SharePartition(start, settings.record_lock_duration_ms, settings.delivery_count_limit,
                                   settings.max_record_locks, state_epoch=state_epoch)
        else:
            share = SharePartition.from_snapshot(snapshot, settings.record_lock_duration_ms,
                                                 settings.delivery_count_limit, settings.max_record_locks)
            share.truncate(self.log.log_end_offset)  # KIP-101/320: past our end, the offsets hold no such records
        self.share_partitions[group_id] = share
        if persister is None:
            return ErrorCode.NONE
        self._share_writers[group_id] = ShareWriter(persister, key, leader_epoch, share)
        if start_offset < 0:  # the start chosen now holds across leader changes from here on
            return await self._write_share_state(group_id, share)
        return ErrorCode.NONE

    async def _write_share_state(self, group_id: str, share: SharePartition) -> ErrorCode:
        """Make the share-partition's changes so far durable; on failure it is dropped (read again next time)."""
        writer = self._share_writers.get(group_id)
        if writer is None or writer.share is not share:
            return ErrorCode.NONE if self.share_partitions.get(group_id) is share else ErrorCode.NOT_LEADER_OR_FOLLOWER
        error = await writer.flush()
        if error != ErrorCode.NONE:
            self._drop_share_partition(group_id, share)
            return _share_state_error(error)
        return ErrorCode.NONE

    def _write_share_state_behind(self, group_id: str, share: SharePartition) -> None:
        """A change nobody waits for (a release, expired locks): written in the background, dropped on failure."""
        if group_id in self._share_writers:
            self._behind(self._write_share_state(group_id, share))

    def _behind(self, write: Coroutine[Any, Any, ErrorCode]) -> None:
        task = asyncio.get_running_loop().create_task(write)
        self._share_writes_behind.add(task)  # held: the loop keeps only a weak reference to a task
        task.add_done_callback(self._share_writes_behind.discard)

    def share_tasks(self) -> list[asyncio.Future[Any]]:
        """The share state reads and writes in flight (shutdown cancels them: the state then lags by the releases
        and expiries written behind, which a restart redelivers at their counts)."""
        writing = [writer.task for writer in self._share_writers.values() if writer.task is not None]
        return [*self._share_loading.values(), *self._share_writes_behind, *writing]

    def _drop_share_partition(self, group_id: str, share: SharePartition) -> None:
        if self.share_partitions.get(group_id) is not share:
            return
        del self.share_partitions[group_id]
        self._share_writers.pop(group_id, None)
        if (timer := self._share_timers.pop(group_id, None)) is not None:
            timer.cancel()
        self.wake_waiters()  # waiting fetches read the state again

    def _schedule_share_timer(self, group_id: str) -> None:
        if (timer := self._share_timers.pop(group_id, None)) is not None:
            timer.cancel()
        share = self.share_partitions.get(group_id)
        deadline = None if share is None else share.next_lock_deadline()
        if deadline is not None:
            self._share_timers[group_id] = asyncio.get_running_loop().call_later(
                max(deadline - _now_ms(), 0) / 1000, self._expire_share_locks, group_id)

    def _expire_share_locks(self, group_id: str) -> None:
        self._share_timers.pop(group_id, None)
        share = self.share_partitions.get(group_id)
        if share is not None and share.expire_locks(_now_ms()):
            self.wake_waiters()
            self._write_share_state_behind(group_id, share)
        self._schedule_share_timer(group_id)

    def _drop_share_partitions(self) -> None:
        for timer in self._share_timers.values():
            timer.cancel()
        self._share_timers.clear()
        self.share_partitions.clear()
        self._share_writers.clear()

    # -- offsets --------------------------------------------------------------------------------------

    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int
                                     ) -> tuple[ErrorCode, int, int]:
        """OffsetsForLeaderEpoch on the leader: (error, the largest epoch at or below `leader_epoch`, its end)."""
        error = self.leader_error(current_leader_epoch)
        if error != ErrorCode.NONE:
            return error, -1, -1
        epoch, end_offset = self.log.end_offset_for_epoch(leader_epoch)
        return ErrorCode.NONE, epoch, end_offset

    @property
    def offsets_available(self) -> bool:
        """KIP-207: the new leader's high watermark has reached the log end it had when elected."""
        return (self.log.high_watermark >= self.leader_log_end_at_election
                or self.configs["unclean.leader.election.enable"])

    def fetch_offset_for_timestamp(self, timestamp: int, current_leader_epoch: int, replica_id: int,
                                   read_committed: bool = False) -> OffsetAnswer:
        """ListOffsets: EARLIEST (and EARLIEST_LOCAL), LATEST, MAX_TIMESTAMP or the first offset at or after a time;
        any other negative timestamp (LATEST_TIERED, EARLIEST_PENDING_UPLOAD) finds nothing: offset -1.

        Served by the leader; a debugging request (-2) also by a follower, from its own log. Consumers are
        refused with OFFSET_NOT_AVAILABLE until KIP-207's condition holds, and bounded by the high watermark.
        """
        if replica_id == DEBUGGING:
            error = self.check_leader_epoch(current_leader_epoch)
        else:
            error = self.leader_error(current_leader_epoch)
        if error == ErrorCode.NONE and replica_id == CONSUMER and not self.offsets_available:
            error = ErrorCode.OFFSET_NOT_AVAILABLE
            if self.metrics is not None:
                self.metrics.record_offset_not_available(self.topic)
        if error != ErrorCode.NONE:
            return OffsetAnswer(error)
        partition_log = self.log
        if timestamp == LATEST:
            # Only consumers are bounded by the high watermark, as in Kafka: replicas (and debugging tools) get
            # the log end; the KIP-207 exemption exists so that brokers can compare log lengths.
            if replica_id != CONSUMER:
                offset = partition_log.log_end_offset
            else:
                offset = partition_log.last_stable_offset if read_committed else partition_log.high_watermark
            return OffsetAnswer(offset=offset, leader_epoch=self.leader_epoch)
        if timestamp in (EARLIEST, EARLIEST_LOCAL):
            offset = partition_log.log_start_offset
            return OffsetAnswer(offset=offset, leader_epoch=partition_log.epoch_for_offset(offset))
        if timestamp == MAX_TIMESTAMP:
            # The first record carrying the largest timestamp of the log is the answer.
            timestamp = max(segment.max_timestamp for segment in partition_log.segments)
        found = partition_log.offset_for_timestamp(timestamp) if timestamp >= 0 else None
        if found is None:
            return OffsetAnswer()
        offset, record_timestamp, epoch = found
        return OffsetAnswer(offset=offset, timestamp=record_timestamp, leader_epoch=epoch)

    def active_producers(self) -> tuple[ErrorCode, list[ActiveProducer]]:
        """DescribeProducers: the producers this partition's leader remembers, with their open transactions."""
        if not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, []
        return ErrorCode.NONE, [
            ActiveProducer(producer_id, entry.epoch, entry.batches[-1].last_seq if entry.batches else -1,
                           entry.batches[-1].timestamp if entry.batches else -1, entry.coordinator_epoch,
                           entry.txn_first_offset)
            for producer_id, entry in self.log.producer_state.producers.items()]

    def delete_records_on_leader(self, offset: int) -> tuple[ErrorCode, int]:
        """DeleteRecords: move the log start to `offset` (-1: the high watermark); (error, new log start)."""
        if not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        partition_log = self.log
        if offset == -1:
            offset = partition_log.high_watermark
        if not 0 <= offset <= partition_log.high_watermark:
            return ErrorCode.OFFSET_OUT_OF_RANGE, -1
        partition_log.delete_records_before(offset)
        return ErrorCode.NONE, partition_log.log_start_offset

    # -- follower: truncation and appends -------------------------------------------------------------

    def truncate_to_epoch_end(self, epoch: int, end_offset: int) -> bool:
        """Truncate to the leader's (epoch, end offset) for our history; returns False if we must ask again."""
        partition_log = self.log
        log_end = partition_log.log_end_offset
        if epoch < 0 or end_offset < 0:
            return True  # the leader knows nothing of our epochs: nothing tells us to cut
        own_epoch, own_end = partition_log.end_offset_for_epoch(epoch)
        if own_epoch < 0:  # we track no epoch that old: the leader's offset is all we have
            target, done = min(end_offset, log_end), True
        elif own_epoch != epoch:  # we never had the leader's epoch: cut to our epoch below it, then ask again
            target, done = min(own_end, log_end), False
        else:
            target, done = min(own_end, end_offset, log_end), True
        if target < log_end:
            log.info("%s-%d: truncating from %d to %d (leader epoch %d ends at %d)", self.topic, self.index,
                     log_end, target, epoch, end_offset)
            events.emit("truncate", topic=self.topic, partition=self.index, **{"from": log_end}, to=target,
                        epoch=epoch)
            if self.metrics is not None:
                self.metrics.record_truncation(self.topic, log_end - target)
        # also when nothing is cut: an epoch this replica assigned as a leader and never wrote goes (KIP-279)
        partition_log.truncate_to(target)
        return done

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The leader's log starts above our log end: ours restarts there, empty."""
        log.info("%s-%d: offset %d is below the leader's log start %d: restarting the log there", self.topic,
                 self.index, self.log.log_end_offset, offset)
        self.log.truncate_fully_and_start_at(offset)

    def append_as_follower(self, records: Any, leader_high_watermark: int, leader_log_start_offset: int) -> None:
        """Batches from the leader, appended as they came (their epochs taken from their headers); the high
        watermark follows the leader's (bounded by our log end), and so does the log start (its retention).
        Raises KafkaError when the batches cannot be appended."""
        partition_log = self.log
        if records:
            partition_log.append_as_follower(records)
            if self.metrics is not None:
                self.metrics.record_follower_append(self.topic, len(records))
        partition_log.high_watermark = leader_high_watermark  # bounded by our log end
        if leader_log_start_offset > partition_log.log_start_offset:
            partition_log.delete_records_before(leader_log_start_offset)
        self.wake_waiters()

    # -- leader: followers, ISR, high watermark ------------------------------------------------------

    @property
    def maximal_isr(self) -> set[int]:
        return set(self.isr).union(self.pending_isr or ())

    def _record_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: float) -> None:
        """A follower fetched from `fetch_offset` (its log end) in the current leader epoch."""
        follower = self.followers.get(replica_id)
        if follower is None:
            return  # not an assigned replica
        leader_end = self.log.log_end_offset
        if fetch_offset >= leader_end:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, now_ms)
        elif fetch_offset >= follower.last_fetch_leader_end:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, follower.last_fetch_ms)
        follower.log_end = fetch_offset
        follower.last_fetch_leader_end, follower.last_fetch_ms = leader_end, now_ms
        self.maybe_advance_high_watermark()

    def can_join_isr(self, replica_id: int) -> bool:
        """Kafka's expansion rule: caught up to the high watermark and into the leader's current epoch, and no
        ISR change in flight."""
        follower = self.followers.get(replica_id)
        return (self.pending_isr is None and follower is not None and replica_id not in self.maximal_isr
                and follower.log_end >= self.log.high_watermark
                and follower.log_end >= self.leader_log_end_at_election)

    def out_of_sync(self, now_ms: float, lag_max_ms: int) -> list[int]:
        """ISR followers neither at the log end nor caught up within replica.lag.time.max.ms (none while an ISR
        change is in flight)."""
        if not self.is_leader or self.pending_isr is not None:
            return []
        leader_end = self.log.log_end_offset
        return [r for r in self.isr if r != self.node_id and (follower := self.followers.get(r)) is not None
                and follower.log_end != leader_end and now_ms - follower.last_caught_up_ms > lag_max_ms]

    def begin_isr_change(self, new_isr: tuple[int, ...]) -> tuple[int, int]:
        """An AlterPartition to `new_isr` is about to be sent: (leader epoch, partition epoch) it is sent in."""
        self.pending_isr = new_isr
        return self.leader_epoch, self.partition_epoch

    def complete_isr_change(self, asked: tuple[int, ...], answer: tuple[int, int, tuple[int, ...]] | None) -> None:
        """The AlterPartition for `asked` ended: `answer` is the committed (leader epoch, partition epoch, ISR),
        None if it failed or was refused (the metadata settles it). A new leader epoch since voided it."""
        if self.pending_isr is not asked:
            return
        self.pending_isr = None
        if answer is not None:
            leader_epoch, partition_epoch, isr = answer
            # the metadata brings the same state, perhaps later or already
            if leader_epoch == self.leader_epoch and partition_epoch > self.partition_epoch:
                self.partition_epoch, self.isr = partition_epoch, isr
                self.wake_waiters()
        if self.is_leader:
            self.maybe_advance_high_watermark()  # the maximal ISR may have shrunk

    def maybe_advance_high_watermark(self) -> None:
        ends = [self.log.log_end_offset]
        for replica in self.maximal_isr - {self.node_id}:
            follower = self.followers.get(replica)
            ends.append(-1 if follower is None else follower.log_end)
        high_watermark = min(ends)
        current = self.log.high_watermark
        if high_watermark > current:
            if self.faults.high_watermark_held and self._held_high_watermark is None:
                self._held_high_watermark = current  # the hold began before this first move
            self.log.high_watermark = high_watermark
            self.wake_waiters()

    @property
    def follower_high_watermark(self) -> int:
        """The high watermark a follower fetch is answered with (frozen under `fault.high.watermark.held`)."""
        if not self.faults.high_watermark_held:
            self._held_high_watermark = None
            return self.log.high_watermark
        if self._held_high_watermark is None:
            self._held_high_watermark = self.log.high_watermark
        return self._held_high_watermark

    # -- waiting for data or for the high watermark ---------------------------------------------------

    def add_waiter(self, future: asyncio.Future[None]) -> None:
        self._waiters.add(future)

    def remove_waiter(self, future: asyncio.Future[None]) -> None:
        self._waiters.discard(future)

    def wake_waiters(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for future in waiters:
            if not future.done():
                future.set_result(None)

    async def wait_for_replication(self, offset: int, appended_in_epoch: int, timeout_s: float) -> ErrorCode:
        """Delayed produce (acks=all): wait until the high watermark passes `offset`, appended in leader epoch
        `appended_in_epoch`.

        NOT_LEADER_OR_FOLLOWER if leadership is lost meanwhile, also when it comes back before this waiter looks
        (Kafka completes delayed produces as the broker becomes a follower; here the waiter wakes later, and the
        follower may have truncated the batch away before leading again: leading back is not the batch back),
        NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrinks below min.insync.replicas, REQUEST_TIMED_OUT at the
        timeout.
        """
        loop: asyncio.AbstractEventLoop | None = None  # not asked for until needed: a getpid() on Python 3.11
        deadline = 0.0
        while True:
            if not self.is_leader or self.leading_since_epoch > appended_in_epoch:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            if len(self.isr) < self.configs["min.insync.replicas"]:
                return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            if self.log.high_watermark > offset:
                return ErrorCode.NONE
            if loop is None:
                loop = asyncio.get_running_loop()
                deadline = loop.time() + timeout_s
            remaining = deadline - loop.time()
            if remaining <= 0:
                return ErrorCode.REQUEST_TIMED_OUT
            future = loop.create_future()
            self.add_waiter(future)
            try:
                await asyncio.wait((future,), timeout=remaining)
            finally:
                self.remove_waiter(future)


def _share_state_error(error: ErrorCode) -> ErrorCode:
    """A persister's error as a share fetch or acknowledgement answers it: a newer leader read the state (this
    broker no longer leads, whatever its metadata says yet); the state was reset (AlterShareGroupOffsets,
    DeleteShareGroupOffsets: the records acquired are no longer held); else the error itself."""
    return _SHARE_STATE_ERRORS.get(error, error)


_SHARE_STATE_ERRORS = {ErrorCode.FENCED_LEADER_EPOCH: ErrorCode.NOT_LEADER_OR_FOLLOWER,
                       ErrorCode.FENCED_STATE_EPOCH: ErrorCode.INVALID_RECORD_STATE}
