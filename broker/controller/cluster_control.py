"""Cluster membership (Kafka's ClusterControlManager and its BrokerHeartbeatManager): the cluster id, broker
registrations and broker epochs, and the sessions that say when a broker is to be fenced.

What fencing or unfencing does to partitions is replication_control.py's; the controller fences on its timers.

Rules:
- A new cluster gets a random id (22 characters of a uuid4, as Kafka's), or `cluster.id` from the config.
- Broker epochs only grow, across controller restarts too (derived from the replayed registrations); a
  registration with the incarnation id of the current one is a retry and gets the same epoch, writing nothing.
- Another incarnation while the registered one's session is alive is refused (DUPLICATE_BROKER_REGISTRATION, as
  Kafka does): a second process, or a forger, cannot take a live broker's place.
- A broker not heard from for `broker.session.timeout.ms`, or whose heartbeat connection closed longer ago than
  its grace, has lost its session. Sessions are not durable: after a controller restart (or a stall) every
  registered broker gets a full session from the start.
- A live broker is never unregistered: it would register again.
"""

from __future__ import annotations

import base64
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from epoch_broker.broker.config import BrokerConfig
from epoch_broker.broker.controller.controller_result import ControllerResult
from epoch_broker.broker.metadata.image import MetadataCache
from epoch_broker.broker.metadata.records import (
    BrokerFenceRecord,
    ClusterRecord,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)
from epoch_broker.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class RegistrationRefused(Exception):
    def __init__(self, error: ErrorCode) -> None:
        super().__init__(error.name)
        self.error = error


@dataclass(slots=True)
class HeartbeatResult:
    error: ErrorCode = ErrorCode.NONE
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


