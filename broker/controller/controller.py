"""The controller (Kafka's QuorumController): routes each request to the manager that owns its part of the
metadata, commits the records the manager decides on, and runs the timers that fence brokers whose sessions end.

The managers, one module each, decide: cluster_control.py (the cluster id, broker registrations, broker epochs,
sessions), replication_control.py (topics, partitions, ISR changes, elections, reassignments), config_control.py
(topic configs), acl_control.py (ACLs), scram_control.py (SCRAM credentials), quota_control.py (client quotas),
producer_id_control.py (producer id blocks). (Kafka's FeatureControlManager has no counterpart: no feature levels
are kept.) A manager returns records and an answer (a ControllerResult, controller_result.py) and never commits:
`_commit` is the one place that appends records, applies them and hands them on; `_replay` and `_run` feed it a
result or a decision's steps.

A commit makes the records durable in the `MetadataStore`, applies them to the controller's `MetadataCache`, then
hands them to every subscriber (in one process: the local broker; in a cluster, the brokers that pull or receive
them). The request methods are synchronous: state lives on the event loop. In a cluster the same methods serve
the controller's wire handlers (BrokerRegistration, CreateTopics forwarded by brokers), and brokers reach them
through a client exposing the same names.

Two ways to commit, one decision code (Kafka's QuorumController: records applied at once, answered after commit):
- The file store: a metadata append is one small fsync, done before the records are applied.
- A replicated store (ZooKeeper, `deferred`): the records are applied at once, so the next decision sees them,
  and wait past `committed_offset` until the process's committer (quorum.py) has appended them; only then do
  subscribers get them and do answers go out. If the append fails, leadership is lost: `revert` drops them.

Rules:
- Records are durable before anyone sees them: a subscriber never acts on metadata that a crash could undo.
- A broker is fenced in one place, `_fence`: when its session ends (the timers: `check_liveness`, `fence_gone`)
  or it shuts down; a fenced broker is unfenced once its heartbeat says it has applied the whole metadata log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from epoch_broker.broker import events
from epoch_broker.broker.config import BrokerConfig
from epoch_broker.broker.controller.acl_control import AclControlManager
from epoch_broker.broker.controller.cluster_control import ClusterControlManager, HeartbeatResult
from epoch_broker.broker.controller.config_control import ConfigurationControlManager, TopicConfigChange
from epoch_broker.broker.controller.controller_result import ControllerResult, ControllerSteps
from epoch_broker.broker.controller.producer_id_control import ProducerIdControlManager
from epoch_broker.broker.controller.quota_control import ClientQuotaControlManager, QuotaAlteration
from epoch_broker.broker.controller.replication_control import (
    NewTopic,
    PartitionChangeResult,
    ReplicationControlManager,
    TopicResult,
)
from epoch_broker.broker.controller.scram_control import ScramControlManager
from epoch_broker.broker.controller.store import MetadataStore
from epoch_broker.broker.metadata.image import MetadataCache
from epoch_broker.broker.security.acl import AclBinding, AclBindingFilter
from epoch_broker.broker.security.sasl import ScramCredential
from epoch_broker.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from epoch_broker.broker.metrics import ProcessMetrics

# The managers' request and answer types, for the callers (handlers, the channels, the tests) that know the
# controller only.
log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class QuorumReplica:
    """One voter or observer of the metadata log as DescribeQuorum shows it (Kafka's ReplicaState): its log end
    offset, and when (wall-clock ms, -1: unknown) it last fetched and last was caught up with the leader."""

    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int = -1
    last_caught_up_timestamp: int = -1


@dataclass(frozen=True)
class QuorumState:
    """The metadata log's quorum as DescribeQuorum shows it. `nodes`: (node id, [(listener, host, port)]) per
    voter, as v2 answers them; filled by the process that answers for the voter (it knows its bound listeners)."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: list[QuorumReplica]
    observers: list[QuorumReplica]
    nodes: list[tuple[int, list[tuple[str, str, int]]]] = field(default_factory=list)


class Controller:
    def __init__(self, config: BrokerConfig, store: MetadataStore,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.store = store
        self.image = MetadataCache()
        self.image.controller_id = config.node_id
        self.records: list[Any] = []  # the metadata log: a record's index is its metadata offset
        self.committed_offset = 0  # records[:committed_offset] are durable; subscribers have seen only those
        self.deferred = False  # a replicated store: `_commit` leaves the append to the process's committer
        self.on_uncommitted: Callable[[], None] = lambda: None  # called when deferred records wait for it
        self.active = True  # False while a standby of a ZooKeeper quorum (quorum.py sets both)
        self.controller_epoch: int | None = None  # the ZooKeeper controller epoch it won (None: the file store)
        self.subscribers: list[Callable[[list[Any]], None]] = []
        self.metrics: ProcessMetrics | None = None  # set by the process that exports metrics
        # the managers read the image (committed and applied records) and decide; clock: heartbeat deadlines (s)
        self.cluster = ClusterControlManager(config, self.image, clock)
        self.configs = ConfigurationControlManager(config, self.image)
        self.replication = ReplicationControlManager(config, self.image, self.cluster, self.configs)
        self.acls = AclControlManager(self.image)
        self.scram = ScramControlManager(self.image)
        self.producer_ids = ProducerIdControlManager(self.image)
        self.client_quotas = ClientQuotaControlManager(self.image)

    def start(self) -> list[Any]:
        """Replay the store and act; returns every record, for the first subscriber's initial state."""
        self.follow(self.store.load())
        self.activate()
        log.info("controller loaded %d metadata records (cluster %s)", len(self.records), self.image.cluster_id)
        return list(self.records)

    def follow(self, records: list[Any]) -> None:
        """Records another controller committed (read from the store at start, or by a standby)."""
        self.records.extend(records)
        for record in records:
            self.image.apply(record)
        self.mark_committed(len(self.records))

    def activate(self) -> None:
        """Start deciding: every registered broker gets a full session from now, and a new cluster its id."""
        self._replay(self.cluster.activate())

    @property
    def end_offset(self) -> int:
        """The metadata offset the next record will get (records past `committed_offset` included)."""
        return len(self.records)

    def close(self) -> None:
        self.store.close()

    # -- the one commit path ------------------------------------------------------------------------

    def _replay(self, result: ControllerResult[T]) -> T:
        """Commit a manager's records (none: nothing is written), log what they did, and give its answer."""
        if result.records:
            self._commit(result.records)
        for line in result.log:
            log.info("%s", line)
        return result.response

    def _run(self, steps: ControllerSteps[T]) -> T:
        """Commit each step's records before the next step decides; the answer is the last step's."""
        while True:
            try:
                records = next(steps)
            except StopIteration as done:
                return done.value
            self._commit(records)

    def _commit(self, records: list[Any]) -> None:
        if not self.deferred:
            self.store.append(records)  # durable before anyone sees them
        if self.metrics is not None:  # elections and ISR changes, seen against the state they replace
            self.metrics.record_controller_commit(self, records)
        self.records.extend(records)
        for record in records:
            self.image.apply(record)
        if self.deferred:
            self.on_uncommitted()
        else:
            self.mark_committed(len(self.records))

    def uncommitted(self) -> list[Any]:
        """The records applied but not yet durable, in order (a replicated store's committer appends them)."""
        return self.records[self.committed_offset:]

    def mark_committed(self, offset: int) -> None:
        """Records up to `offset` are durable: subscribers get them."""
        committed, self.committed_offset = self.records[self.committed_offset:offset], offset
        if committed:
            for subscriber in self.subscribers:
                subscriber(committed)

    def revert(self) -> None:
        """Forget the records that never became durable (leadership was lost with them in flight): the state is the
        committed log's again, as a standby's."""
        if self.committed_offset < len(self.records):
            del self.records[self.committed_offset:]
            self.image.rebuild(self.records)

    # -- brokers: registration, heartbeats, fencing -----------------------------------------------------

    def register_broker(self, node_id: int, incarnation_id: bytes, host: str, port: int,
                        rack: str | None = None, endpoints: dict[str, str] | None = None) -> int:
        """Register (or re-register) a broker, unfenced; returns its broker epoch (RegistrationRefused: another
        incarnation holds a live session). A new incarnation returns to its partitions in one commit with its
        registration: a new leader epoch where it leads (KIP-101), leadership where it can take it."""
        registration = self.cluster.register_broker(node_id, incarnation_id, host, port, rack, endpoints)
        if registration.records:  # not a retry
            self._commit([*registration.records, *self.replication.rejoin(node_id, f"broker {node_id} registered")])
            log.info("broker %d registered with broker epoch %d", node_id, registration.response)
        return registration.response

    def check_broker_epoch(self, node_id: int, broker_epoch: int) -> ErrorCode:
        return self.cluster.check_broker_epoch(node_id, broker_epoch)

    def heartbeat(self, node_id: int, broker_epoch: int, metadata_offset: int, want_fence: bool = False,
                  want_shut_down: bool = False) -> HeartbeatResult:
        """A broker's sign of life. A fenced broker is unfenced once it has applied the whole metadata log (and
        does not ask to stay fenced); `want_shut_down` fences it at once, moving its leaderships away.
        `want_fence` only keeps a fenced broker fenced: registration already unfences here, unlike KRaft."""
        error = self.cluster.check_broker_epoch(node_id, broker_epoch)
        if error != ErrorCode.NONE:
            return HeartbeatResult(error)
        caught_up = metadata_offset >= self.committed_offset - 1
        self.cluster.heard_from(node_id, metadata_offset, caught_up)
        fenced = node_id in self.image.fenced_brokers
        if want_shut_down:
            if not fenced:
                self._fence(node_id, "shutting down")
            return HeartbeatResult(is_caught_up=caught_up, is_fenced=True, should_shut_down=True)
        if fenced and caught_up and not want_fence:
            self._commit(self.replication.unfence_broker(node_id))
            log.info("broker %d unfenced: caught up with the metadata log at offset %d", node_id, metadata_offset)
            events.emit("unfence", broker=node_id, why=f"caught up with the metadata log at offset {metadata_offset}")
            fenced = False
        return HeartbeatResult(is_caught_up=caught_up, is_fenced=fenced)

    def renew_sessions(self) -> None:
        """Every broker was heard from just now: after the controller itself could not listen (a restart, a
        stall), missed heartbeats are its own fault, not the brokers'."""
        self.cluster.renew_sessions()

    def shorten_session(self, node_id: int, grace_s: float) -> None:
        """The broker's connection closed: unless it heartbeats again within `grace_s`, it is fenced then rather
        than a whole session later. A killed process's sockets close at once, so its leaderships move in well
        under a second; a paused or partitioned broker keeps its connection and gets the full session."""
        self.cluster.shorten_session(node_id, grace_s)

    def fence_gone(self, node_id: int, listener: str) -> None:
        """The broker's heartbeat connection closed and its listener refuses connections: fence it now, unless it
        came back meanwhile (a new connection heartbeated) or is fenced already."""
        closed_ms = self.cluster.closed_ms_ago(node_id)
        if closed_ms is not None and node_id in self.image.live_brokers:
            self._fence(node_id, f"its heartbeat connection closed {closed_ms:.0f} ms ago "
                                 f"and its listener {listener} refuses connections")

    def check_liveness(self) -> None:
        """Fence every unfenced broker whose session ended (cluster_control.py says why, with the real delays)."""
        for node_id, why in self.cluster.expired_sessions():
            self._fence(node_id, why)

    def _fence(self, node_id: int, why: str) -> None:
        """Fence a broker in one commit, its partitions' leaders and ISRs changed with it."""
        records = self.replication.fence_broker(node_id, why)
        log.info("fencing broker %d (%s)", node_id, why)
        events.emit("fence", broker=node_id, why=why)
        self._commit(records)

    def unregister_broker(self, node_id: int) -> tuple[ErrorCode, str | None]:
        return self._replay(self.cluster.unregister_broker(node_id))

    # -- partitions ---------------------------------------------------------------------------------

    def alter_partition(self, node_id: int, broker_epoch: int, topic_id: bytes, partition: int,
                        leader_epoch: int, partition_epoch: int, new_isr: tuple[int, ...]
                        ) -> PartitionChangeResult:
        return self._run(self.replication.alter_partition(node_id, broker_epoch, topic_id, partition, leader_epoch,
                                                          partition_epoch, new_isr))

    def alter_partition_reassignments(self, wanted: list[tuple[str, int, tuple[int, ...] | None]],
                                      allow_replication_factor_change: bool = True
                                      ) -> list[tuple[str, int, ErrorCode, str | None]]:
        return self._run(self.replication.alter_partition_reassignments(wanted, allow_replication_factor_change))

    def list_partition_reassignments(self, wanted: list[tuple[str, int]] | None
                                     ) -> list[tuple[str, int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
        return self.replication.list_partition_reassignments(wanted)

    def describe_quorum(self) -> QuorumState:
        """DescribeQuorum of the metadata log: this controller leads it (in the ZooKeeper controller epoch it won,
        0 with the file store, which has one controller), its high watermark is the committed end, the voters are
        this controller (fetched and caught up now, as Kafka's leader reports itself), and the observers the
        registered brokers at the offsets their last heartbeats applied, a heartbeat standing for a fetch."""
        end, now_ms = self.committed_offset, int(time.time() * 1000)
        applied, fetches = self.cluster.metadata_offsets, self.cluster.metadata_fetches
        observers = [QuorumReplica(node, applied[node] + 1, *fetches[node]) if node in applied
                     else QuorumReplica(node, -1) for node in sorted(self.image.brokers)]
        return QuorumState(self.config.node_id, self.controller_epoch or 0, end,
                           [QuorumReplica(self.config.node_id, end, now_ms, now_ms)], observers)

    def elect_leaders(self, partitions: list[tuple[str, int]] | None, unclean: bool, target_leader: int
                      ) -> list[tuple[str, int, ErrorCode, str | None]]:
        return self._replay(self.replication.elect_leaders(partitions, unclean, target_leader))

    # -- topics and their configs -------------------------------------------------------------------

    def create_topics(self, topics: list[NewTopic], validate_only: bool = False) -> list[TopicResult]:
        return self._replay(self.replication.create_topics(topics, validate_only))

    def delete_topics(self, topics: list[tuple[str | None, bytes | None]]
                      ) -> list[tuple[str | None, bytes, ErrorCode]]:
        return self._replay(self.replication.delete_topics(topics))

    def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                          validate_only: bool) -> tuple[ErrorCode, str | None]:
        return self._replay(self.replication.create_partitions(name, count, assignments, validate_only))

    def alter_topic_configs(self, name: str, changes: Mapping[str, TopicConfigChange],
                            validate_only: bool) -> tuple[ErrorCode, str | None]:
        return self._replay(self.configs.alter_topic_configs(name, changes, validate_only))

    def alter_client_metrics_configs(self, name: str, changes: Mapping[str, TopicConfigChange],
                                     validate_only: bool) -> tuple[ErrorCode, str | None]:
        return self._replay(self.configs.alter_client_metrics_configs(name, changes, validate_only))

    def alter_group_configs(self, group_id: str, changes: Mapping[str, TopicConfigChange],
                            validate_only: bool) -> tuple[ErrorCode, str | None]:
        return self._replay(self.configs.alter_group_configs(group_id, changes, validate_only))

    # -- ACLs, SCRAM credentials, producer ids ------------------------------------------------------

    def create_acls(self, bindings: list[AclBinding]) -> list[tuple[ErrorCode, str | None]]:
        return self._replay(self.acls.create_acls(bindings))

    def delete_acls(self, filters: list[AclBindingFilter]) -> list[tuple[ErrorCode, str | None, list[AclBinding]]]:
        return self._replay(self.acls.delete_acls(filters))

    def alter_scram_credentials(self, deletions: list[tuple[str, str]],
                                upsertions: list[tuple[str, ScramCredential | str]]
                                ) -> dict[str, tuple[ErrorCode, str | None]]:
        return self._replay(self.scram.alter_scram_credentials(deletions, upsertions))

    def alter_client_quotas(self, alterations: list[QuotaAlteration], validate_only: bool
                            ) -> list[tuple[QuotaAlteration, ErrorCode, str | None]]:
        return self._replay(self.client_quotas.alter_client_quotas(alterations, validate_only))

    def allocate_producer_ids(self, node_id: int) -> tuple[int, int]:
        return self._replay(self.producer_ids.allocate_producer_ids(node_id))
