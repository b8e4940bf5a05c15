"""Topics, partitions and their leaders (Kafka's ReplicationControlManager): topic creation and deletion, new
partitions, ISR changes (AlterPartition), elections (fencing, returning brokers, ElectLeaders) and reassignments.

Rules:
- Topic names follow Kafka's Topic.validate; topic ids are random 16-byte UUIDs (uuid4), never reused.
- One request creates at most MAX_PARTITIONS_PER_REQUEST partitions (Kafka's QuorumController refuses more with
  POLICY_VIOLATION), and the cluster holds at most `cluster.max.partitions`; both checked before anything is
  allocated.
- Returning leaders (KIP-101): when a broker registers while it leads partitions, each of those partitions gets a
  new leader epoch (and partition epoch), so a leader that restarts without an election still starts a new
  epoch; the broker records the epoch's start offset before accepting produce. A broker that registers or is
  unfenced is also elected where the partition is leaderless and it is in the ISR (or, with unclean election
  allowed, a replica).
- A fenced broker leaves every ISR, and its leaderships move to the next live ISR member (or, with unclean
  election allowed, a live replica). A partition that has a leader has no fenced broker in its ISR; a leaderless
  one keeps its last ISR member (KRaft's rule), the replica to wait for.
- Every leader change bumps the leader epoch and the partition epoch, an ISR-only change the partition epoch;
  epochs never go down. A leader's ISR change may not add a fenced or unregistered broker (KIP-320).
- Reassignments (KIP-455) as Kafka does them: see `alter_partition_reassignments`; every replica-set change bumps
  the leader epoch.
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from epoch_broker.broker import events
from epoch_broker.broker.config import BrokerConfig, validate_topic_configs
from epoch_broker.broker.controller.cluster_control import ClusterControlManager
from epoch_broker.broker.controller.config_control import ConfigurationControlManager
from epoch_broker.broker.controller.controller_result import ControllerResult, ControllerSteps
from epoch_broker.broker.metadata.image import MetadataCache, PartitionState, TopicState
from epoch_broker.broker.metadata.records import PartitionChangeRecord, PartitionRecord, RemoveTopicRecord, TopicRecord
from epoch_broker.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

MAX_PARTITIONS_PER_REQUEST = 10_000
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")


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
class PartitionChangeResult:
    """AlterPartition's answer for one partition: the error, or the partition's state after the change."""

    error: ErrorCode = ErrorCode.NONE
    leader: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    isr: tuple[int, ...] = ()


class _PartitionBudget:
    """The partition limits of one request (see the module's rules)."""

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


class ReplicationControlManager:
    def __init__(self, config: BrokerConfig, image: MetadataCache, cluster: ClusterControlManager,
                 configs: ConfigurationControlManager) -> None:
        self.config = config
        self.image = image
        self.cluster = cluster
        self.configs = configs

    # -- brokers fenced and returning -----------------------------------------------------------------

    def fence_broker(self, node_id: int, why: str) -> list[Any]:
        """A broker's fencing, for one commit: out of every ISR, and each partition it led gets the first live ISR
        member (assignment order) as leader; else, where unclean election is allowed, the first live replica
        with ISR = [it]; else no leader (-1), the ISR kept so that its last member is elected when it returns."""
        live = set(self.image.live_brokers) - {node_id}
        records: list[Any] = [self.cluster.fence_record(node_id, True)]
        for topic, state in self.image.partitions():
            if state.leader == node_id:
                isr = tuple(r for r in state.isr if r != node_id)
                leader = next((r for r in state.replicas if r in isr and r in live), -1)
                if leader == -1 and self.configs.unclean_leader_election_enabled(topic):
                    leader = next((r for r in state.replicas if r in live), -1)
                    isr = (leader,)
                if leader == -1:  # nobody to elect: the ISR keeps its last member, elected when it returns
                    isr = state.isr
                records.append(self._elect(topic, state, leader, isr, why))
            elif state.leader != -1 and node_id in state.isr:
                records.append(self._change_isr(topic, state, tuple(r for r in state.isr if r != node_id),
                                                f"broker {node_id} fenced"))
        return records

    def unfence_broker(self, node_id: int) -> list[Any]:
        """A fenced broker's unfencing, for one commit, with the elections it wins."""
        return [self.cluster.fence_record(node_id, False), *self.rejoin(node_id, f"broker {node_id} unfenced")]

    def rejoin(self, node_id: int, why: str) -> list[PartitionChangeRecord]:
        """The elections a broker coming back (registered, or unfenced) wins: a new leader epoch where it leads
        (KIP-101), leadership where there is no leader and it is in the ISR, or a replica with unclean election
        allowed (ISR = [it])."""
        records = []
        for topic, state in self.image.partitions():
            if state.leader == node_id or (state.leader == -1 and node_id in state.isr):
                isr = state.isr
            elif (state.leader == -1 and node_id in state.replicas
                  and self.configs.unclean_leader_election_enabled(topic)):
                isr = (node_id,)
            else:
                continue
            records.append(self._elect(topic, state, node_id, isr, why))
        return records

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
                        ) -> ControllerSteps[PartitionChangeResult]:
        """A leader's ISR change (AlterPartition), checked against the partition's current state; the answer is
        the state after it (and after the reassignment it completes, a second commit)."""
        error = self.cluster.check_broker_epoch(node_id, broker_epoch)
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
            yield [self._change_isr(topic, state, isr, f"AlterPartition from broker {node_id}")]
            if (completed := self._complete_reassignment(topic, state)) is not None:
                yield [completed]
        # `state` is the image's: the commits above changed it
        return PartitionChangeResult(ErrorCode.NONE, state.leader, state.leader_epoch, state.partition_epoch,
                                     state.isr)

    # -- reassignments (KIP-455) ---------------------------------------------------------------------

    def alter_partition_reassignments(self, wanted: list[tuple[str, int, tuple[int, ...] | None]],
                                      allow_replication_factor_change: bool = True
                                      ) -> ControllerSteps[list[tuple[str, int, ErrorCode, str | None]]]:
        """Start (target replicas) or cancel (None) reassignments, one commit each; (topic, partition, error,
        message) each. A target of another size than the replicas before the reassignment is
        INVALID_REPLICATION_FACTOR unless `allow_replication_factor_change` (Kafka 4.1's request v1).

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
            if len(target) != len(original) and not allow_replication_factor_change:
                results.append((name, index, ErrorCode.INVALID_REPLICATION_FACTOR,
                                f"{name}-{index}: the replication factor would change from {len(original)} to "
                                f"{len(target)}, which the request does not allow"))
                continue
            adding = tuple(r for r in target if r not in original)
            removing = tuple(r for r in original if r not in target)
            merged = (*target, *removing)  # the ISR (within the replicas before) stays as it is until completion
            log.info("%s-%d: replicas %s -> %s (adding %s, removing %s; %s)", name, index, list(state.replicas),
                     list(merged), list(adding), list(removing), why)
            yield [PartitionChangeRecord(state.topic_id, index, state.leader, state.leader_epoch + 1,
                                         state.partition_epoch + 1, state.isr, merged, adding, removing)]
            if (completed := self._complete_reassignment(topic, state)) is not None:
                yield [completed]
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

    # -- forced elections ---------------------------------------------------------------------------

    def elect_leaders(self, partitions: list[tuple[str, int]] | None, unclean: bool, target_leader: int
                      ) -> ControllerResult[list[tuple[str, int, ErrorCode, str | None]]]:
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
        return ControllerResult(records, results)

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

    def create_topics(self, topics: list[NewTopic], validate_only: bool) -> ControllerResult[list[TopicResult]]:
        results = []
        records: list[Any] = []
        budget = _PartitionBudget(self._partition_count(), self.config.cluster_max_partitions)
        for request in topics:
            result, topic_records = self._plan_topic(request, budget)
            results.append(result)
            if not validate_only:
                records.extend(topic_records)
        created = [f"created topic {result.name} with {result.num_partitions} partitions" for result in results
                   if result.error_code == ErrorCode.NONE] if records else []
        return ControllerResult(records, results, tuple(created))

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
        if (problem := validate_topic_configs(self.config, request.configs)) is not None:
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
                      ) -> ControllerResult[list[tuple[str | None, bytes, ErrorCode]]]:
        """Delete by name or id; the answer is (name, topic_id, error) per request entry."""
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
        return ControllerResult(records, results)

    def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                          validate_only: bool) -> ControllerResult[tuple[ErrorCode, str | None]]:
        def fail(error: ErrorCode, message: str) -> ControllerResult[tuple[ErrorCode, str | None]]:
            return ControllerResult([], (error, message))

        topic = self.image.topics_by_name.get(name)
        if topic is None:
            return fail(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        current = len(topic.partitions)
        if count <= current:
            return fail(ErrorCode.INVALID_PARTITIONS, f"topic has {current} partitions; {count} does not add any")
        budget = _PartitionBudget(self._partition_count(), self.config.cluster_max_partitions)
        if (problem := budget.take(count - current)) is not None:  # before anything is allocated
            return fail(ErrorCode.POLICY_VIOLATION, problem)
        live = sorted(self.image.live_brokers)
        factor = len(topic.partitions[0].replicas)
        if assignments is not None:
            if len(assignments) != count - current or any(
                len(set(r)) != len(r) or not r or not set(r) <= set(live) for r in assignments
            ):
                return fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "one list of distinct live brokers per new partition")
            new = [tuple(r) for r in assignments]
        else:
            if factor > len(live):
                return fail(ErrorCode.INVALID_REPLICATION_FACTOR, f"replication factor {factor} > live brokers")
            new = self._assign(count - current, factor, live, start=current)
        if validate_only:
            return ControllerResult([], (ErrorCode.NONE, None))
        return ControllerResult([PartitionRecord(topic.topic_id, current + i, r, r, r[0]) for i, r in enumerate(new)],
                                (ErrorCode.NONE, None), (f"topic {name} now has {count} partitions",))
