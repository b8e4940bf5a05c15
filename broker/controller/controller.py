"""Controller logic: topics, partitions, topic ids, broker registration with leader-epoch bumps, producer ids.

The controller turns requests into metadata records, makes them durable in its `MetadataStore`, applies them
to its own `MetadataCache`, then hands them to every subscriber (in one process: the local broker; in a
cluster, issue 6, the brokers that pull or receive them). The request methods are synchronous: state lives on
the event loop. In a cluster the same methods serve the controller's wire handlers (BrokerRegistration,
CreateTopics forwarded by brokers), and brokers reach them through a client exposing the same names.

Two ways to commit, one decision code (Kafka's QuorumController: records applied at once, answered after commit):
- The file store: a metadata append is one small fsync, done before the records are applied.
- A replicated store (ZooKeeper, `deferred`): the records are applied at once, so the next decision sees them,
  and wait past `committed_offset` until the process's committer (quorum.py) has appended them; only then do
  subscribers get them and do answers go out. If the append fails, leadership is lost: `revert` drops them.

Rules:
- Records are durable before anyone sees them: a subscriber never acts on metadata that a crash could undo.
- Broker epochs only grow, across controller restarts too (derived from the replayed registrations); a
  registration with the incarnation id of the current one is a retry and gets the same epoch.
- Returning leaders (KIP-101): when a broker registers while it leads partitions, each of those partitions
  gets a new leader epoch (and partition epoch), so a leader that restarts without an election still starts a
  new epoch; the broker records the epoch's start offset before accepting produce. A broker that registers or
  is unfenced is also elected where the partition is leaderless and it is in the ISR (or, with unclean
  election allowed, a replica).
- A broker not heard from for `broker.session.timeout.ms` (or shutting down) is fenced: out of every ISR, its
  leaderships moved to the next live ISR member. Heartbeat times are not durable: after a controller restart
  every registered broker gets a full session from the start.
- A partition that has a leader has no fenced broker in its ISR; a leaderless one keeps its last ISR member
  (KRaft's rule), the replica to wait for.
- Every leader change bumps the leader epoch and the partition epoch, an ISR-only change the partition epoch;
  epochs never go down.
- Topic ids are random 16-byte UUIDs (uuid4), never reused.
"""

from __future__ import annotations