class ClusterControlManager:
    def __init__(self, config: BrokerConfig, image: MetadataCache, clock: Callable[[], float]) -> None:
        self.config = config
        self.image = image
        self.clock = clock  # seconds; heartbeat deadlines
        self.last_heartbeat: dict[int, float] = {}  # node id -> clock() of its last sign of life
        self.metadata_offsets: dict[int, int] = {}  # node id -> the metadata offset its last heartbeat had applied
        # node id -> wall-clock ms of that heartbeat, and of the last one that had applied every committed record
        # (-1: none since this controller started); DescribeQuorum's last fetch and last caught-up timestamps
        self.metadata_fetches: dict[int, tuple[int, int]] = {}
        self.heard_since_start: set[int] = set()  # brokers with a session opened with this controller
        # node id -> (clock() when its heartbeat connection closed, the grace it has to heartbeat again)
        self.disconnected: dict[int, tuple[float, float]] = {}

    def activate(self) -> ControllerResult[None]:
        """This controller starts deciding: every registered broker gets a full session from now (when each was last
        heard from died with the previous controller), and a new cluster its id."""
        started = self.clock()
        self.last_heartbeat = dict.fromkeys(self.image.brokers, started)
        self.heard_since_start.clear()
        self.disconnected.clear()
        if self.image.cluster_id is not None:
            return ControllerResult([], None)
        cluster_id = self.config.cluster_id or base64.urlsafe_b64encode(uuid.uuid4().bytes).decode()[:22]
        return ControllerResult([ClusterRecord(cluster_id)], None)

    # -- registrations ------------------------------------------------------------------------------

    def register_broker(self, node_id: int, incarnation_id: bytes, host: str, port: int, rack: str | None,
                        endpoints: dict[str, str] | None) -> ControllerResult[int]:
        """The registration of a broker, unfenced; the answer is its broker epoch. A retry (the current incarnation
        again: its answer was lost) gets the current epoch and no records; another incarnation while the
        registered one's session is alive raises RegistrationRefused (the real broker restarting finds its old
        session fenced or its connection closed)."""
        current = self.image.brokers.get(node_id)
        if current is not None and current.incarnation_id == incarnation_id:
            self.heard_from(node_id)
            return ControllerResult([], current.broker_epoch)
        if current is not None and self.session_alive(node_id):
            log.warning("refused a registration of node %d from another incarnation: its session is alive", node_id)
            raise RegistrationRefused(ErrorCode.DUPLICATE_BROKER_REGISTRATION)
        self.heard_from(node_id)
        broker_epoch = max((b.broker_epoch for b in self.image.brokers.values()), default=0) + 1
        return ControllerResult([RegisterBrokerRecord(node_id, broker_epoch, incarnation_id, host, port, rack,
                                                      endpoints or {})], broker_epoch)

    def check_broker_epoch(self, node_id: int, broker_epoch: int) -> ErrorCode:
        """NONE for the broker's current registration; a never-registered node or an older (or made-up) epoch
        is answered so that the broker registers again."""
        registered = self.image.brokers.get(node_id)
        if registered is None:
            return ErrorCode.BROKER_ID_NOT_REGISTERED
        if registered.broker_epoch != broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        return ErrorCode.NONE

    def fence_record(self, node_id: int, fenced: bool) -> BrokerFenceRecord:
        return BrokerFenceRecord(node_id, self.image.brokers[node_id].broker_epoch, fenced)

    def unregister_broker(self, node_id: int) -> ControllerResult[tuple[ErrorCode, str | None]]:
        """Remove a broker gone for good from the cluster. A live one is refused (stop it first); its replicas stay
        in their replica sets until reassigned."""
        registered = self.image.brokers.get(node_id)
        if registered is None:
            return ControllerResult([], (ErrorCode.BROKER_ID_NOT_REGISTERED, f"broker {node_id} is not registered"))
        if node_id in self.image.live_brokers:
            return ControllerResult([], (ErrorCode.INVALID_REQUEST,
                                         f"broker {node_id} is alive: stop it before removing it"))
        self.last_heartbeat.pop(node_id, None)
        self.disconnected.pop(node_id, None)
        return ControllerResult([UnregisterBrokerRecord(node_id, registered.broker_epoch)], (ErrorCode.NONE, None),
                                (f"broker {node_id} unregistered",))

    # -- sessions -----------------------------------------------------------------------------------

    def heard_from(self, node_id: int, metadata_offset: int | None = None, caught_up: bool = False) -> None:
        self.last_heartbeat[node_id] = self.clock()
        if metadata_offset is not None:
            self.metadata_offsets[node_id] = metadata_offset
            now_ms = int(time.time() * 1000)
            self.metadata_fetches[node_id] = (now_ms, now_ms if caught_up else
                                              self.metadata_fetches.get(node_id, (-1, -1))[1])
        self.disconnected.pop(node_id, None)
        self.heard_since_start.add(node_id)

    def session_alive(self, node_id: int) -> bool:
        """Whether the broker holds a session with this controller now: heard from since it started, unfenced,
        its heartbeat connection open, and within the session timeout."""
        return (node_id in self.heard_since_start and node_id in self.image.live_brokers
                and node_id not in self.disconnected
                and (self.clock() - self.last_heartbeat.get(node_id, 0.0)) * 1000
                <= self.config.broker_session_timeout_ms)

    def renew_sessions(self) -> None:
        """Every broker was heard from just now (the controller itself could not listen)."""
        now = self.clock()
        self.last_heartbeat = {node_id: max(seen, now) for node_id, seen in self.last_heartbeat.items()}
        self.disconnected.clear()

    def shorten_session(self, node_id: int, grace_s: float) -> None:
        """The broker's heartbeat connection closed: its session ends `grace_s` from now unless it heartbeats."""
        if node_id in self.last_heartbeat:
            self.disconnected[node_id] = (self.clock(), grace_s)

    def closed_ms_ago(self, node_id: int) -> float | None:
        """How long ago the broker's heartbeat connection closed; None if it is open (or a new one heartbeated)."""
        closed = self.disconnected.get(node_id)
        return None if closed is None else (self.clock() - closed[0]) * 1000

    def expired_sessions(self) -> list[tuple[int, str]]:
        """(node id, why) of every unfenced broker whose last heartbeat is older than the session timeout, or whose
        heartbeat connection closed longer ago than its grace; the why says which, with the real delays."""
        now = self.clock()
        session_s = self.config.broker_session_timeout_ms / 1000
        expired = []
        for node_id in sorted(self.image.live_brokers):
            silent_ms = (now - self.last_heartbeat[node_id]) * 1000
            closed = self.disconnected.get(node_id)
            if closed is not None and now - closed[0] >= closed[1]:
                expired.append((node_id, f"its heartbeat connection closed {(now - closed[0]) * 1000:.0f} ms ago and "
                                         f"it did not come back within the {closed[1] * 1000:.0f} ms grace; last "
                                         f"heartbeat {silent_ms:.0f} ms ago"))
            elif now - self.last_heartbeat[node_id] > session_s:
                expired.append((node_id, f"no heartbeat for {silent_ms:.0f} ms (broker.session.timeout.ms "
                                         f"{self.config.broker_session_timeout_ms})"))
        return expired
