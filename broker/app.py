"""`Broker`: wires config, controller, logs, partitions, groups, dispatcher and server; starts and stops them.

Start order (each step needs the one before):
1. The embedded controller replays its metadata log (`broker/controller/store.py`) into its image, and the
   broker's `MetadataCache` applies the same records.
2. The `LogManager` opens every partition log (recovering after an unclean shutdown).
3. The server binds its socket; then, without yielding to the event loop (so no request can run in between),
   the broker registers with the controller, which bumps the leader epoch of every partition it leads
   (KIP-101's returning leader); the `ReplicaManager` attaches the logs to the partitions the metadata places
   here, each led one recording (new epoch, log end) in its leader-epoch-checkpoint, once.
4. If `__consumer_offsets` exists, the group coordinator starts and replays its partitions in the background
   (answering COORDINATOR_LOAD_IN_PROGRESS for their groups meanwhile); otherwise the coordinator (module
   included) is made on first use by a group API, which creates the topic. Then the CLI prints the ready line.

Stop (SIGTERM/SIGINT): stop accepting, answer long polls, let in-flight requests finish, stop the group
coordinator, close every log (flush, producer-state snapshot, checkpoints, clean-shutdown marker).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import logging
import os
import uuid
from typing import Any

from broker.config import BrokerConfig, Endpoint, topic_config
from broker.controller.controller import Controller
from broker.controller.store import FileMetadataStore
from broker.dispatch import Dispatcher
from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager, log_config_for
from broker.server import KafkaServer
from protocol.errors import ErrorCode
from protocol.schema import Api, Field
from storage.log_manager import LogManager

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"  # as broker.group_coordinator, which is imported only when needed
MAINTENANCE_INTERVAL_S = 5.0  # flush.ms, retention and offset checkpoints


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.metadata = MetadataCache()
        self.incarnation_id = uuid.uuid4().bytes
        self.broker_epoch = -1
        self.controller: Controller | None = None
        self.log_manager: LogManager | None = None
        self.replica_manager: ReplicaManager | None = None
        self._group_coordinator: Any = None  # made on first use (`group_coordinator`), or at start if needed
        self.server: KafkaServer | None = None
        self.dispatcher: Dispatcher | None = None
        self._producer_ids = iter(())
        self._maintenance: asyncio.Task | None = None

    @property
    def advertised(self) -> Endpoint:
        """Where clients reach this broker (the real port once bound)."""
        return self.config.advertised

    @property
    def cluster_id(self) -> str:
        return self.metadata.cluster_id or ""

    async def start(self) -> Endpoint:
        """Start everything; returns the endpoint clients should use (with the real port if 0 was asked)."""
        config = self.config
        os.makedirs(config.data_dir, exist_ok=True)
        self.controller = Controller(config, FileMetadataStore(config.data_dir))
        records = self.controller.start()
        for record in records:
            self.metadata.apply(record)
        self.metadata.controller_id = self.node_id
        topic_log_configs = {
            name: log_config_for(config, topic_config(config, topic.configs))
            for name, topic in self.metadata.topics_by_name.items()
        }
        self.log_manager = LogManager.open(list(config.log_dirs), log_config_for(config, topic_config(config, {})),
                                           topic_configs=topic_log_configs)
        clean = all(self.log_manager.was_clean_shutdown.values())
        log.info("loaded %d partition logs (%s)", len(self.log_manager.logs),
                 "after a clean shutdown" if clean else "no clean-shutdown marker: logs recovered")
        self.replica_manager = ReplicaManager(config, self.log_manager, self.metadata, self.controller)
        self.controller.subscribers.append(self._on_metadata)
        self.dispatcher = Dispatcher(self)
        self.server = KafkaServer(self.dispatcher, config.socket_request_max_bytes, config.connections_max_idle_ms)
        listener = config.listeners[0]
        host, port = await self.server.start(listener.host, listener.port)
        if listener.port == 0:  # the kernel chose the port: make every later reader of the config see it
            self.config = config = dataclasses.replace(
                config, listeners=(Endpoint(listener.listener, listener.host, port), *config.listeners[1:]))
        # No await from here to the end of registration: no request runs before the epochs are bumped.
        self.broker_epoch = self.controller.register_broker(
            self.node_id, self.incarnation_id, config.advertised.host, config.advertised.port)
        # Partitions are attached only now: registration's epoch bumps (applied by `_on_metadata`) create the ones
        # led here directly in their new epoch, so each writes its leader-epoch-checkpoint once, not first for
        # the epoch it had before the restart; this attaches the rest (and is a no-op for those).
        self.replica_manager.apply_metadata(records)
        self.replica_manager.remove_strays()
        self.log_manager.checkpoint()
        if OFFSETS_TOPIC in self.metadata.topics_by_name:  # groups to load (in the background)
            _ = self.group_coordinator
        self._maintenance = asyncio.create_task(self._maintain())
        log.info("node %d registered with broker epoch %d; %d partitions hosted", self.node_id,
                 self.broker_epoch, len(self.replica_manager.partitions))
        return Endpoint(listener.listener, host, port)

    def _on_metadata(self, records: list[Any]) -> None:
        for record in records:
            self.metadata.apply(record)
        assert self.replica_manager is not None
        self.replica_manager.apply_metadata(records)

    @property
    def group_coordinator(self) -> Any:
        """The group coordinator, made and started on first use: a broker nobody asks about groups never
        imports it nor creates `__consumer_offsets`. None in a build without one."""
        if self._group_coordinator is None:
            try:
                module = importlib.import_module("broker.group_coordinator")
            except ModuleNotFoundError:
                log.info("no group coordinator in this build: group APIs are not served")
                return None
            self._group_coordinator = module.GroupCoordinator(self)
            self._group_coordinator.open()
        return self._group_coordinator

    async def _maintain(self) -> None:
        assert self.log_manager is not None
        while True:
            await asyncio.sleep(MAINTENANCE_INTERVAL_S)
            try:
                self.log_manager.maintain()
            except Exception:
                log.exception("log maintenance failed")

    async def stop(self) -> None:
        log.info("stopping node %d", self.node_id)
        if self._maintenance is not None:
            self._maintenance.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._maintenance
        if self.replica_manager is not None:
            self.replica_manager.release_waiters()
        if self.server is not None:
            await self.server.stop()
        if self._group_coordinator is not None:
            await self._group_coordinator.stop()
        if self.log_manager is not None:
            self.log_manager.shutdown()
        if self.controller is not None:
            self.controller.close()
        log.info("node %d stopped cleanly", self.node_id)

    # -- producer ids -------------------------------------------------------------------------------

    def next_producer_id(self) -> int:
        """A producer id never handed out before, by any broker, across restarts (blocks from the controller)."""
        for producer_id in self._producer_ids:
            return producer_id
        assert self.controller is not None
        start, count = self.controller.allocate_producer_ids(self.node_id)
        self._producer_ids = iter(range(start + 1, start + count))
        return start

    # -- fault hooks --------------------------------------------------------------------------------

    def error_response(self, api: Api, request: Any, code: ErrorCode) -> Any:
        """A response to `request` with `code` in every error_code field, topics and partitions mirrored from
        the request (for the dispatcher's fault hooks)."""
        response = api.response.cls()
        _fill_error(response, api.response.fields, api.response.types, request, code)
        return response


_PARTITION_ID_FIELDS = ("partition", "index", "partition_index")
_TOPIC_ID_FIELDS = ("name", "topic", "topic_id")


def _fill_error(target: Any, fields: list[Field], types: dict[str, type], source: Any, code: ErrorCode) -> None:
    """Set every error_code of `target`; for each array of structs, one element per element of the first
    array of structs in `source` (the request), carrying its topic and partition identifiers."""
    source_items = _first_struct_array(source)
    for f in fields:
        if f.name == "error_code":
            target.error_code = code
        elif f.is_array and f.is_struct and source_items is not None:
            items = []
            for item in source_items:
                element = types[f.element_type]()
                for name in _TOPIC_ID_FIELDS:
                    if hasattr(item, name) and hasattr(element, name):
                        setattr(element, name, getattr(item, name))
                partition_id = next((getattr(item, n) for n in _PARTITION_ID_FIELDS if hasattr(item, n)), None)
                target_id = next((n for n in _PARTITION_ID_FIELDS if hasattr(element, n)), None)
                if isinstance(partition_id, int) and target_id is not None:
                    setattr(element, target_id, partition_id)
                _fill_error(element, f.fields or [], types, item, code)
                items.append(element)
            setattr(target, f.name, items)


def _first_struct_array(source: Any) -> list | None:
    if source is None or isinstance(source, int):
        return None
    for name in source._field_names:
        value = getattr(source, name)
        if isinstance(value, list) and value and not isinstance(value[0], int | str | bytes):
            return value
    return None
