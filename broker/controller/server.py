"""`ControllerServer`: a controller-only process (`process.roles=controller`), serving brokers over the wire.

It owns the `Controller` and its store, answers the controller APIs (broker/controller/handlers/ and the
shared topic handlers in broker/handlers/), wakes brokers' long-polling metadata fetches when records are
committed, and fences brokers whose heartbeats stop (`Controller.check_liveness`, on a timer).

Fast failure detection: when the connection a broker heartbeats on closes (its process died: the kernel
closes its sockets), the broker is fenced two heartbeat intervals later (a timer, not the next liveness tick)
unless it heartbeats again on a new connection (`Controller.shorten_session`). Sooner still, the controller
connects to the broker's listener at once: refused, nothing listens there any more, the process is gone, and
the broker is fenced within milliseconds (`controller.listener.probe.enable`), before librdkafka's first leader
query after its own connection broke (15-50 ms later; a query that still finds the dead leader waits for the
client's 1 s topic scan). So a SIGKILLed leader is replaced at once, while a paused broker (SIGSTOP) or a network
partition, which close nothing, still get the whole session timeout. A paused controller is the converse: when it
runs again after a gap of STALL_S or more, every broker gets a new session before any is judged, since their
heartbeats waited unread.

With `zookeeper.connect` several controller processes share the store in ZooKeeper; one is active
(broker/controller/quorum.py). The others answer NOT_CONTROLLER to everything but the connection's own
requests (`acting`), and fence nobody; every answer of the active one waits until the records its decision
made are committed (`until_committed`, called by the dispatcher), or is NOT_CONTROLLER if leadership was lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import TYPE_CHECKING

from epoch_broker.broker.config import BrokerConfig, Endpoint, StartupError
from epoch_broker.broker.controller.channel import EmbeddedChannel
from epoch_broker.broker.controller.controller import Controller
from epoch_broker.broker.controller.store.file import FileMetadataStore
from epoch_broker.broker.faults import BrokerFaults
from epoch_broker.broker.log_dirs import check_metadata_log_present, claim_log_dirs, corrupt_metadata_log
from epoch_broker.broker.metadata.image import MetadataCache
from epoch_broker.broker.metadata.stored_log import CorruptMetadataLog
from epoch_broker.broker.network.dispatch import CONTROLLER, Dispatcher
from epoch_broker.broker.network.server import KafkaServer
from epoch_broker.broker.security import authorization
from epoch_broker.broker.security.listeners import add_config_users, bind_listeners

if TYPE_CHECKING:
    from epoch_broker.broker.controller.quorum import ZooKeeperQuorum
    from epoch_broker.broker.metrics import ProcessMetrics
    from epoch_broker.broker.status import StatusServer

log = logging.getLogger(__name__)

LIVENESS_CHECK_INTERVAL_S = 0.1
STALL_S = 1.0  # a gap this long between liveness checks means this process was not running
CLUSTER_ID_WAIT_S = 30.0  # beyond a session: how long a new standby waits for the first active controller


class ControllerServer:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.quorum: ZooKeeperQuorum | None = None
        if config.zookeeper_connect:  # kazoo is imported only then
            from epoch_broker.broker.controller.quorum import ZooKeeperQuorum
            from epoch_broker.broker.controller.store.zookeeper import open_zookeeper_store

            store = open_zookeeper_store(config)
            self.controller = Controller(config, store)
            self.quorum = ZooKeeperQuorum(self.controller, store, config.node_id, config.zookeeper_session_timeout_ms,
                                          on_revert=lambda: add_config_users(self.config, self.metadata.credentials))
        else:
            check_metadata_log_present(config.data_dir)  # before the store opens (and would create) it
            self.controller = Controller(config, FileMetadataStore(config.data_dir))
        self.channel = EmbeddedChannel(self.controller)  # the shared topic handlers call the controller through it
        self.metadata: MetadataCache = self.controller.image
        # request rules only: the controller's store is not a partition log
        self.faults = BrokerFaults(hooks_enabled=config.fault_hooks_enable)
        self.server: KafkaServer | None = None
        self._appended = asyncio.Event()  # set (and replaced) on every commit: wakes metadata long polls
        self._liveness: asyncio.Task | None = None
        self._heartbeat_peers: dict[str, int] = {}  # connection (peer address) -> node id heartbeating on it
        self._last_check = 0.0  # loop time of the last liveness check (a long gap: this process was stopped)
        self._judged = True  # False while not acting: heartbeats it refused meanwhile do not count against brokers
        self._grace_timers: set[asyncio.TimerHandle] = set()  # liveness checks ending disconnect graces
        self._probes: set[asyncio.Task] = set()  # connections to the listeners of brokers whose connection closed
        self.disconnect_grace_s = 2 * config.broker_heartbeat_interval_ms / 1000
        self.metrics: ProcessMetrics | None = None  # with `metrics.listener` only
        self.status_server: StatusServer | None = None
        if config.metrics_listener:  # prometheus_client and aiohttp are imported only then
            from epoch_broker.broker.metrics import ProcessMetrics

            self.metrics = self.controller.metrics = ProcessMetrics()
            self.metrics.watch_controller(self.controller)

    @property
    def cluster_id(self) -> str:
        return self.metadata.cluster_id or ""

    async def start(self) -> Endpoint:
        os.makedirs(self.config.data_dir, exist_ok=True)
        add_config_users(self.config, self.metadata.credentials)
        authorization.configure(self.config, self.metadata.acls)
        try:
            if self.quorum is None:
                self.controller.start()
            else:
                await self._join_quorum()
        except CorruptMetadataLog as exc:
            raise corrupt_metadata_log(exc) from exc
        claim_log_dirs([self.config.data_dir], self.cluster_id, self.node_id)
        self.controller.subscribers.append(self._on_commit)
        dispatcher = Dispatcher(self, role=CONTROLLER)
        self.server = KafkaServer(dispatcher, self.config.socket_request_max_bytes,
                                  self.config.connections_max_idle_ms, on_disconnect=self._on_disconnect)
        self.config = await bind_listeners(self.server, self.config, self.metadata.credentials)
        if self.metrics is not None:
            from epoch_broker.broker.status import StatusServer, controller_status

            self.status_server = StatusServer(self.metrics,
                                              lambda: controller_status(self.config, self.controller, self.faults))
            await self.status_server.start(self.config.metrics_listener)
        if not self.config.cluster_secret and not self.config.authorizer_class_name:
            log.warning("no cluster.secret and no authorizer: any client that reaches this controller can register "
                        "as a broker, fence brokers and change partition leadership (start it with cluster.secret, "
                        "as `epoch-broker cluster` does, or configure SASL and an authorizer)")
        self._last_check = asyncio.get_running_loop().time()
        self._liveness = asyncio.create_task(self._check_liveness())
        log.info("controller %d serving %d metadata records", self.node_id, self.controller.end_offset)
        return self.config.listeners[0]

    async def _join_quorum(self) -> None:
        """Follow the log in ZooKeeper (and become active if no controller is): started once the cluster has an id."""
        assert self.quorum is not None
        loop = asyncio.get_running_loop()
        wait_s = self.config.zookeeper_session_timeout_ms / 1000 + CLUSTER_ID_WAIT_S
        deadline = loop.time() + wait_s
        await self.quorum.start()
        while self.metadata.cluster_id is None:  # a standby of a new cluster: the first active one names it
            if loop.time() > deadline:
                raise StartupError(f"zookeeper.connect: {self.config.zookeeper_connect}: no controller wrote the "
                                   f"cluster id within {wait_s:.0f} s")
            await self.quorum.wait_for_change(0.1)
        log.info("controller %d joined the quorum in ZooKeeper as %s", self.node_id,
                 "the active controller" if self.quorum.active else "a standby")

    @property
    def acting(self) -> bool:
        """Whether this process decides now (a standby, or an active controller past its lease, does not)."""
        return self.quorum is None or self.quorum.acting

    async def until_committed(self) -> bool:
        """Wait until every record decided so far is durable; False if leadership was lost first."""
        return self.quorum is None or await self.quorum.until_committed(self.controller.end_offset)

    def note_heartbeat_connection(self, peer: str, node_id: int) -> None:
        self._heartbeat_peers[peer] = node_id

    def _on_disconnect(self, peer: str) -> None:
        node_id = self._heartbeat_peers.pop(peer, None)
        if node_id is not None and node_id not in self._heartbeat_peers.values():
            self.controller.shorten_session(node_id, self.disconnect_grace_s)
            # Fence when the grace ends, not at the next liveness tick (up to LIVENESS_CHECK_INTERVAL_S later): a
            # failover's clock. The margin puts the check past the shortened deadline (check_liveness is strict).
            loop = asyncio.get_running_loop()
            self._grace_timers.add(loop.call_later(self.disconnect_grace_s + 0.005, self._end_grace))
            if self.config.controller_listener_probe_enable:
                probe = loop.create_task(self._probe_listener(node_id))
                self._probes.add(probe)
                probe.add_done_callback(self._probes.discard)

    async def _probe_listener(self, node_id: int) -> None:
        """Fence a broker whose listener refuses connections: a host that is up refuses at once a port nothing
        listens on, so its process is gone. Anything else (accepted: a live broker that lost only this connection,
        or one already restarted; unreachable, slow, a name that no longer resolves) leaves it to the grace."""
        registration = self.controller.image.brokers.get(node_id)
        if registration is None:
            return
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(registration.host, registration.port),
                                               self.disconnect_grace_s)
        except ConnectionRefusedError:
            if self.acting:
                self.controller.fence_gone(node_id, f"{registration.host}:{registration.port}")
            return
        except (TimeoutError, OSError):
            return
        writer.close()

    def _on_commit(self, _records: list) -> None:
        self._appended.set()
        self._appended = asyncio.Event()

    async def wait_for_records(self, offset: int, timeout_s: float) -> None:
        """Return once the metadata log has a committed record at `offset`, or after `timeout_s`."""
        if offset < self.controller.committed_offset or timeout_s <= 0:
            return
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._appended.wait(), timeout_s)

    async def _check_liveness(self) -> None:
        while True:
            await asyncio.sleep(LIVENESS_CHECK_INTERVAL_S)
            self._check_liveness_now()

    def _end_grace(self) -> None:
        now = asyncio.get_running_loop().time()
        self._grace_timers = {t for t in self._grace_timers if t.when() > now}  # forget the ones that fired
        self._check_liveness_now()

    def _check_liveness_now(self) -> None:
        now = asyncio.get_running_loop().time()
        if not self.acting:  # a standby judges nobody (nor a controller past its lease)
            self._judged = False
            return
        if not self._judged:  # acting (again): the heartbeats it answered NOT_CONTROLLER meanwhile count for them
            self._judged = True
            self.controller.renew_sessions()
        elif now - self._last_check > STALL_S:
            # Stopped (SIGSTOP, a VM pause) or blocked: the brokers' heartbeats wait unread in the sockets, so
            # fencing them now would punish them for the controller's absence.
            log.warning("controller did not run for %.1f s: every broker gets a new session", now - self._last_check)
            self.controller.renew_sessions()
        self._last_check = now
        try:
            self.controller.check_liveness()
        except Exception:  # a bug here must not stop fencing for good
            log.exception("liveness check failed")

    async def stop(self) -> None:
        if self.status_server is not None:
            await self.status_server.stop()
        for timer in self._grace_timers:
            timer.cancel()
        for probe in list(self._probes):
            probe.cancel()
        if self._liveness is not None:
            self._liveness.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._liveness
        if self.server is not None:
            await self.server.stop()
        if self.quorum is not None:
            await self.quorum.stop()
        self.controller.close()
        log.info("controller %d stopped cleanly", self.node_id)
