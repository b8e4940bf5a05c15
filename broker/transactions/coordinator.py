"""The transaction coordinator (KIP-98, as Kafka 3.9's TransactionCoordinator), and this broker's transaction
connections to the others: its markers go over them, and so do its partitions' KIP-890 verifications
(verification.py), whichever broker coordinates their producers.

Rules:
- A transactional id lives on the broker that leads its `__transaction_state` partition, `abs(java
  hashCode(transactional_id)) % transaction.state.log.num.partitions`; the coordinator epoch is that partition's
  leader epoch when it was loaded here, and every marker carries it, so a partition refuses a deposed coordinator's.
- `__transaction_state` is created lazily, by the first FindCoordinator for a transactional id or the first
  InitProducerId with one. Partitions led here are replayed in the background (COORDINATOR_LOAD_IN_PROGRESS
  meanwhile); one led elsewhere unloads (NOT_COORDINATOR). After a load, a transaction found in PrepareCommit or
  PrepareAbort has its markers written and completes: a coordinator failover never leaves one hanging.
- Every state change is written to the id's partition (Kafka's TransactionLogValue) and replicated before it is
  applied and answered; one change at a time per id. A request meeting a change being written, or a transaction
  prepared and writing its markers, waits for it to settle (PREPARED_WAIT_S at most), then is decided; Kafka
  answers CONCURRENT_TRANSACTIONS at once and the client retries, but librdkafka aborting between two retries of
  AddPartitionsToTxn sends EndTxn(abort) to a transaction that never began and gets INVALID_TXN_STATE, fatal to
  the producer. Waiting closes that gap: a connection's requests are handled in order, so its EndTxn waits
  behind its AddPartitionsToTxn. A request still unsettled after the wait gets CONCURRENT_TRANSACTIONS.
- The states and moves are Kafka's: Empty -> Ongoing (AddPartitionsToTxn, AddOffsetsToTxn) -> PrepareCommit
  or PrepareAbort (EndTxn, answered once the prepare is durable) -> markers on every partition -> CompleteCommit or
  CompleteAbort -> Ongoing again with the next AddPartitionsToTxn.
- Fencing: InitProducerId bumps the producer epoch (a new producer id when it would overflow), aborting a
  transaction left Ongoing first (CONCURRENT_TRANSACTIONS until that is done); a request with an older epoch gets
  PRODUCER_FENCED, and the partitions refuse the older epoch's writes (INVALID_PRODUCER_EPOCH).
- A transaction Ongoing for longer than its timeout is aborted with the epoch bumped (checked every
  transaction.abort.timed.out.transaction.cleanup.interval.ms), so its producer is fenced, as Kafka does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from dataclasses import dataclass, field, replace
from typing import Any

from epoch_broker.broker.groups.coordinator import OFFSETS_TOPIC, leader_location, partition_for
from epoch_broker.broker.transactions import records
from epoch_broker.broker.transactions.inter_broker import InterBrokerClients
from epoch_broker.broker.transactions.markers import MarkerSender
from epoch_broker.broker.transactions.records import TxnState
from epoch_broker.broker.transactions.verification import AddPartitionsToTxnManager
from epoch_broker.protocol.errors import ErrorCode, KafkaError
from epoch_broker.protocol.records import EndTxnMarker, build_batch

log = logging.getLogger(__name__)

TXN_TOPIC = "__transaction_state"
TXN_TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "uncompressed", "segment.bytes": "104857600"}
MAX_EPOCH = 32767  # Short.MAX_VALUE: an epoch about to pass it gets a new producer id instead
LOAD_YIELD_RECORDS = 1000
COMPLETE_RETRY_S = 0.5
PREPARED_WAIT_S = 5.0  # well below clients' request timeouts (30 s and more)

PREPARED = {TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT}
# append errors as Kafka's coordinator answers them (the client retries or rediscovers its coordinator)
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}


@dataclass
class TxnMetadata:
    transactional_id: str
    partition: int  # of __transaction_state
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]] = frozenset()
    start_ms: int = -1
    update_ms: int = -1
    last_producer_epoch: int = -1  # before the last bump: a retried InitProducerId of that epoch is not fenced
    pending: bool = False  # a change is being written


@dataclass(frozen=True, slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass
class _Owned:
    coordinator_epoch: int
    ids: set[str] = field(default_factory=set)


class TransactionCoordinator:
    def __init__(self, broker: Any) -> None:  # broker.app.Broker, typed loosely to avoid an import cycle
        self.broker = broker
        config = broker.config
        self.num_partitions: int = config.transaction_state_log_num_partitions
        self.max_timeout_ms: int = config.transaction_max_timeout_ms
        self.abort_interval_s: float = config.transaction_abort_interval_ms / 1000
        self.txns: dict[str, TxnMetadata] = {}
        self.owned: dict[int, _Owned] = {}  # partitions loaded here
        self.inter_broker = InterBrokerClients(broker, "txn")
        self.markers = MarkerSender(broker, self.inter_broker)
        self.verification = AddPartitionsToTxnManager(broker, self.inter_broker)
        self._loading: dict[int, asyncio.Task] = {}
        self._tasks: set[asyncio.Task] = set()
        self._abort_timer: asyncio.TimerHandle | None = None
        self._changed = asyncio.Event()  # set (and replaced) whenever a transaction's state may have settled

    def now_ms(self) -> int:
        return self.broker.faults.wall_clock_ms()

    # -- lifecycle ------------------------------------------------------------------------------------------

    def open(self) -> None:
        """Follow the metadata; load the partitions led here if the topic exists. Needs a running event loop."""
        self.broker.metadata_subscribers.append(self._on_metadata)
        self._schedule_timeout_check()
        self._load_led()

    async def stop(self) -> None:
        if self._abort_timer is not None:
            self._abort_timer.cancel()
        for task in [*self._loading.values(), *self._tasks]:
            task.cancel()
        await asyncio.gather(*self._loading.values(), *self._tasks, return_exceptions=True)
        for partition in list(self.owned):
            self._unload(partition)
        await self.inter_broker.close()

    def _topic_exists(self) -> bool:
        return TXN_TOPIC in self.broker.metadata.topics_by_name

    async def ensure_topic(self) -> None:
        """Create `__transaction_state` unless it exists; returns once the partitions led here are loaded."""
        if not self._topic_exists():
            await self.broker.replica_manager.ensure_internal_topic(
                TXN_TOPIC, self.num_partitions, self.broker.config.transaction_state_log_replication_factor,
                TXN_TOPIC_CONFIGS)
            self._load_led()
        while self._loading:
            await asyncio.gather(*list(self._loading.values()), return_exceptions=True)

    def _leader_epoch(self, partition: int) -> int | None:
        """The leader epoch of `partition` if this broker leads it."""
        state = self.broker.metadata.partition(TXN_TOPIC, partition)
        if state is None or state.leader != self.broker.node_id:
            return None
        return state.leader_epoch

    def _load_led(self) -> None:
        if not self._topic_exists():
            return
        loop = asyncio.get_running_loop()
        for partition in range(self.num_partitions):
            if partition not in self.owned and partition not in self._loading \
                    and self._leader_epoch(partition) is not None:
                self._loading[partition] = loop.create_task(self._load(partition))

    def _on_metadata(self, metadata_records: list[Any]) -> None:
        for partition, owned in list(self.owned.items()):
            if self._leader_epoch(partition) != owned.coordinator_epoch:
                log.info("%s-%d is led elsewhere or in a newer epoch now: its transactions unload", TXN_TOPIC,
                         partition)
                self._unload(partition)
        self._load_led()

    async def _load(self, partition: int) -> None:
        try:
            epoch = self._leader_epoch(partition)
            loaded: dict[str, Any] = {}
            count = 0
            for record in self.broker.replica_manager.read_internal(TXN_TOPIC, partition, 0):
                if record.key is None:
                    continue
                count += 1
                if count % LOAD_YIELD_RECORDS == 0:
                    await asyncio.sleep(0)
                transactional_id = records.decode_key(record.key)
                if record.value is None:
                    loaded.pop(transactional_id, None)
                else:
                    loaded[transactional_id] = records.decode_value(record.value)
            if epoch is None or self._leader_epoch(partition) != epoch:
                return  # leadership moved while loading
            owned = self.owned[partition] = _Owned(epoch)
            for transactional_id, value in loaded.items():
                txn = TxnMetadata(transactional_id, partition, value.producer_id, value.producer_epoch,
                                  value.transaction_timeout_ms, TxnState(value.transaction_status),
                                  frozenset(records.partitions_of(value)), value.transaction_start_timestamp_ms,
                                  value.transaction_last_update_timestamp_ms)
                self.txns[transactional_id] = txn
                owned.ids.add(transactional_id)
                if txn.state in PREPARED:  # the previous coordinator did not finish: finish it
                    self._spawn(self._complete(txn))
            # an empty partition (most of them, at first) is not worth a line
            log.log(logging.INFO if owned.ids else logging.DEBUG,
                    "transaction coordinator loaded %s-%d in coordinator epoch %d: %d transactional ids, %d records",
                    TXN_TOPIC, partition, epoch, len(owned.ids), count)
        except Exception:
            log.exception("loading %s-%d failed", TXN_TOPIC, partition)
        finally:
            self._loading.pop(partition, None)

    def _unload(self, partition: int) -> None:
        owned = self.owned.pop(partition, None)
        if owned is not None:
            for transactional_id in owned.ids:
                self.txns.pop(transactional_id, None)
            self._wake()

    def _wake(self) -> None:
        """Wake the requests waiting in `_settled`: they look again (after the running task's synchronous rest)."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def _settled(self, transactional_id: str) -> None:
        """Until the id's transaction has no change being written and is not prepared, PREPARED_WAIT_S at most."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + PREPARED_WAIT_S
        while (txn := self.txns.get(transactional_id)) is not None and (txn.pending or txn.state in PREPARED):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)

    def _spawn(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("transaction coordinator task failed", exc_info=task.exception())

    # -- where a transactional id lives -----------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def find_coordinator(self, transactional_id: str, listener: str) -> tuple[ErrorCode, int, str, int]:
        """(error, node id, host, port) of the leader of the id's `__transaction_state` partition."""
        return leader_location(self.broker, TXN_TOPIC, self.partition_for(transactional_id), listener)

    def coordinator_error(self, transactional_id: str) -> ErrorCode:
        partition = self.partition_for(transactional_id)
        if partition in self.owned:
            return ErrorCode.NONE
        if partition in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR if self._topic_exists() else ErrorCode.COORDINATOR_NOT_AVAILABLE

    def _owns(self, txn: TxnMetadata, coordinator_epoch: int) -> bool:
        owned = self.owned.get(txn.partition)
        return owned is not None and owned.coordinator_epoch == coordinator_epoch and \
            self.txns.get(txn.transactional_id) is txn

    # -- durable changes --------------------------------------------------------------------------------------

    async def _write(self, txn: TxnMetadata, target: TxnMetadata) -> ErrorCode:
        """Write `target` as the id's state; once replicated (and still coordinating it) apply it to `txn`."""
        owned = self.owned.get(txn.partition)
        if owned is None:
            return ErrorCode.NOT_COORDINATOR
        epoch = owned.coordinator_epoch
        value = records.txn_value(target.producer_id, target.producer_epoch, target.timeout_ms, target.state,
                                  set(target.partitions), target.update_ms, target.start_ms)
        batch = build_batch([(records.txn_key(txn.transactional_id), value, (), target.update_ms)])
        txn.pending = True
        try:
            await self.broker.replica_manager.append_internal(TXN_TOPIC, txn.partition, batch)
        except KafkaError as exc:
            log.info("transaction %r: writing %s failed: %s", txn.transactional_id, target.state.kafka_name, exc)
            return _APPEND_ERRORS.get(exc.code, ErrorCode.UNKNOWN_SERVER_ERROR)
        finally:
            txn.pending = False
            self._wake()  # its waiters resume after the state below is applied: no await lies between
        if not self._owns(txn, epoch):
            return ErrorCode.NOT_COORDINATOR
        for name in ("producer_id", "producer_epoch", "timeout_ms", "state", "partitions", "start_ms", "update_ms",
                     "last_producer_epoch"):
            setattr(txn, name, getattr(target, name))
        return ErrorCode.NONE

    # -- InitProducerId ---------------------------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int,
                               producer_epoch: int) -> InitResult:
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return InitResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        error = self.coordinator_error(transactional_id)
        if error != ErrorCode.NONE:
            return InitResult(error)
        await self._settled(transactional_id)
        now = self.now_ms()
        txn = self.txns.get(transactional_id)
        if txn is None:
            partition = self.partition_for(transactional_id)
            txn = TxnMetadata(transactional_id, partition, -1, -1, timeout_ms, TxnState.EMPTY, pending=True)
            self.txns[transactional_id] = txn
            self.owned[partition].ids.add(transactional_id)
            try:
                new_id = await self.broker.next_producer_id()
            except KafkaError as exc:
                self._forget(txn)
                return InitResult(ErrorCode.COORDINATOR_NOT_AVAILABLE if exc.code.retriable else exc.code)
            error = await self._write(txn, replace(txn, producer_id=new_id, producer_epoch=0, update_ms=now))
            if error != ErrorCode.NONE:
                self._forget(txn)
                return InitResult(error)
            log.info("transactional id %r: producer id %d, epoch 0", transactional_id, new_id)
            return InitResult(ErrorCode.NONE, txn.producer_id, txn.producer_epoch)
        if txn.pending or txn.state in PREPARED:
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if producer_id >= 0:  # KIP-360: the producer names what it has
            if (producer_id, producer_epoch) == (txn.producer_id, txn.last_producer_epoch):
                return InitResult(ErrorCode.NONE, txn.producer_id, txn.producer_epoch)  # a retry of the last bump
            if (producer_id, producer_epoch) != (txn.producer_id, txn.producer_epoch):
                return InitResult(ErrorCode.PRODUCER_FENCED)
        if txn.state == TxnState.ONGOING:
            # a new incarnation of the producer: abort what the old one left open, fencing it; the client retries
            self._spawn(self._abort(txn, bump_epoch=True))
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if txn.producer_epoch >= MAX_EPOCH - 1:
            new_id = await self.broker.next_producer_id()
            target = replace(txn, producer_id=new_id, producer_epoch=0, last_producer_epoch=-1)
        else:
            target = replace(txn, producer_epoch=txn.producer_epoch + 1, last_producer_epoch=txn.producer_epoch)
        target = replace(target, state=TxnState.EMPTY, partitions=frozenset(), timeout_ms=timeout_ms, start_ms=-1,
                         update_ms=now)
        error = await self._write(txn, target)
        if error != ErrorCode.NONE:
            return InitResult(error)
        log.info("transactional id %r: producer id %d, epoch %d", transactional_id, txn.producer_id,
                 txn.producer_epoch)
        return InitResult(ErrorCode.NONE, txn.producer_id, txn.producer_epoch)

    def _forget(self, txn: TxnMetadata) -> None:
        if self.txns.get(txn.transactional_id) is txn:
            del self.txns[txn.transactional_id]
            owned = self.owned.get(txn.partition)
            if owned is not None:
                owned.ids.discard(txn.transactional_id)

    # -- AddPartitionsToTxn, AddOffsetsToTxn ------------------------------------------------------------------

    def _check_producer(self, transactional_id: str, producer_id: int, producer_epoch: int
                        ) -> tuple[ErrorCode, TxnMetadata | None]:
        error = self.coordinator_error(transactional_id)
        if error != ErrorCode.NONE:
            return error, None
        txn = self.txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if txn.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None
        if txn.pending or txn.state in PREPARED:
            return ErrorCode.CONCURRENT_TRANSACTIONS, None
        return ErrorCode.NONE, txn

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: set[tuple[str, int]]) -> ErrorCode:
        await self._settled(transactional_id)
        error, txn = self._check_producer(transactional_id, producer_id, producer_epoch)
        if txn is None:
            return error
        if txn.state == TxnState.ONGOING and partitions <= txn.partitions:
            return ErrorCode.NONE
        now = self.now_ms()
        start = txn.start_ms if txn.state == TxnState.ONGOING else now
        return await self._write(txn, replace(txn, state=TxnState.ONGOING, partitions=txn.partitions | partitions,
                                              start_ms=start, update_ms=now))

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: set[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """AddPartitionsToTxn v4+ with verify_only (KIP-890): whether each partition is in the producer's
        transaction, TRANSACTION_ABORTABLE if not, as Kafka's handleVerifyPartitionsInTransaction. A change being
        written does not count (the partitions are in the metadata once written); a prepared transaction is
        CONCURRENT_TRANSACTIONS."""
        if not transactional_id:
            return dict.fromkeys(partitions, ErrorCode.INVALID_REQUEST)
        txn = self.txns.get(transactional_id)
        error = self.coordinator_error(transactional_id)
        if error == ErrorCode.NONE and (txn is None or txn.producer_id != producer_id):
            error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        elif error == ErrorCode.NONE and txn is not None and txn.producer_epoch != producer_epoch:
            error = ErrorCode.PRODUCER_FENCED
        elif error == ErrorCode.NONE and txn is not None and txn.state in PREPARED:
            error = ErrorCode.CONCURRENT_TRANSACTIONS
        if error != ErrorCode.NONE or txn is None:
            return dict.fromkeys(partitions, error)
        return {partition: ErrorCode.NONE if partition in txn.partitions else ErrorCode.TRANSACTION_ABORTABLE
                for partition in partitions}

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          group_id: str) -> ErrorCode:
        """The group's `__consumer_offsets` partition joins the transaction (TxnOffsetCommit writes there)."""
        groups = self.broker.group_coordinator
        if groups is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            await groups.ensure_offsets_topic()
        except KafkaError:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        offsets_partition = partition_for(group_id, groups.num_partitions)
        return await self.add_partitions(transactional_id, producer_id, producer_epoch,
                                         {(OFFSETS_TOPIC, offsets_partition)})

    # -- EndTxn -----------------------------------------------------------------------------------------------

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
                      ) -> ErrorCode:
        await self._settled(transactional_id)  # a retried EndTxn then finds its transaction complete
        error = self.coordinator_error(transactional_id)
        if error != ErrorCode.NONE:
            return error
        txn = self.txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if txn.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if txn.pending:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        wanted_prepare, wanted_complete = ((TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT) if commit
                                           else (TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT))
        if txn.state == wanted_complete:
            return ErrorCode.NONE  # a retry of an EndTxn that completed
        if txn.state == wanted_prepare:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if txn.state != TxnState.ONGOING:
            return ErrorCode.INVALID_TXN_STATE
        return await self._end(txn, commit, txn.producer_epoch)

    async def _end(self, txn: TxnMetadata, commit: bool, producer_epoch: int) -> ErrorCode:
        """Prepare (durably), then write the markers and complete in the background."""
        state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        error = await self._write(txn, replace(txn, state=state, producer_epoch=producer_epoch,
                                               update_ms=self.now_ms()))
        if error == ErrorCode.NONE:
            self._spawn(self._complete(txn))
        return error

    async def _abort(self, txn: TxnMetadata, bump_epoch: bool) -> None:
        """Abort an Ongoing transaction on the coordinator's own initiative (a timeout, a new producer incarnation);
        with `bump_epoch` its producer is fenced: the markers carry the next epoch."""
        if txn.pending or txn.state != TxnState.ONGOING:
            return
        epoch = txn.producer_epoch + 1 if bump_epoch and txn.producer_epoch < MAX_EPOCH - 1 else txn.producer_epoch
        error = await self._end(txn, False, epoch)
        if error != ErrorCode.NONE:
            log.warning("transaction %r: abort failed (%s); retried at the next check", txn.transactional_id,
                        error.name)

    async def _complete(self, txn: TxnMetadata) -> None:
        """Write the markers of a prepared transaction to its partitions, then record it complete. Stops if this
        coordinator stops coordinating it (the next one finishes it from its log)."""
        owned = self.owned.get(txn.partition)
        if owned is None:
            return
        epoch = owned.coordinator_epoch
        commit = txn.state == TxnState.PREPARE_COMMIT
        marker = EndTxnMarker(commit, epoch)
        written = await self.markers.send(txn.producer_id, txn.producer_epoch, marker, txn.partitions,
                                          lambda: self._owns(txn, epoch))
        if not written:
            return
        target = replace(txn, state=TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT,
                         partitions=frozenset(), update_ms=self.now_ms())
        while self._owns(txn, epoch):
            error = await self._write(txn, target)
            if error == ErrorCode.NONE:
                log.debug("transaction %r %s", txn.transactional_id, "committed" if commit else "aborted")
                return
            await asyncio.sleep(COMPLETE_RETRY_S)

    # -- timeouts ---------------------------------------------------------------------------------------------

    def _schedule_timeout_check(self) -> None:
        loop = asyncio.get_running_loop()
        self._abort_timer = loop.call_later(self.abort_interval_s, self._check_timeouts)

    def _check_timeouts(self) -> None:
        now = self.now_ms()
        for txn in list(self.txns.values()):
            if txn.state == TxnState.ONGOING and not txn.pending and txn.start_ms + txn.timeout_ms < now:
                log.info("transaction %r of producer %d epoch %d timed out after %d ms: aborting it",
                         txn.transactional_id, txn.producer_id, txn.producer_epoch, now - txn.start_ms)
                self._spawn(self._abort(txn, bump_epoch=True))
        self._schedule_timeout_check()

    # -- DescribeTransactions, ListTransactions ---------------------------------------------------------------

    @property
    def loading(self) -> bool:
        return bool(self._loading)

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnMetadata | None]:
        error = self.coordinator_error(transactional_id)
        if error != ErrorCode.NONE:
            return error, None
        txn = self.txns.get(transactional_id)
        return (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None) if txn is None else (ErrorCode.NONE, txn)

    def list_transactions(self, states: set[str], producer_ids: set[int], longer_than_ms: int = -1
                          ) -> list[TxnMetadata]:
        """The transactions of these states and producer ids (empty: any), started more than `longer_than_ms`
        ago (-1: any)."""
        now = self.now_ms()
        return [txn for txn in self.txns.values() if txn.producer_id >= 0
                and (not states or txn.state.kafka_name in states)
                and (not producer_ids or txn.producer_id in producer_ids)
                and (longer_than_ms < 0 or now - txn.start_ms > longer_than_ms)]
