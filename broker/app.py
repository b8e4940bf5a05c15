"""`Broker`: wires config, controller channel, logs, partitions, groups, dispatcher and server; starts, stops.

The controller is reached through a `ControllerChannel` (docs/cluster.md): embedded in this process when
`process.roles` includes `controller` (the default), remote (`controller.address`) for `process.roles=broker`.

Start order (each step needs the one before):
1. The channel delivers the metadata log so far (the embedded controller replays its store; a remote one is
   fetched) into the broker's `MetadataCache`. Partitions are not attached yet: the records are kept.
2. The `LogManager` opens every partition log (recovering after an unclean shutdown).
3. The server binds its socket, but requests wait (`Dispatcher.ready`); the broker registers with the
   controller, which bumps the leader epoch of every partition it leads (KIP-101's returning leader), and the
   channel returns once those records were applied. Only then does the `ReplicaManager` attach the logs, so
   each led partition records (new epoch, log end) in its leader-epoch-checkpoint once, never for the epoch it
   had before the restart; followed partitions start their fetchers (truncating first).
4. If `__consumer_offsets` exists, the group coordinator starts and replays its partitions in the background
   (answering COORDINATOR_LOAD_IN_PROGRESS for their groups meanwhile); otherwise the coordinator (module
   included) is made on first use by a group API, which creates the topic. Requests are let in; the CLI
   prints the ready line.

Stop (SIGTERM/SIGINT): controlled shutdown (the controller moves this broker's leaderships away), stop
accepting, answer long polls, stop the replica fetchers, let in-flight requests finish, stop the group
coordinator, close every log (flush, producer-state snapshot, checkpoints, clean-shutdown marker).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import sys
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from epoch_broker.broker.client_metrics import ClientMetricsManager
from epoch_broker.broker.config import BrokerConfig, Endpoint, StartupError, topic_config
from epoch_broker.broker.controller.channel import ControllerChannel, EmbeddedChannel
from epoch_broker.broker.controller.controller import Controller
from epoch_broker.broker.controller.store.file import FileMetadataStore
from epoch_broker.broker.faults import POWER_LOSS_EXIT_STATUS, BrokerFaults
from epoch_broker.broker.file_budget import FileBudget, raise_open_files_limit
from epoch_broker.broker.log_dirs import (
    check_metadata_log_present,
    check_usable,
    claim_log_dirs,
    corrupt_metadata_log,
)
from epoch_broker.broker.metadata.image import MetadataCache
from epoch_broker.broker.metadata.stored_log import CorruptMetadataLog
from epoch_broker.broker.network.dispatch import Dispatcher
from epoch_broker.broker.network.server import KafkaServer
from epoch_broker.broker.replica.replica_manager import ReplicaManager, log_config_for
from epoch_broker.broker.replica.share_persister import CoordinatorPersister
from epoch_broker.broker.replica.share_sessions import release
from epoch_broker.broker.security import authorization
from epoch_broker.broker.security.listeners import add_config_users, bind_listeners
from epoch_broker.protocol.errors import KafkaError
from epoch_broker.storage.fs import FileSystem
from epoch_broker.storage.log_manager import FILES_PER_SEGMENT, LogManager

if TYPE_CHECKING:  # imported on first use (`group_coordinator`), or when metrics are on
    from epoch_broker.broker.groups.coordinator import GroupCoordinator
    from epoch_broker.broker.metrics import ProcessMetrics
    from epoch_broker.broker.status import StatusServer
    from epoch_broker.broker.transactions.coordinator import TransactionCoordinator

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"  # as broker.group_coordinator, which is imported only when needed
TXN_TOPIC = "__transaction_state"  # as broker.transaction_coordinator, likewise
MAINTENANCE_INTERVAL_S = 5.0  # flush.ms, retention and offset checkpoints (cleaning: log.cleaner.backoff.ms)
FATAL_EXIT_STATUS = 3


class Broker:
    def __init__(self, config: BrokerConfig, channel: ControllerChannel | None = None) -> None:
        self.config = config
        self.node_id = config.node_id
        self.metadata = MetadataCache()
        self.incarnation_id = uuid.uuid4().bytes
        self.broker_epoch = -1
        self._channel = channel  # made at start when not given (tests give several brokers one controller)
        self.faults = BrokerFaults(on_power_loss=self._lose_power, hooks_enabled=config.fault_hooks_enable)
        self.client_metrics = ClientMetricsManager(lambda: self.metadata.client_metrics)  # KIP-714 telemetry
        self._log_manager: LogManager | None = None
        self._replica_manager: ReplicaManager | None = None
        self._share_persister: CoordinatorPersister | None = None  # share-partition state at group coordinators
        self._group_coordinator: GroupCoordinator | None = None  # made on first use, or at start if needed
        self._transaction_coordinator: TransactionCoordinator | None = None  # likewise
        self.metadata_subscribers: list[Callable[[list[Any]], None]] = []  # after the replica manager
        self.server: KafkaServer | None = None
        self.file_budget: FileBudget | None = None  # the open-files limit, known at start
        self.dispatcher: Dispatcher | None = None
        self._producer_ids: Iterator[int] = iter(())
        self._maintenance: asyncio.Task | None = None
        self._unattached: list[Any] | None = []  # records applied before registration; None once attached
        self.metrics: ProcessMetrics | None = None  # with `metrics.listener` only
        self.status_server: StatusServer | None = None

    # -- the services handlers reach (broker/services.py): there once `start` has made them ---------

    @property
    def channel(self) -> ControllerChannel:
        assert self._channel is not None, "not started"
        return self._channel

    @property
    def log_manager(self) -> LogManager:
        assert self._log_manager is not None, "not started"
        return self._log_manager

    @property
    def replica_manager(self) -> ReplicaManager:
        assert self._replica_manager is not None, "not started"
        return self._replica_manager

    @property
    def advertised(self) -> Endpoint:
        """Where clients reach this broker (the real port once bound)."""
        return self.config.advertised

    @property
    def cluster_id(self) -> str:
        return self.metadata.cluster_id or ""

    @property
    def group_coordinator_if_started(self) -> GroupCoordinator | None:
        return self._group_coordinator

    def _make_channel(self) -> ControllerChannel:
        config = self.config
        if "controller" in config.process_roles:
            controller = Controller(config, FileMetadataStore(config.data_dir))
            if self.metrics is not None:
                controller.metrics = self.metrics
                self.metrics.watch_controller(controller)
            controller.start()
            return EmbeddedChannel(controller)
        from epoch_broker.broker.controller.remote import RemoteChannel

        return RemoteChannel(config, self.metadata, self.faults, on_fatal=self._exit_fatally)

    async def start(self) -> Endpoint:
        """Start everything; returns the endpoint clients should use (with the real port if 0 was asked)."""
        config = self.config
        check_usable([config.data_dir, *config.log_dirs])
        add_config_users(config, self.metadata.credentials)
        authorization.configure(config, self.metadata.acls)
        if config.metrics_listener:  # prometheus_client and aiohttp are imported only then
            from epoch_broker.broker.metrics import ProcessMetrics

            self.metrics = ProcessMetrics()
        if self._channel is None:
            if "controller" in config.process_roles:
                check_metadata_log_present(config.data_dir)
            try:
                self._channel = self._make_channel()
            except CorruptMetadataLog as exc:
                raise corrupt_metadata_log(exc) from exc
        await self._channel.start(self._on_metadata)
        claim_log_dirs(list(config.log_dirs), self.cluster_id, self.node_id)
        # Clients send admin requests to the controller id from Metadata: name this broker, which forwards them
        # (as KRaft brokers do), since a controller-only process is not among the brokers clients can reach.
        self.metadata.controller_id = self.node_id
        topic_log_configs = {
            name: log_config_for(config, topic_config(config, topic.configs))
            for name, topic in self.metadata.topics_by_name.items()
        }
        self.file_budget = FileBudget(raise_open_files_limit(), lambda: self.log_manager.open_files(),
                                      lambda: len(self.server.connections) if self.server is not None else 0)
        # at least one segment a log: refused before any is opened, then counted exactly once they are
        at_least = FILES_PER_SEGMENT * LogManager.count_partition_dirs(list(config.log_dirs))
        if (problem := self.file_budget.logs_fit(at_least)) is not None:
            raise StartupError(problem)
        self._log_manager = LogManager.open(list(config.log_dirs), log_config_for(config, topic_config(config, {})),
                                            fs=FileSystem(self.faults.disk), topic_configs=topic_log_configs,
                                            clock=self.faults.wall_clock_ms)
        if (problem := self.file_budget.logs_fit()) is not None:
            raise StartupError(problem)
        clean = all(self._log_manager.was_clean_shutdown.values())
        if not self._log_manager.logs and not clean:  # nothing to recover: a new directory (or one never used)
            log.info("no partition logs yet: a fresh start in %s", ", ".join(config.log_dirs))
        else:
            log.info("loaded %d partition logs (%s)", len(self._log_manager.logs),
                     "after a clean shutdown" if clean else "no clean-shutdown marker: logs recovered")
        self._replica_manager = ReplicaManager(config, self._log_manager, self.metadata, self._channel, self.faults,
                                              lambda: self.broker_epoch, self.metrics)
        self._share_persister = self._replica_manager.share_persister = CoordinatorPersister(self)
        self.dispatcher = Dispatcher(self)
        self.dispatcher.ready.clear()
        self._replica_manager.may_open_log = self.file_budget.can_open_log
        self.server = KafkaServer(self.dispatcher, config.socket_request_max_bytes, config.connections_max_idle_ms,
                                  max_connections=config.max_connections,
                                  max_connections_per_ip=config.max_connections_per_ip,
                                  connection_budget=self.file_budget.connections_allowed,
                                  on_disconnect=self._on_disconnect)
        # a listener asked on port 0 gets the kernel's choice: every later reader of the config sees it
        self.config = config = await bind_listeners(self.server, config, self.metadata.credentials)
        self._replica_manager.config = config
        if self.metrics is not None:
            await self._start_status_server(self.metrics)
        advertised = config.advertised_endpoints()
        try:
            self.broker_epoch = await self._channel.register(
                self.node_id, self.incarnation_id, config.advertised.host, config.advertised.port, None,
                {name: f"{endpoint.host}:{endpoint.port}" for name, endpoint in advertised.items()})
        except KafkaError as exc:  # DUPLICATE_BROKER_REGISTRATION past two sessions: another process is this node
            raise StartupError(f"{exc} ({exc.code.name}): is another process running as node "
                               f"{self.node_id}?") from exc
        # Attach now: the registration's epoch bumps are applied, so each led partition starts in its new epoch.
        records, self._unattached = self._unattached or [], None
        self._replica_manager.apply_metadata(records)
        self._replica_manager.move_strays()
        self._log_manager.checkpoint()
        self._start_coordinators()
        self._maintenance = asyncio.create_task(self._maintain())
        self.dispatcher.ready.set()
        log.info("node %d registered with broker epoch %d; %d partitions hosted", self.node_id,
                 self.broker_epoch, len(self._replica_manager.partitions))
        return config.listeners[0]

    async def _start_status_server(self, metrics: ProcessMetrics) -> None:
        from epoch_broker.broker.status import StatusServer, broker_status

        controller = self._channel.controller if isinstance(self._channel, EmbeddedChannel) else None
        metrics.watch_broker(self, lambda: len(self.server.connections) if self.server is not None else 0)
        self.status_server = StatusServer(metrics, lambda: broker_status(self, controller))
        await self.status_server.start(self.config.metrics_listener)

    def _on_disconnect(self, peer: str) -> None:
        """A client's connection closed: its share sessions end, releasing the records they held (KIP-932)."""
        if self._replica_manager is not None:
            for session in self._replica_manager.share_sessions.disconnected(peer):
                release(self._replica_manager, session.group_id, session.member_id, session.partitions)

    def _on_metadata(self, records: list[Any]) -> None:
        for record in records:
            self.metadata.apply(record)
        if self._unattached is not None:
            self._unattached.extend(records)
            return
        assert self._replica_manager is not None
        self._replica_manager.apply_metadata(records)
        for subscriber in self.metadata_subscribers:
            subscriber(records)
        self._start_coordinators()

    def _start_coordinators(self) -> None:
        """Start the coordinator of each internal topic that exists, if not yet started: it loads the partitions led
        here. Not only on a request: a broker that comes to lead a `__transaction_state` partition (the topic made
        by another broker, or a failover) must finish the transactions it finds prepared there, asked or not."""
        topics = self.metadata.topics_by_name
        if self._group_coordinator is None and OFFSETS_TOPIC in topics:
            _ = self.group_coordinator
        if self._transaction_coordinator is None and TXN_TOPIC in topics:
            _ = self.transaction_coordinator

    def _lose_power(self) -> None:
        """`fault.power.loss`: what survives a power cut is each log up to its last fsync, with no checkpoint or
        clean-shutdown marker written; the next start recovers as after a crash."""
        self.log_manager.lose_unflushed_data()
        sys.stderr.flush()
        os._exit(POWER_LOSS_EXIT_STATUS)

    def _exit_fatally(self, reason: str) -> None:
        """This broker can no longer follow the controller (a zombie whose node id was registered again, or a
        record it failed to apply): serving on would answer from a wrong state. Kafka's broker stops too."""
        log.error("node %d: %s; exiting", self.node_id, reason)
        sys.stderr.flush()
        os._exit(FATAL_EXIT_STATUS)

    @property
    def group_coordinator(self) -> GroupCoordinator | None:
        """The group coordinator, made and started on first use: a broker nobody asks about groups never
        imports it nor creates `__consumer_offsets`. None in a build without one."""
        if self._group_coordinator is None:
            try:
                module = importlib.import_module("epoch_broker.broker.groups.coordinator")
            except ModuleNotFoundError:
                log.info("no group coordinator in this build: group APIs are not served")
                return None
            self._group_coordinator = module.GroupCoordinator(self)
            self._group_coordinator.open()
        return self._group_coordinator

    @property
    def transaction_coordinator(self) -> TransactionCoordinator:
        """The transaction coordinator, made and started on first use (as the group coordinator)."""
        if self._transaction_coordinator is None:
            module = importlib.import_module("epoch_broker.broker.transactions.coordinator")
            self._transaction_coordinator = module.TransactionCoordinator(self)
            self._transaction_coordinator.open()
        return self._transaction_coordinator

    async def _maintain(self) -> None:
        """Flush.ms, retention and checkpoints every MAINTENANCE_INTERVAL_S; with log.cleaner.enable, a cleaning
        pass log.cleaner.backoff.ms after the last one ended."""
        jobs = [self._maintain_logs()]
        if self.config.log_cleaner_enable:
            jobs.append(self._clean_logs())
        await asyncio.gather(*jobs)

    async def _maintain_logs(self) -> None:
        while True:
            await asyncio.sleep(MAINTENANCE_INTERVAL_S)
            try:
                self.log_manager.maintain()
            except Exception:
                log.exception("log maintenance failed")

    async def _clean_logs(self) -> None:
        """Each cleaning reads and writes segments in a worker thread (storage/log_cleaner.py) while this loop serves
        requests; it is planned and swapped in here, between them."""
        while True:
            await asyncio.sleep(self.config.log_cleaner_backoff_ms / 1000)
            try:
                for tp, cleaning in self.log_manager.cleanings(self.config.log_cleaner_io_max_bytes_per_second):
                    await asyncio.to_thread(cleaning.run)
                    self.log_manager.finish_cleaning(tp, cleaning)
            except Exception:
                log.exception("log cleaning failed")

    async def stop(self) -> None:
        log.info("stopping node %d", self.node_id)
        if self.status_server is not None:
            await self.status_server.stop()
        if self._channel is not None and self.broker_epoch >= 0:
            try:  # controlled shutdown: leaderships move while this broker still serves its followers
                await asyncio.wait_for(self._channel.shut_down(self.node_id, self.broker_epoch), timeout=5)
            except (OSError, TimeoutError) as exc:
                log.warning("controlled shutdown failed (%s): stopping anyway", exc)
        if self._maintenance is not None:
            self._maintenance.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._maintenance
        if self._replica_manager is not None:
            self._replica_manager.release_waiters()
            await self._replica_manager.shutdown()
        if self.server is not None:
            await self.server.stop()
        if self._share_persister is not None:
            await self._share_persister.close()
        if self._transaction_coordinator is not None:
            await self._transaction_coordinator.stop()
        if self._group_coordinator is not None:
            await self._group_coordinator.stop()
        if self._log_manager is not None:
            self._log_manager.shutdown()
        if self._channel is not None:
            await self._channel.close()
        log.info("node %d stopped cleanly", self.node_id)

    # -- producer ids -------------------------------------------------------------------------------

    async def next_producer_id(self) -> int:
        """A producer id never handed out before, by any broker, across restarts (blocks from the controller)."""
        for producer_id in self._producer_ids:
            return producer_id
        assert self._channel is not None
        start, count = await self._channel.allocate_producer_ids(self.node_id, self.broker_epoch)
        self._producer_ids = iter(range(start + 1, start + count))
        return start