import base64
import logging
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from epoch_broker.broker import events
from epoch_broker.broker.config import TOPIC_CONFIGS, BrokerConfig, topic_config, validate_topic_configs
from epoch_broker.broker.controller.store import MetadataStore
from epoch_broker.broker.metadata.image import MetadataCache, PartitionState, TopicState
from epoch_broker.broker.metadata.records import (
    AccessControlEntryRecord,
    BrokerFenceRecord,
    ClusterRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicConfigRecord,
    TopicRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from epoch_broker.broker.security.acl import AclBinding, AclBindingFilter, validate_binding, validate_filter
from epoch_broker.broker.security.sasl import ScramCredential
from epoch_broker.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from epoch_broker.broker.metrics import ProcessMetrics

log = logging.getLogger(__name__)

MAX_PARTITIONS_PER_REQUEST = 10_000

PRODUCER_ID_BLOCK = 1000
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")


class RegistrationRefused(Exception):
    def __init__(self, error: ErrorCode) -> None:
        super().__init__(error.name)
        self.error = error


def topic_name_error(name: str | None) -> str | None:
    """Why `name` is not a legal topic name (Kafka's Topic.validate), or None if it is."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        return f"topic name {name!r} has characters outside [a-zA-Z0-9._-]"
    return None


@dataclass(slots=True)
class NewTopic:
    name: str
    num_partitions: int = -1  # -1: num.partitions
    replication_factor: int = -1  # -1: default.replication.factor
    assignments: dict[int, list[int]] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class TopicResult:
    name: str
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    topic_id: bytes = bytes(16)
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class HeartbeatResult:
    error: ErrorCode = ErrorCode.NONE
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


@dataclass(slots=True)
class PartitionChangeResult:
    """AlterPartition's answer for one partition: the error, or the partition's state after the change."""

    error: ErrorCode = ErrorCode.NONE
    leader: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    isr: tuple[int, ...] = ()


class _PartitionBudget:
    """The partition limits of one request, checked before anything is allocated or committed: at most
    MAX_PARTITIONS_PER_REQUEST new partitions (Kafka's QuorumController refuses more with POLICY_VIOLATION),
    and at most `cluster.max.partitions` in the cluster."""

    def __init__(self, existing: int, cluster_max: int) -> None:
        self.existing = existing
        self.cluster_max = cluster_max
        self.requested = 0

    def take(self, partitions: int) -> str | None:
        """None if `partitions` more fit (and counts them), else why not."""
        if self.requested + partitions > MAX_PARTITIONS_PER_REQUEST:
            return (f"{partitions} partitions would make {self.requested + partitions} in one request; at most "
                    f"{MAX_PARTITIONS_PER_REQUEST} are created per request")
        if self.existing + self.requested + partitions > self.cluster_max:
            return (f"{partitions} more partitions would make {self.existing + self.requested + partitions} in "
                    f"the cluster; cluster.max.partitions is {self.cluster_max}")
        self.requested += partitions
        return None


class Controller:
    def __init__(self, config: BrokerConfig, store: MetadataStore,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.store = store
        self.clock = clock  # seconds; heartbeat deadlines
        self.image = MetadataCache()
        self.image.controller_id = config.node_id
        self.records: list[Any] = []  # the metadata log: a record's index is its metadata offset
        self.committed_offset = 0  # records[:committed_offset] are durable; subscribers have seen only those
        self.deferred = False  # a replicated store: `_commit` leaves the append to the process's committer
        self.on_uncommitted: Callable[[], None] = lambda: None  # called when deferred records wait for it
        self.active = True  # False while a standby of a ZooKeeper quorum (quorum.py sets both)
        self.controller_epoch: int | None = None  # the ZooKeeper controller epoch it won (None: the file store)
        self.subscribers: list[Callable[[list[Any]], None]] = []
        self.last_heartbeat: dict[int, float] = {}  # node id -> clock() of its last sign of life
        self.heard_since_start: set[int] = set()  # brokers with a session opened with this controller
        # node id -> (clock() when its heartbeat connection closed, the grace it has to heartbeat again)
        self.disconnected: dict[int, tuple[float, float]] = {}
        self.metrics: ProcessMetrics | None = None  # set by the process that exports metrics

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
        """Start deciding: every registered broker gets a full session from now (when each was last heard from
        died with the previous controller), and a new cluster its id."""
        started = self.clock()
        self.last_heartbeat = dict.fromkeys(self.image.brokers, started)
        self.heard_since_start.clear()
        self.disconnected.clear()
        if self.image.cluster_id is None:
            cluster_id = self.config.cluster_id or base64.urlsafe_b64encode(uuid.uuid4().bytes).decode()[:22]
            self._commit([ClusterRecord(cluster_id)])

    @property
    def end_offset(self) -> int:
        """The metadata offset the next record will get (records past `committed_offset` included)."""
        return len(self.records)

    def close(self) -> None:
        self.store.close()

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

    # -- brokers ------------------------------------------------------------------------------------

    def register_broker(self, node_id: int, incarnation_id: bytes, host: str, port: int,
                        rack: str | None = None, endpoints: dict[str, str] | None = None) -> int:
        """Register (or re-register) a broker, unfenced; returns its broker epoch.

        A new incarnation gets a new epoch, and its leaderships a new leader epoch (KIP-101); the same
        incarnation again is a retry (its answer was lost) and gets the current epoch, writing nothing. Another
        incarnation while the registered one's session is alive is refused (RegistrationRefused,
        DUPLICATE_BROKER_REGISTRATION, as Kafka does): a second process, or a forger, cannot take a live
        broker's place; the real broker restarting finds its old session fenced or its connection closed."""
        current = self.image.brokers.get(node_id)
        if current is not None and current.incarnation_id == incarnation_id:
            self._heard_from(node_id)
            return current.broker_epoch
        if current is not None and self._session_alive(node_id):
            log.warning("refused a registration of node %d from another incarnation: its session is alive", node_id)
            raise RegistrationRefused(ErrorCode.DUPLICATE_BROKER_REGISTRATION)
        self._heard_from(node_id)
        broker_epoch = max((b.broker_epoch for b in self.image.brokers.values()), default=0) + 1
        records: list[Any] = [RegisterBrokerRecord(node_id, broker_epoch, incarnation_id, host, port, rack,
                                                   endpoints or {})]
        records += self._rejoin(node_id, f"broker {node_id} registered")
        self._commit(records)
        log.info("broker %d registered with broker epoch %d", node_id, broker_epoch)
        return broker_epoch

    def check_broker_epoch(self, node_id: int, broker_epoch: int) -> ErrorCode:
        """NONE for the broker's current registration; a never-registered node or an older (or made-up) epoch
        is answered so that the broker registers again."""
        registered = self.image.brokers.get(node_id)
        if registered is None:
            return ErrorCode.BROKER_ID_NOT_REGISTERED
        if registered.broker_epoch != broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        return ErrorCode.NONE

    def heartbeat(self, node_id: int, broker_epoch: int, metadata_offset: int, want_fence: bool = False,
                  want_shut_down: bool = False) -> HeartbeatResult:
        """A broker's sign of life. A fenced broker is unfenced once it has applied the whole metadata log (and
        does not ask to stay fenced); `want_shut_down` fences it at once, moving its leaderships away.
        `want_fence` only keeps a fenced broker fenced: registration already unfences here, unlike KRaft."""
        error = self.check_broker_epoch(node_id, broker_epoch)
        if error != ErrorCode.NONE:
            return HeartbeatResult(error)
        self._heard_from(node_id)
        caught_up = metadata_offset >= self.committed_offset - 1
        fenced = node_id in self.image.fenced_brokers
        if want_shut_down:
            if not fenced:
                self._fence(node_id, "shutting down")
            return HeartbeatResult(is_caught_up=caught_up, is_fenced=True, should_shut_down=True)
        if fenced and caught_up and not want_fence:
            self._commit([BrokerFenceRecord(node_id, broker_epoch, False),
                          *self._rejoin(node_id, f"broker {node_id} unfenced")])
            log.info("broker %d unfenced: caught up with the metadata log at offset %d", node_id, metadata_offset)
            events.emit("unfence", broker=node_id, why=f"caught up with the metadata log at offset {metadata_offset}")
            fenced = False
        return HeartbeatResult(is_caught_up=caught_up, is_fenced=fenced)

    def renew_sessions(self) -> None:
        """Every broker was heard from just now: after the controller itself could not listen (a restart, a
        stall), missed heartbeats are its own fault, not the brokers'."""
        now = self.clock()
        self.last_heartbeat = {node_id: max(seen, now) for node_id, seen in self.last_heartbeat.items()}
        self.disconnected.clear()

    def _heard_from(self, node_id: int) -> None:
        self.last_heartbeat[node_id] = self.clock()
        self.disconnected.pop(node_id, None)
        self.heard_since_start.add(node_id)

    def _session_alive(self, node_id: int) -> bool:
        """Whether the broker holds a session with this controller now: heard from since it started, unfenced,
        its heartbeat connection open, and within the session timeout."""
        return (node_id in self.heard_since_start and node_id in self.image.live_brokers
                and node_id not in self.disconnected
                and (self.clock() - self.last_heartbeat.get(node_id, 0.0)) * 1000
                <= self.config.broker_session_timeout_ms)

    def shorten_session(self, node_id: int, grace_s: float) -> None:
        """The broker's connection closed: unless it heartbeats again within `grace_s`, it is fenced then rather
        than a whole session later. A killed process's sockets close at once, so its leaderships move in well
        under a second; a paused or partitioned broker keeps its connection and gets the full session."""
        if node_id in self.last_heartbeat:
            self.disconnected[node_id] = (self.clock(), grace_s)

    def fence_gone(self, node_id: int, listener: str) -> None:
        """The broker's heartbeat connection closed and its listener refuses connections: fence it now, unless it
        came back meanwhile (a new connection heartbeated) or is fenced already."""
        closed = self.disconnected.get(node_id)
        if closed is not None and node_id in self.image.live_brokers:
            self._fence(node_id, f"its heartbeat connection closed {(self.clock() - closed[0]) * 1000:.0f} ms ago "
                                 f"and its listener {listener} refuses connections")

    def check_liveness(self) -> None:
        """Fence every unfenced broker whose last heartbeat is older than the session timeout, or whose heartbeat
        connection closed longer ago than its grace; the log line says which, with the real delays."""
        now = self.clock()
        session_s = self.config.broker_session_timeout_ms / 1000
        for node_id in sorted(self.image.live_brokers):
            silent_ms = (now - self.last_heartbeat[node_id]) * 1000
            closed = self.disconnected.get(node_id)
            if closed is not None and now - closed[0] >= closed[1]:
                self._fence(node_id, f"its heartbeat connection closed {(now - closed[0]) * 1000:.0f} ms ago and it "
                                     f"did not come back within the {closed[1] * 1000:.0f} ms grace; last heartbeat "
                                     f"{silent_ms:.0f} ms ago")
            elif now - self.last_heartbeat[node_id] > session_s:
                self._fence(node_id, f"no heartbeat for {silent_ms:.0f} ms (broker.session.timeout.ms "
                                     f"{self.config.broker_session_timeout_ms})")

    def _fence(self, node_id: int, why: str) -> None:
        """Fence a broker in one commit: out of every ISR, and each partition it led gets the first live ISR
        member (assignment order) as leader; else, where unclean election is allowed, the first live replica
        with ISR = [it]; else no leader (-1), the ISR kept so that its last member is elected when it returns."""
        live = set(self.image.live_brokers) - {node_id}
        records: list[Any] = [BrokerFenceRecord(node_id, self.image.brokers[node_id].broker_epoch, True)]
        for topic, state in self.image.partitions():
            if state.leader == node_id:
                isr = tuple(r for r in state.isr if r != node_id)
                leader = next((r for r in state.replicas if r in isr and r in live), -1)
                if leader == -1 and self._unclean_allowed(topic):
                    leader = next((r for r in state.replicas if r in live), -1)
                    isr = (leader,)
                if leader == -1:  # nobody to elect: the ISR keeps its last member, elected when it returns
                    isr = state.isr
                records.append(self._elect(topic, state, leader, isr, why))
            elif state.leader != -1 and node_id in state.isr:
                records.append(self._change_isr(topic, state, tuple(r for r in state.isr if r != node_id),
                                                f"broker {node_id} fenced"))
        log.info("fencing broker %d (%s)", node_id, why)
        events.emit("fence", broker=node_id, why=why)
        self._commit(records)

    def _rejoin(self, node_id: int, why: str) -> list[PartitionChangeRecord]:
        """The elections a broker coming back (registered, or unfenced) wins: a new leader epoch where it leads
        (KIP-101), leadership where there is no leader and it is in the ISR, or a replica with unclean election
        allowed (ISR = [it])."""
        records = []
        for topic, state in self.image.partitions():
            if state.leader == node_id or (state.leader == -1 and node_id in state.isr):
                isr = state.isr
            elif state.leader == -1 and node_id in state.replicas and self._unclean_allowed(topic):
                isr = (node_id,)
            else:
                continue
            records.append(self._elect(topic, state, node_id, isr, why))
        return records

    def _unclean_allowed(self, topic: TopicState) -> bool:
        return topic_config(self.config, topic.configs)["unclean.leader.election.enable"]

    @staticmethod
    def _elect(topic: TopicState, state: PartitionState, leader: int, isr: tuple[int, ...],
               why: str) -> PartitionChangeRecord:
        """A leadership change (or a returning leader's new epoch): both epochs go up."""
        log.info("%s-%d: leader %d -> %d in leader epoch %d, ISR %s (%s)", topic.name, state.partition,
                 state.leader, leader, state.leader_epoch + 1, list(isr), why)
        events.emit("leader", topic=topic.name, partition=state.partition, leader=leader,
                    epoch=state.leader_epoch + 1, isr=isr, why=why)
        return PartitionChangeRecord(state.topic_id, state.partition, leader, state.leader_epoch + 1,
                                     state.partition_epoch + 1, isr)

    @staticmethod
    def _change_isr(topic: TopicState, state: PartitionState, isr: tuple[int, ...], why: str
                    ) -> PartitionChangeRecord:
        """An ISR-only change: same leader and leader epoch, a new partition epoch."""
        log.info("%s-%d: ISR %s -> %s in leader epoch %d (%s)", topic.name, state.partition, list(state.isr),
                 list(isr), state.leader_epoch, why)
        events.emit("isr", topic=topic.name, partition=state.partition, leader=state.leader,
                    epoch=state.leader_epoch, isr=isr, why=why)
        return PartitionChangeRecord(state.topic_id, state.partition, state.leader, state.leader_epoch,
                                     state.partition_epoch + 1, isr)

    # -- partitions ---------------------------------------------------------------------------------

    def alter_partition(self, node_id: int, broker_epoch: int, topic_id: bytes, partition: int,
                        leader_epoch: int, partition_epoch: int, new_isr: tuple[int, ...]
                        ) -> PartitionChangeResult:
        """A leader's ISR change (AlterPartition), checked against the partition's current state; the answer is
        the state after it. Adding a fenced or unregistered broker is refused (KIP-320: a replica the controller
        took out is not let back in by a leader that has not heard)."""
        error = self.check_broker_epoch(node_id, broker_epoch)
        if error != ErrorCode.NONE:
            return PartitionChangeResult(error)
        if (found := self._partition_of(self.image.topics_by_id.get(topic_id), partition)) is None:
            return PartitionChangeResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        topic, state = found
        if state.leader != node_id:
            return PartitionChangeResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if leader_epoch != state.leader_epoch:
            return PartitionChangeResult(ErrorCode.FENCED_LEADER_EPOCH)
        if partition_epoch != state.partition_epoch:
            return PartitionChangeResult(ErrorCode.INVALID_UPDATE_VERSION)
        isr = tuple(new_isr)
        if node_id not in isr or len(set(isr)) != len(isr) or not set(isr) <= set(state.replicas):
            return PartitionChangeResult(ErrorCode.INVALID_REQUEST)
        if any(r not in self.image.live_brokers for r in set(isr) - set(state.isr)):
            return PartitionChangeResult(ErrorCode.INELIGIBLE_REPLICA)
        if set(isr) != set(state.isr):  # _change_isr logs it
            self._commit([self._change_isr(topic, state, isr, f"AlterPartition from broker {node_id}")])
            if (completed := self._complete_reassignment(topic, state)) is not None:
                self._commit([completed])
        return PartitionChangeResult(ErrorCode.NONE, state.leader, state.leader_epoch, state.partition_epoch,
                                     state.isr)

    # -- reassignments (KIP-455) ---------------------------------------------------------------------

    def alter_partition_reassignments(self, wanted: list[tuple[str, int, tuple[int, ...] | None]]
                                      ) -> list[tuple[str, int, ErrorCode, str | None]]:
        """Start (target replicas) or cancel (None) reassignments; (topic, partition, error, message) each.

        Kafka's way: the replica set becomes target + the current replicas not in it, with `adding` (target -
        current) and `removing` (current - target); the new replicas follow the leader and join the ISR; once the
        whole target is in the ISR the set becomes the target, the ISR loses the removed replicas, and a removed
        leader hands over to the first target replica in the ISR. Every replica-set change bumps the leader
        epoch, so the leader starts tracking (or stops tracking) the replicas in a new epoch. Cancelling goes back
        to the replicas before the reassignment."""
        results: list[tuple[str, int, ErrorCode, str | None]] = []
        for name, index, target in wanted:
            if (found := self._partition_of(self.image.topics_by_name.get(name), index)) is None:
                results.append((name, index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{name}-{index} does not exist"))
                continue
            topic, state = found
            original = tuple(r for r in state.replicas if r not in state.adding_replicas)
            if target is None:
                if not state.adding_replicas and not state.removing_replicas:
                    results.append((name, index, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None))
                    continue
                target, why = original, "reassignment cancelled"
            else:
                why = f"reassignment to {list(target)}"
            if not target or len(set(target)) != len(target) or not set(target) <= set(self.image.brokers):
                results.append((name, index, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                f"{list(target)}: replicas must be distinct registered brokers"))
                continue
            adding = tuple(r for r in target if r not in original)
            removing = tuple(r for r in original if r not in target)
            merged = (*target, *removing)  # the ISR (within the replicas before) stays as it is until completion
            log.info("%s-%d: replicas %s -> %s (adding %s, removing %s; %s)", name, index, list(state.replicas),
                     list(merged), list(adding), list(removing), why)
            self._commit([PartitionChangeRecord(state.topic_id, index, state.leader, state.leader_epoch + 1,
                                                state.partition_epoch + 1, state.isr, merged, adding,
                                                removing)])
            if (completed := self._complete_reassignment(topic, state)) is not None:
                self._commit([completed])
            results.append((name, index, ErrorCode.NONE, None))
        return results

    def _complete_reassignment(self, topic: TopicState, state: PartitionState) -> PartitionChangeRecord | None:
        """The record that ends a reassignment whose target replicas are all in the ISR (None otherwise)."""
        if not state.adding_replicas and not state.removing_replicas:
            return None
        target = state.target_replicas
        if not set(target) <= set(state.isr):
            return None
        isr = tuple(r for r in state.isr if r in target)
        live = set(self.image.live_brokers)
        leader = state.leader if state.leader in target else next((r for r in target if r in isr and r in live), -1)
        log.info("%s-%d: reassignment done: replicas %s, ISR %s, leader %d", topic.name, state.partition,
                 list(target), list(isr), leader)
        return PartitionChangeRecord(state.topic_id, state.partition, leader, state.leader_epoch + 1,
                                     state.partition_epoch + 1, isr, target, (), ())

    def list_partition_reassignments(self, wanted: list[tuple[str, int]] | None
                                     ) -> list[tuple[str, int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
        """(topic, partition, replicas, adding, removing) of every reassignment in progress (among `wanted`)."""
        asked = None if wanted is None else set(wanted)
        return [(topic.name, state.partition, state.replicas, state.adding_replicas, state.removing_replicas)
                for topic, state in self.image.partitions()
                if (state.adding_replicas or state.removing_replicas)
                and (asked is None or (topic.name, state.partition) in asked)]

    def unregister_broker(self, node_id: int) -> tuple[ErrorCode, str | None]:
        """Remove a broker gone for good from the cluster. A live one is refused (stop it first: it would
        register again); its replicas stay in their replica sets until reassigned."""
        registered = self.image.brokers.get(node_id)
        if registered is None:
            return ErrorCode.BROKER_ID_NOT_REGISTERED, f"broker {node_id} is not registered"
        if node_id in self.image.live_brokers:
            return ErrorCode.INVALID_REQUEST, f"broker {node_id} is alive: stop it before removing it"
        self._commit([UnregisterBrokerRecord(node_id, registered.broker_epoch)])
        self.last_heartbeat.pop(node_id, None)
        self.disconnected.pop(node_id, None)
        log.info("broker %d unregistered", node_id)
        return ErrorCode.NONE, None

    def elect_leaders(self, partitions: list[tuple[str, int]] | None, unclean: bool, target_leader: int
                      ) -> list[tuple[str, int, ErrorCode, str | None]]:
        """Forced elections (ElectLeaders; None: every partition), one commit; (topic, partition, error,
        message) per distinct partition asked.

        Clean: the new leader is a live ISR member and the ISR is kept. Unclean: any live replica, and the ISR
        becomes [it]. `target_leader` -1 picks the next eligible replica after the current leader in assignment
        order (the first one when there is no leader), so repeated elections rotate. ELECTION_NOT_NEEDED when
        the current leader is the only choice (or the target); ELIGIBLE_LEADERS_NOT_AVAILABLE when the target,
        or every replica, is not eligible."""
        if partitions is None:
            partitions = [(topic.name, state.partition) for topic, state in self.image.partitions()]
        live = set(self.image.live_brokers)
        results: list[tuple[str, int, ErrorCode, str | None]] = []
        records: list[Any] = []
        for name, index in dict.fromkeys(partitions):  # each partition once: one change per partition per commit
            if (found := self._partition_of(self.image.topics_by_name.get(name), index)) is None:
                results.append((name, index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                f"partition {name}-{index} does not exist"))
                continue
            topic, state = found
            eligible = [r for r in state.replicas if r in live and (unclean or r in state.isr)]
            error, message, leader = self._choose_leader(state, eligible, target_leader)
            if error == ErrorCode.NONE:
                records.append(self._elect(topic, state, leader, (leader,) if unclean else state.isr,
                                           "unclean ElectLeaders" if unclean else "ElectLeaders"))
            results.append((name, index, error, message))
        if records:
            self._commit(records)
        return results

    @staticmethod
    def _partition_of(topic: TopicState | None, index: int) -> tuple[TopicState, PartitionState] | None:
        if topic is None or (state := topic.partitions.get(index)) is None:
            return None
        return topic, state

    @staticmethod
    def _choose_leader(state: PartitionState, eligible: list[int], target: int
                       ) -> tuple[ErrorCode, str | None, int]:
        """(error, message, new leader) of a forced election among `eligible` (in assignment order)."""
        if target != -1:
            if target not in eligible:
                return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, f"broker {target} is not eligible to lead", -1
            if target == state.leader:
                return ErrorCode.ELECTION_NOT_NEEDED, f"broker {target} already leads", -1
            return ErrorCode.NONE, None, target
        replicas = state.replicas
        after = replicas.index(state.leader) + 1 if state.leader in replicas else 0
        leader = next((r for r in replicas[after:] + replicas[:after] if r in eligible and r != state.leader), -1)
        if leader != -1:
            return ErrorCode.NONE, None, leader
        if state.leader in eligible:
            return ErrorCode.ELECTION_NOT_NEEDED, f"broker {state.leader} is the only eligible leader", -1
        return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "no live replica is eligible to lead", -1

    # -- topics -------------------------------------------------------------------------------------

    def create_topics(self, topics: list[NewTopic], validate_only: bool = False) -> list[TopicResult]:
        results = []
        records: list[Any] = []
        budget = _PartitionBudget(self._partition_count(), self.config.cluster_max_partitions)
        for request in topics:
            result, topic_records = self._plan_topic(request, budget)
            results.append(result)
            if not validate_only:
                records.extend(topic_records)
        if records:
            self._commit(records)
            for result in results:
                if result.error_code == ErrorCode.NONE:
                    log.info("created topic %s with %d partitions", result.name, result.num_partitions)
        return results

    def _partition_count(self) -> int:
        return sum(len(topic.partitions) for topic in self.image.topics_by_id.values())

    def _plan_topic(self, request: NewTopic, budget: _PartitionBudget) -> tuple[TopicResult, list[Any]]:
        result = TopicResult(request.name)

        def fail(code: ErrorCode, message: str) -> tuple[TopicResult, list[Any]]:
            result.error_code, result.error_message = code, message
            return result, []

        if (problem := topic_name_error(request.name)) is not None:
            return fail(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
        if request.name in self.image.topics_by_name:
            return fail(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {request.name!r} already exists")
        live = sorted(self.image.live_brokers)
        if request.assignments:
            if request.num_partitions != -1 or request.replication_factor != -1:
                return fail(ErrorCode.INVALID_REQUEST, "give either assignments or partitions and replication")
            if sorted(request.assignments) != list(range(len(request.assignments))):
                return fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "assignments must cover partitions 0..n-1")
            if (problem := budget.take(len(request.assignments))) is not None:
                return fail(ErrorCode.POLICY_VIOLATION, problem)
            assignment = [tuple(request.assignments[p]) for p in range(len(request.assignments))]
            if any(not r or len(set(r)) != len(r) or not set(r) <= set(live) for r in assignment):
                return fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "replicas must be distinct live brokers")
        else:
            partitions = self.config.num_partitions if request.num_partitions == -1 else request.num_partitions
            factor = (self.config.default_replication_factor if request.replication_factor == -1
                      else request.replication_factor)
            if partitions < 1:
                return fail(ErrorCode.INVALID_PARTITIONS, "number of partitions must be at least 1")
            if factor < 1 or factor > len(live):
                return fail(ErrorCode.INVALID_REPLICATION_FACTOR,
                            f"replication factor {factor} with {len(live)} live broker(s)")
            if (problem := budget.take(partitions)) is not None:  # before anything is allocated
                return fail(ErrorCode.POLICY_VIOLATION, problem)
            assignment = self._assign(partitions, factor, live, start=len(self.image.topics_by_id))
        if (problem := validate_topic_configs(request.configs)) is not None:
            return fail(ErrorCode.INVALID_CONFIG, problem)
        topic_id = uuid.uuid4().bytes
        records: list[Any] = [TopicRecord(request.name, topic_id, dict(request.configs))]
        records += [PartitionRecord(topic_id, p, replicas, replicas, replicas[0])
                    for p, replicas in enumerate(assignment)]
        result.topic_id = topic_id
        result.num_partitions = len(assignment)
        result.replication_factor = len(assignment[0])
        result.configs = dict(request.configs)
        return result, records

    @staticmethod
    def _assign(partitions: int, factor: int, live: list[int], start: int) -> list[tuple[int, ...]]:
        """Round-robin replicas over the live brokers, the first replica (the leader) rotating."""
        return [tuple(live[(start + p + i) % len(live)] for i in range(factor)) for p in range(partitions)]

    def _find_topic(self, name: str | None, topic_id: bytes | None) -> TopicState | None:
        if topic_id and topic_id != bytes(16):
            return self.image.topics_by_id.get(topic_id)
        return self.image.topics_by_name.get(name or "")

    def delete_topics(self, topics: list[tuple[str | None, bytes | None]]
                            ) -> list[tuple[str | None, bytes, ErrorCode]]:
        """Delete by name or id; returns (name, topic_id, error) per request entry."""
        results = []
        records = []
        for name, topic_id in topics:
            topic = self._find_topic(name, topic_id)
            if topic is None:
                missing = ErrorCode.UNKNOWN_TOPIC_ID if topic_id and topic_id != bytes(16) else (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                results.append((name, topic_id or bytes(16), missing))
                continue
            if RemoveTopicRecord(topic.topic_id) not in records:
                records.append(RemoveTopicRecord(topic.topic_id))
                log.info("deleting topic %s", topic.name)
            results.append((topic.name, topic.topic_id, ErrorCode.NONE))
        if records:
            self._commit(records)
        return results

    def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                                validate_only: bool) -> tuple[ErrorCode, str | None]:
        topic = self.image.topics_by_name.get(name)
        if topic is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
        current = len(topic.partitions)
        if count <= current:
            return ErrorCode.INVALID_PARTITIONS, f"topic has {current} partitions; {count} does not add any"
        budget = _PartitionBudget(self._partition_count(), self.config.cluster_max_partitions)
        if (problem := budget.take(count - current)) is not None:  # before anything is allocated
            return ErrorCode.POLICY_VIOLATION, problem
        live = sorted(self.image.live_brokers)
        factor = len(topic.partitions[0].replicas)
        if assignments is not None:
            if len(assignments) != count - current or any(
                len(set(r)) != len(r) or not r or not set(r) <= set(live) for r in assignments
            ):
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "one list of distinct live brokers per new partition"
            new = [tuple(r) for r in assignments]
        else:
            if factor > len(live):
                return ErrorCode.INVALID_REPLICATION_FACTOR, f"replication factor {factor} > live brokers"
            new = self._assign(count - current, factor, live, start=current)
        if not validate_only:
            self._commit([PartitionRecord(topic.topic_id, current + i, r, r, r[0]) for i, r in enumerate(new)])
            log.info("topic %s now has %d partitions", name, count)
        return ErrorCode.NONE, None

    def alter_topic_configs(self, name: str, changes: dict[str, str | None],
                            validate_only: bool) -> tuple[ErrorCode, str | None]:
        """Set (a value) or delete (None: back to the broker default) topic configs, as one TopicConfigRecord."""
        topic = self.image.topics_by_name.get(name)
        if topic is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
        if unknown := [key for key in changes if key not in TOPIC_CONFIGS]:
            return ErrorCode.INVALID_CONFIG, f"unknown or unsupported topic config {unknown[0]}"
        if (problem := validate_topic_configs({k: v for k, v in changes.items() if v is not None})) is not None:
            return ErrorCode.INVALID_CONFIG, problem
        configs = {k: v for k, v in {**topic.configs, **changes}.items() if v is not None}
        if not validate_only and configs != topic.configs:
            self._commit([TopicConfigRecord(topic.topic_id, configs)])
            log.info("topic %s configs now %s", name, configs)
        return ErrorCode.NONE, None

    # -- ACLs and SCRAM credentials ------------------------------------------------------------------

    def create_acls(self, bindings: list[AclBinding]) -> list[tuple[ErrorCode, str | None]]:
        """One result per binding; an existing binding is a success that writes nothing (ACLs are a set)."""
        results: list[tuple[ErrorCode, str | None]] = []
        created: dict[AclBinding, None] = {}
        for binding in bindings:
            if (problem := validate_binding(binding)) is not None:
                results.append((ErrorCode.INVALID_REQUEST, problem))
                continue
            if binding not in self.image.acls:
                created[binding] = None
            results.append((ErrorCode.NONE, None))
        if created:
            self._commit([AccessControlEntryRecord(binding.to_dict()) for binding in created])
            log.info("created %d ACL bindings", len(created))
        return results

    def delete_acls(self, filters: list[AclBindingFilter]) -> list[tuple[ErrorCode, str | None, list[AclBinding]]]:
        """One result per filter, with the bindings it matched (a binding two filters match is deleted once)."""
        results: list[tuple[ErrorCode, str | None, list[AclBinding]]] = []
        deleted: dict[AclBinding, None] = {}
        for binding_filter in filters:
            if (problem := validate_filter(binding_filter)) is not None:
                results.append((ErrorCode.INVALID_REQUEST, problem, []))
                continue
            matched = [binding for binding in self.image.acls if binding_filter.matches(binding)]
            deleted.update(dict.fromkeys(matched))
            results.append((ErrorCode.NONE, None, matched))
        if deleted:
            self._commit([RemoveAccessControlEntryRecord(binding.to_dict()) for binding in deleted])
            log.info("deleted %d ACL bindings", len(deleted))
        return results

    def alter_scram_credentials(self, deletions: list[tuple[str, str]],
                                upsertions: list[tuple[str, ScramCredential | str]]
                                ) -> dict[str, tuple[ErrorCode, str | None]]:
        """KIP-554: per user, NONE or why not. An upsertion is (user, credential), or (user, why it is not
        one) when the request's values could not make one. A user named twice for one mechanism, or a
        deletion of a credential that does not exist, fails that user; a user with any failure changes nothing."""
        results: dict[str, tuple[ErrorCode, str | None]] = {}
        seen: set[tuple[str, str]] = set()
        records: dict[str, list[Any]] = {}

        def fail(user: str, error: ErrorCode, message: str) -> None:
            results.setdefault(user, (error, message))

        for user, mechanism in deletions:
            if (user, mechanism) in seen:
                fail(user, ErrorCode.DUPLICATE_RESOURCE, f"a credential for {user} and {mechanism} appears twice")
            elif self.image.credentials.scram(user, mechanism) is None:
                fail(user, ErrorCode.RESOURCE_NOT_FOUND, f"no {mechanism} credential for user {user}")
            seen.add((user, mechanism))
            records.setdefault(user, []).append(RemoveUserScramCredentialRecord(user, mechanism))
        for user, credential in upsertions:
            if isinstance(credential, str):
                fail(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, credential)
                continue
            if (user, credential.mechanism) in seen:
                fail(user, ErrorCode.DUPLICATE_RESOURCE,
                     f"a credential for {user} and {credential.mechanism} appears twice")
            seen.add((user, credential.mechanism))
            records.setdefault(user, []).append(UserScramCredentialRecord(
                user, credential.mechanism, credential.salt, credential.stored_key, credential.server_key,
                credential.iterations))
        committed = [record for user, changes in records.items() if user not in results for record in changes]
        if committed:
            self._commit(committed)
            log.info("altered %d SCRAM credentials", len(committed))
        return {user: results.get(user, (ErrorCode.NONE, None)) for user in dict.fromkeys(
            [user for user, _ in deletions] + [user for user, _ in upsertions])}

    # -- producer ids -------------------------------------------------------------------------------

    def allocate_producer_ids(self, node_id: int) -> tuple[int, int]:
        """A block of never-used producer ids for a broker: (first id, count)."""
        start = self.image.next_producer_id
        self._commit([ProducerIdsRecord(node_id, start + PRODUCER_ID_BLOCK)])
        return start, PRODUCER_ID_BLOCK
