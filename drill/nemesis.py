"""The nemesis of a drill: which faults exist, the seeded schedule of them, and applying it to a cluster.

A schedule is a list of faults, each at a time after the start of the fault phase, on a target, for a duration:
`[{"at_s": 3.2, "fault": "kill", "target": "broker-1", "duration_s": 2.5}, ...]`, saved as `schedule.json` in
the report directory with the seed and scenario that made it.

Rules:
- The schedule is a pure function of (scenario's faults, seed, duration, the cluster's process names): the same
  seed gives the same schedule on every run, printed before anything is applied; `--replay` loads one.
- Faults never overlap: the next starts after the previous has healed plus a gap, so every fault's effect
  (a new leader, an ISR change) is seen by itself in the timeline.
- A target named `leader:<partition>` (or `txn-coordinator`, `group-coordinator`) is resolved when the fault is
  applied (the schedule cannot know who will lead then); the resolved process is recorded with the fault.
- Faults on the drill's consumer group (target `group`: a member joining, leaving, the static one restarting)
  act on the workload's members (drill/workload.py's ConsumerGroup), not on a process of the cluster; which
  member is recorded with the fault. A drill without a consumer group records them as not applied.
- Faults on the share-group drill's share group (target `share-group`: a member crashing, a member stalling)
  act on the workload's member processes (drill/share_workload.py's ShareGroup); which member is recorded with
  the fault. A drill without a share group records them as not applied.
- Faults on the spark-pipeline drill's Spark job (target `spark-driver`, `spark-executor`) act on its driver
  process (drill/pipeline.py's Pipeline), not on the cluster; the executor's pid is recorded with the fault. A
  drill without a pipeline records them as not applied.
- Every start and end is a `fault` event in the history (client "nemesis"), with its wall-clock time: the
  report's timeline and the checker read them from there.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from epoch_broker.broker.faults import (
    CLIENT_PEER_PREFIX,
    CLOCK_OFFSET,
    CONTROLLER_PEER,
    DISK_FSYNC_FAILING,
    DISK_FULL,
    HIGH_WATERMARK_HELD,
    METADATA_PAUSED,
    NETWORK_DELAY,
    NETWORK_PARTITION,
    POWER_LOSS,
    REPLICATION_PAUSED,
)
from epoch_broker.drill import admin
from epoch_broker.drill.history import HistoryWriter
from epoch_broker.drill.pipeline import Pipeline
from epoch_broker.drill.share_workload import LOCK_DURATION_MS, SHARE_GROUP_ID, ShareGroup
from epoch_broker.drill.targets import Target, name_of, node
from epoch_broker.drill.workload import (
    GROUP_ID,
    PRODUCER_CLIENT_ID,
    STATIC_MEMBER,
    TRANSACTIONAL_ID,
    ConsumerGroup,
)

SLOW_LINK_MS = 300
LAGGING_LEADER_S = 1.5  # how long a lagging-leader leads with its high watermark held, before it is released
HELD_BEFORE_RESTART_S = 1.0  # kip101-restart: records acknowledged above the follower's high watermark meanwhile
UNREPLICATED_S = 0.5  # kip101-divergence: records only the leader has (below replica.lag.time.max.ms: no shrink)
CLOCK_SKEW_MS = 3_600_000  # clock-skew: an hour ahead (time-based rolling and retention see the future)
TXN_COORDINATOR = "txn-coordinator"  # the target of a txn fault: whoever coordinates TRANSACTIONAL_ID then
GROUP_COORDINATOR = "group-coordinator"  # whoever coordinates the consumer group GROUP_ID then
GROUP = "group"  # the target of a member fault: the drill's consumer group
SHARE_GROUP = "share-group"  # the target of a share member fault: the drill's share group
SPARK_DRIVER = "spark-driver"  # the spark-pipeline drill's driver process
SPARK_EXECUTOR = "spark-executor"  # one of its executor JVMs
STATE_TIMEOUT_S = 30.0  # a composite fault's wait for the cluster to reach its next step


@dataclass(frozen=True)
class FaultKind:
    description: str
    # "broker", "controller", or resolved when applied: "leader" / "follower" (of a partition), "txn-coordinator",
    # "group-coordinator", "group" (a member of the drill's consumer group), "spark-driver", "spark-executor"
    targets: str
    durations: tuple[float, float]  # how long it lasts (before it is healed), drawn from this range


FAULTS: dict[str, FaultKind] = {
    "kill": FaultKind("SIGKILL a broker, start it again after the duration", "broker", (1.0, 4.0)),
    "leader-kill": FaultKind("SIGKILL the leader of a partition, start it again after the duration", "leader",
                             (1.0, 4.0)),
    "pause": FaultKind("SIGSTOP a broker past the session timeout, SIGCONT after the duration", "broker",
                       (2.0, 5.0)),
    "restart": FaultKind("restart a broker cleanly (SIGTERM, start)", "broker", (0.0, 0.0)),
    "txn-coordinator-kill": FaultKind("SIGKILL the transaction coordinator of the drill's transactional producer "
                                      "(mid-transaction: it is always in one), start it again after the duration",
                                      "txn-coordinator", (1.0, 4.0)),
    "controller-kill": FaultKind("SIGKILL the controller, start it again after the duration", "controller",
                                 (1.0, 4.0)),
    "controller-pause": FaultKind("SIGSTOP the controller, SIGCONT after the duration", "controller", (1.0, 4.0)),
    "power-loss": FaultKind(f"set {POWER_LOSS} on a broker: it exits at once, losing what it had not synced; "
                            "start it again after the duration", "broker", (1.0, 3.0)),
    "unclean-election": FaultKind(f"a follower of a partition stops replicating ({REPLICATION_PAUSED}) while the "
                                  "leader takes writes alone; when the duration is up it is elected uncleanly, "
                                  "truncating what only the leader had", "leader", (3.5, 5.0)),
    "follower-pause": FaultKind("SIGSTOP a follower of a partition past the session timeout (a zombie: fenced, "
                                "out of the ISR), SIGCONT after the duration; it must catch up before it is let "
                                "back in (KIP-320)", "follower", (2.5, 5.0)),
    "lagging-leader": FaultKind(f"set {HIGH_WATERMARK_HELD} on a follower of a partition (its high watermark "
                                "stops while it replicates), then elect it cleanly at the end of the duration: "
                                "a new leader whose high watermark lags its log end (KIP-207)", "follower",
                                (2.0, 4.0)),
    "isolated-leader": FaultKind(f"{NETWORK_PARTITION}: a partition's leader cut off from every other broker and "
                                 "the controller, both ways (it is fenced and a new leader is elected while it "
                                 "still believes it leads), healed after the duration", "leader", (3.0, 5.0)),
    "controller-partition": FaultKind(f"{NETWORK_PARTITION}: a broker cut off from the controller (it is fenced, "
                                      "its leaderships move), healed after the duration", "broker", (2.5, 4.0)),
    "one-way-partition": FaultKind(f"{NETWORK_PARTITION}: a partition's leader refuses one follower's fetches "
                                   "(asymmetric), healed after the duration", "leader", (2.5, 4.0)),
    "client-partition": FaultKind(f"{NETWORK_PARTITION}: a partition's leader refuses the drill's producer "
                                  f"(client:{PRODUCER_CLIENT_ID}), healed after the duration", "leader", (1.5, 3.0)),
    "slow-link": FaultKind(f"{NETWORK_DELAY}: a follower's link to its leader slowed by 300 ms a request (it falls "
                           "behind while records flow, maybe out of the ISR), restored after the duration",
                           "follower", (3.0, 5.0)),
    "disk-full": FaultKind(f"{DISK_FULL} on a partition's leader: every log write fails with ENOSPC (produces get "
                           "KAFKA_STORAGE_ERROR and are retried), cleared after the duration", "leader", (1.5, 3.0)),
    "fsync-failing": FaultKind(f"{DISK_FSYNC_FAILING} on a follower of a partition: a log that meets it goes "
                               "offline; cleared and the broker restarted after the duration", "follower",
                               (2.0, 3.5)),
    "kip101-restart": FaultKind(f"KIP-101 scenario 1: with {HIGH_WATERMARK_HELD} on a partition's leader (its "
                                "follower's high watermark falls behind the records acknowledged), the follower is "
                                "SIGKILLed and started, and once back in the ISR the leader is SIGKILLed: the "
                                "follower leads with acknowledged records above its own high watermark, which it "
                                "must keep; the old leader starts again after the duration", "leader", (2.0, 4.0)),
    "kip101-divergence": FaultKind("KIP-101 scenario 2: a partition's follower stops replicating for a moment, "
                                   "then the leader and, once elected, its successor lose power; the successor "
                                   "starts first and leads again, taking new records at the offsets the old "
                                   "leader's unreplicated tail holds; the old leader starts after the duration and "
                                   "must truncate that tail by leader epoch", "leader", (2.0, 4.0)),
    "stale-leader": FaultKind(f"{METADATA_PAUSED} on a partition's leader, then a clean election of a follower: "
                              "for the duration the old leader still believes it leads in the old epoch (as one "
                              "cut off from the controller); what it takes is never committed", "leader",
                              (3.0, 5.0)),
    "clock-skew": FaultKind(f"{CLOCK_OFFSET}: a broker's wall clock an hour ahead (record times, time-based rolling "
                            "and retention), set back after the duration", "broker", (3.0, 6.0)),
    "replication-paused": FaultKind(f"set {REPLICATION_PAUSED} on a broker (it stops fetching: the leaders drop "
                                    "it from their ISRs), clear it after the duration", "broker", (3.0, 6.0)),
    "group-coordinator-kill": FaultKind(f"SIGKILL the coordinator of the drill's consumer group ({GROUP_ID}: the "
                                        "leader of its __consumer_offsets partition, found with FindCoordinator), "
                                        "start it again after the duration; the next leader of that partition "
                                        "loads the group and its members carry on", "group-coordinator",
                                        (1.0, 4.0)),
    "member-join": FaultKind("a new member joins the drill's consumer group (a confluent-kafka consumer subscribed "
                             "to the topic): partitions move to it; it leaves cleanly after the duration", GROUP,
                             (3.0, 6.0)),
    "member-leave": FaultKind("the longest-running dynamic member of the drill's consumer group leaves cleanly "
                              "(close: on_revoke, its last commit, then LeaveGroup, or ConsumerGroupHeartbeat with "
                              "member epoch -1): its partitions move to the others; a new member joins after the "
                              "duration", GROUP, (2.0, 4.0)),
    "static-restart": FaultKind("the static member of the drill's consumer group (group.instance.id) closes, and a "
                                "new instance with the same id starts after the duration, well within its session "
                                "timeout: it gets its partitions back without them moving to another member "
                                "(KIP-345; with the consumer protocol, KIP-848's member epoch -2)", GROUP,
                                (0.5, 2.0)),
    "share-member-crash": FaultKind("SIGKILL the longest-running member of the drill's share group "
                                    f"({SHARE_GROUP_ID}) mid-batch, holding records it acquired and never "
                                    "acknowledged (the broker releases them when its connection drops); a "
                                    "replacement member starts after the duration", SHARE_GROUP, (1.0, 3.0)),
    "share-member-stall": FaultKind("SIGSTOP the longest-running member of the drill's share group past its "
                                    f"records' acquisition locks ({LOCK_DURATION_MS} ms), its connection open: "
                                    "their locks expire and other members get them; SIGCONT after the duration, "
                                    "when its acknowledgements of them fail", SHARE_GROUP, (4.0, 6.0)),
    "driver-kill": FaultKind("SIGKILL the spark-pipeline drill's Spark driver with everything it started (its JVM, "
                             "the executors, their Python workers) mid-query; after the duration it starts again "
                             "from its checkpoint (the same query id: micro-batches it had not finished run again), "
                             "healed once its query completed a micro-batch",
                             SPARK_DRIVER, (2.0, 4.0)),
    "executor-kill": FaultKind("SIGKILL one executor JVM of the spark-pipeline drill's Spark job: its tasks fail and "
                               "run again on the new executor Spark's worker starts (awaited when the duration is "
                               "up)", SPARK_EXECUTOR, (1.0, 2.0)),
}


@dataclass(frozen=True)
class ScheduledFault:
    at_s: float  # after the start of the fault phase
    fault: str
    target: str
    duration_s: float


def make_schedule(faults: list[str], seed: int, duration_s: float, brokers: list[str], partitions: int,
                  gap_s: tuple[float, float] = (1.0, 3.0)) -> list[ScheduledFault]:
    """Faults drawn from `faults` until `duration_s`, each followed by a gap; the same arguments, the same list."""
    rng = random.Random(seed)
    schedule: list[ScheduledFault] = []
    at = rng.uniform(*gap_s)
    while True:
        name = rng.choice(faults)
        kind = FAULTS[name]
        length = round(rng.uniform(*kind.durations), 2)
        if at + length > duration_s:
            return schedule
        target = {"broker": lambda: rng.choice(brokers), "controller": lambda: "controller",
                  "txn-coordinator": lambda: TXN_COORDINATOR, "group-coordinator": lambda: GROUP_COORDINATOR,
                  GROUP: lambda: GROUP, SHARE_GROUP: lambda: SHARE_GROUP, SPARK_DRIVER: lambda: SPARK_DRIVER,
                  SPARK_EXECUTOR: lambda: SPARK_EXECUTOR,
                  "leader": lambda: f"leader:{rng.randrange(partitions)}",
                  "follower": lambda: f"follower:{rng.randrange(partitions)}"}[kind.targets]()
        schedule.append(ScheduledFault(round(at, 2), name, target, length))
        at += length + rng.uniform(*gap_s)


def save_schedule(path: Path, schedule: list[ScheduledFault], **about: Any) -> None:
    path.write_text(json.dumps({**about, "faults": [asdict(f) for f in schedule]}, indent=2) + "\n")


def load_schedule(path: Path) -> tuple[dict[str, Any], list[ScheduledFault]]:
    """(what made it: scenario, seed, duration), the faults; a clear error for a file that is not a schedule."""
    try:
        document = json.loads(path.read_text())
        return ({k: v for k, v in document.items() if k != "faults"},
                [ScheduledFault(**fault) for fault in document["faults"]])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} is not a drill schedule: {exc}") from exc


class Nemesis:
    """Applies a schedule to a cluster (drill/targets.py): `start(fault)` now, and `heal(...)` when its time is up."""

    def __init__(self, cluster: Target, topic: str, history: HistoryWriter, group: ConsumerGroup | None = None,
                 pipeline: Pipeline | None = None, share_group: ShareGroup | None = None) -> None:
        self.cluster = cluster
        self.topic = topic
        self.history = history
        self.group = group  # the workload's consumer group, which the member faults act on
        self.pipeline = pipeline  # the spark-pipeline drill's Spark job, which driver and executor faults act on
        self.share_group = share_group  # the share-group drill's members, which share member faults act on
        self.applied = 0

    def start(self, fault: ScheduledFault) -> Callable[[], None]:
        """Apply `fault`; returns what heals it. A fault that cannot be applied (its target is not running, a
        partition has no leader) is recorded as such and skipped: the drill goes on."""
        try:
            return self._start(fault)
        except (OSError, RuntimeError, KeyError, admin.AdminError) as exc:
            self.history.record("fault", fault=fault.fault, target=fault.target, phase="end",
                                detail=f"not applied: {exc}")
            return lambda: None

    def _start(self, fault: ScheduledFault) -> Callable[[], None]:
        if fault.fault == "unclean-election":
            return self._unclean_election(fault)
        if fault.fault == "lagging-leader":
            return self._lagging_leader(fault)
        if fault.fault == "kip101-restart":
            return self._kip101_restart(fault)
        if fault.fault == "kip101-divergence":
            return self._kip101_divergence(fault)
        if FAULTS[fault.fault].targets == GROUP:
            return self._member_fault(fault)
        if FAULTS[fault.fault].targets == SHARE_GROUP:
            return self._share_member_fault(fault)
        if FAULTS[fault.fault].targets in (SPARK_DRIVER, SPARK_EXECUTOR):
            return self._pipeline_fault(fault)
        target = self._resolve(fault.target)
        # a fault on a partition's leader or follower names the partition: the report measures its failover
        about = {"partition": int(fault.target.partition(":")[2])} if ":" in fault.target else {}
        self.history.record("fault", fault=fault.fault, target=target, phase="start",
                            detail=FAULTS[fault.fault].description, **about)
        self.applied += 1
        heal: Callable[[], None]
        if fault.fault in ("kill", "leader-kill", "controller-kill", "txn-coordinator-kill", "group-coordinator-kill"):
            self.cluster.kill(target)
            heal = lambda: self.cluster.restart(target)  # noqa: E731 - a one-line heal beside its fault
        elif fault.fault in ("pause", "controller-pause", "follower-pause"):
            self.cluster.pause(target)
            heal = lambda: self.cluster.resume(target)  # noqa: E731
        elif fault.fault == "restart":
            self.cluster.restart(target)
            heal = lambda: None  # noqa: E731 - done when it is ready again
        elif fault.fault == "power-loss":
            self._lose_power(target)
            heal = lambda: self.cluster.restart(target)  # noqa: E731
        elif fault.fault in ("isolated-leader", "controller-partition", "one-way-partition", "client-partition"):
            cuts = self._cuts(fault.fault, target, about.get("partition"))
            for name, peers in cuts.items():
                self._hook(name, {NETWORK_PARTITION: ",".join(peers)}, [])

            def heal() -> None:
                for name in cuts:
                    self._hook(name, {}, [NETWORK_PARTITION])
        elif fault.fault == "slow-link":  # its target is always follower:<partition>
            leader = self._state(about["partition"]).leader
            self._hook(target, {NETWORK_DELAY: f"{leader}={SLOW_LINK_MS}"}, [])
            heal = lambda: self._hook(target, {}, [NETWORK_DELAY])  # noqa: E731
        elif fault.fault == "disk-full":
            self._hook(target, {DISK_FULL: "true"}, [])
            heal = lambda: self._hook(target, {}, [DISK_FULL])  # noqa: E731
        elif fault.fault == "fsync-failing":
            self._hook(target, {DISK_FSYNC_FAILING: "true"}, [])

            def heal() -> None:  # an offline log stays offline until the process starts again, as in Kafka
                self._hook(target, {}, [DISK_FSYNC_FAILING])
                self.cluster.restart(target)
        elif fault.fault == "replication-paused":
            self._hook(target, {REPLICATION_PAUSED: "true"}, [])
            heal = lambda: self._hook(target, {}, [REPLICATION_PAUSED])  # noqa: E731
        elif fault.fault == "clock-skew":
            self._hook(target, {CLOCK_OFFSET: str(CLOCK_SKEW_MS)}, [])
            heal = lambda: self._hook(target, {}, [CLOCK_OFFSET])  # noqa: E731
        elif fault.fault == "stale-leader":  # its target is always leader:<partition>
            partition = about["partition"]
            _, successor = self._in_sync(partition, node(self.cluster, target).node_id)
            self._hook(target, {METADATA_PAUSED: "true"}, [])
            try:
                outcome = asyncio.run(admin.elect(self.cluster.controller().address, self.topic, partition,
                                                  successor))
                self._wait_state(partition, lambda s: s.leader == successor,
                                 f"{name_of(self.cluster, successor)} leading {self.topic}-{partition} ({outcome})")
            except BaseException:
                self._hook(target, {}, [METADATA_PAUSED])  # not left stale when the election did not happen
                raise
            heal = lambda: self._hook(target, {}, [METADATA_PAUSED])  # noqa: E731
        else:
            raise ValueError(f"unknown fault {fault.fault!r} (known: {', '.join(FAULTS)})")

        def healed() -> None:
            heal()
            self.history.record("fault", fault=fault.fault, target=target, phase="end", detail="healed")

        return healed

    def _member_fault(self, fault: ScheduledFault) -> Callable[[], None]:
        """A member of the consumer group joins, leaves or restarts now; the reverse when the duration is up."""
        group = self.group
        if group is None:
            raise RuntimeError(f"the drill has no consumer group for {fault.fault}")
        act: Callable[[], object]
        heal: Callable[[], object]
        if fault.fault == "member-join":
            name = group.next_name()
            act, heal, after = group.join, lambda: group.leave(name), f"{name} left"
        elif fault.fault == "member-leave":
            name = group.oldest()
            act, heal, after = lambda: group.leave(name), group.join, f"{group.next_name()} joined"
        elif fault.fault == "static-restart":
            name = STATIC_MEMBER
            act, heal, after = group.stop_static, group.start_static, f"a new instance of {name} started"
        else:
            raise ValueError(f"unknown member fault {fault.fault!r}")
        self.history.record("fault", fault=fault.fault, target=name, phase="start",
                            detail=FAULTS[fault.fault].description)
        self.applied += 1
        act()

        def healed() -> None:
            heal()
            self.history.record("fault", fault=fault.fault, target=name, phase="end", detail=after)

        return healed

    def _share_member_fault(self, fault: ScheduledFault) -> Callable[[], None]:
        """A member of the share group crashes (a replacement joins when the duration is up) or stalls (it goes on
        when the duration is up)."""
        share_group = self.share_group
        if share_group is None:
            raise RuntimeError(f"the drill has no share group for {fault.fault}")
        name = share_group.oldest()
        heal: Callable[[], str]
        self.history.record("fault", fault=fault.fault, target=name, phase="start",
                            detail=FAULTS[fault.fault].description)
        self.applied += 1
        if fault.fault == "share-member-crash":
            share_group.crash(name)

            def heal() -> str:
                return f"{share_group.join()} joined"
        else:
            share_group.stall(name)

            def heal() -> str:
                share_group.resume(name)
                return f"{name} goes on"

        def healed() -> None:
            self.history.record("fault", fault=fault.fault, target=name, phase="end", detail=heal())

        return healed

    def _pipeline_fault(self, fault: ScheduledFault) -> Callable[[], None]:
        """The Spark driver or one executor JVM SIGKILLed now; the driver started again from its checkpoint, or
        the executor's successor awaited, when the duration is up."""
        pipeline = self.pipeline
        if pipeline is None:
            raise RuntimeError(f"the drill runs no Spark pipeline for {fault.fault}")
        heal: Callable[[], str]
        if fault.fault == "driver-kill":
            target = f"driver pid {pipeline.kill_driver()}"

            def heal() -> str:
                pipeline.start(first_batch=True)
                return f"driver started again from its checkpoint, a micro-batch run (start {pipeline.starts})"
        else:
            killed = pipeline.kill_executor()
            target = f"executor pid {killed}"

            def heal() -> str:
                return f"executors running again: pids {', '.join(map(str, pipeline.wait_executors(killed)))}"
        self.history.record("fault", fault=fault.fault, target=target, phase="start",
                            detail=FAULTS[fault.fault].description)
        self.applied += 1

        def healed() -> None:
            try:
                detail = heal()
            except RuntimeError as exc:  # recorded: the read-back then shows what the pipeline did without it
                detail = f"not healed: {exc}"
            self.history.record("fault", fault=fault.fault, target=target, phase="end", detail=detail)

        return healed

    def _unclean_election(self, fault: ScheduledFault) -> Callable[[], None]:
        """The follower stops replicating now; the election comes at the end of the duration (the truncation is
        the fault's effect), then the follower replicates again, now as the leader."""
        partition = int(fault.target.partition(":")[2])
        state = self._state(partition)
        follower = next(r for r in state.replicas if r != state.leader)
        target = name_of(self.cluster, follower)
        self.history.record("fault", fault=fault.fault, target=target, phase="start",
                            detail=f"{self.topic}-{partition}: {target} stops replicating from leader "
                                   f"{name_of(self.cluster, state.leader)}")
        self.applied += 1
        self._hook(target, {REPLICATION_PAUSED: "true"}, [])

        def healed() -> None:
            outcome = asyncio.run(admin.elect(self.cluster.controller().address, self.topic, partition, follower,
                                              unclean=True))
            self._hook(target, {}, [REPLICATION_PAUSED])
            self.history.record("fault", fault=fault.fault, target=target, phase="end",
                                detail=f"unclean election of {target} for {self.topic}-{partition}: {outcome}")

        return healed

    def _lagging_leader(self, fault: ScheduledFault) -> Callable[[], None]:
        """The follower's high watermark is held now; at the end of the duration the other replicas stop
        replicating and it is elected (a clean election: it is in the ISR), so that for LAGGING_LEADER_S it leads
        with a high watermark below its log end (KIP-207's window: consumers get OFFSET_NOT_AVAILABLE, never an
        older LATEST); then everything is released."""
        partition = int(fault.target.partition(":")[2])
        target = self._resolve(fault.target)
        follower = node(self.cluster, target).node_id
        self.history.record("fault", fault=fault.fault, target=target, phase="start",
                            detail=f"{self.topic}-{partition}: {target}'s high watermark held")
        self.applied += 1
        self._hook(target, {HIGH_WATERMARK_HELD: "true"}, [])

        def healed() -> None:
            others = [name_of(self.cluster, r) for r in self._state(partition).replicas if r != follower]
            for other in others:
                self._hook(other, {REPLICATION_PAUSED: "true"}, [])
            outcome = asyncio.run(admin.elect(self.cluster.controller().address, self.topic, partition, follower))
            time.sleep(LAGGING_LEADER_S)
            self._hook(target, {}, [HIGH_WATERMARK_HELD])
            for other in others:
                self._hook(other, {}, [REPLICATION_PAUSED])
            self.history.record("fault", fault=fault.fault, target=target, phase="end",
                                detail=f"clean election of {target} for {self.topic}-{partition}: {outcome}")

        return healed

    def _kip101_restart(self, fault: ScheduledFault) -> Callable[[], None]:
        """KIP-101 scenario 1, where Kafka before it lost acknowledged records: a follower restarted, truncated
        its log to its high watermark, and was elected before it had fetched them again."""
        partition = int(fault.target.partition(":")[2])
        state, follower_id = self._in_sync(partition)
        leader = name_of(self.cluster, state.leader)
        follower = name_of(self.cluster, follower_id)
        self.history.record("fault", fault=fault.fault, target=leader, phase="start", partition=partition,
                            detail=f"{self.topic}-{partition}: {follower}'s high watermark held by {leader}; "
                                   f"{follower} restarted, then {leader} killed")
        self.applied += 1
        self._hook(leader, {HIGH_WATERMARK_HELD: "true"}, [])
        try:
            time.sleep(HELD_BEFORE_RESTART_S)
            self.cluster.kill(follower)
            self.cluster.restart(follower)
            self._wait_state(partition, lambda s: follower_id in s.isr, f"{follower} back in the ISR")
        except BaseException:
            self._hook(leader, {}, [HIGH_WATERMARK_HELD])  # the leader lives on: not left holding it
            raise
        self.cluster.kill(leader)
        return self._restarting(fault, leader, f"{leader} started again; {follower} led meanwhile")

    def _kip101_divergence(self, fault: ScheduledFault) -> Callable[[], None]:
        """KIP-101 scenario 2, where Kafka before it left two replicas with different records at one offset:
        both lost power, the one with the shorter log came back first and took new records there. With two
        replicas the follower is the one elected twice; with three, whichever the controller picks."""
        partition = int(fault.target.partition(":")[2])
        state, follower_id = self._in_sync(partition)
        leader = name_of(self.cluster, state.leader)
        follower = name_of(self.cluster, follower_id)
        self.history.record("fault", fault=fault.fault, target=leader, phase="start", partition=partition,
                            detail=f"{self.topic}-{partition}: {follower} stops replicating; {leader} then its "
                                   "successor lose power; the successor starts first")
        self.applied += 1
        self._hook(follower, {REPLICATION_PAUSED: "true"}, [])
        try:
            time.sleep(UNREPLICATED_S)
            self._lose_power(leader)
        finally:
            self._hook(follower, {}, [REPLICATION_PAUSED])
        successor = name_of(self.cluster, self._wait_state(
            partition, lambda s: s.leader not in (-1, state.leader), "a new leader").leader)
        self._lose_power(successor)
        self.cluster.restart(successor)
        self._wait_state(partition, lambda s: s.leader not in (-1, state.leader), "a leader again")
        return self._restarting(fault, leader, f"{leader} started again, behind {successor}")

    def _in_sync(self, partition: int, leader: int | None = None) -> tuple[admin.PartitionState, int]:
        """The partition's state once its ISR holds a follower, and the first such follower: a broker the previous
        fault restarted may still be catching up (faults are apart by a gap, not by a catch-up, which takes longer
        on a loaded machine). With `leader`, still led by it. RuntimeError (not applied) after STATE_TIMEOUT_S."""
        state = self._wait_state(partition, lambda s: (leader is None or s.leader == leader)
                                 and any(r != s.leader for r in s.isr),
                                 f"{self.topic}-{partition} with a follower in its ISR")
        return state, next(r for r in state.isr if r != state.leader)

    def _restarting(self, fault: ScheduledFault, name: str, detail: str) -> Callable[[], None]:
        def healed() -> None:
            self.cluster.restart(name)
            self.history.record("fault", fault=fault.fault, target=name, phase="end", detail=detail)

        return healed

    def _lose_power(self, name: str) -> None:
        self._hook(name, {POWER_LOSS: "true"}, [])
        if not self.cluster.wait_exit(name):
            raise RuntimeError(f"{name} still runs after {POWER_LOSS}")

    def _wait_state(self, partition: int, condition: Callable[[admin.PartitionState], bool],
                    what: str) -> admin.PartitionState:
        deadline = time.monotonic() + STATE_TIMEOUT_S
        while True:
            try:
                if condition(state := self._state(partition)):
                    return state
            except (RuntimeError, admin.AdminError):
                pass  # no leader for a moment, or no broker answering: the deadline decides
            if time.monotonic() > deadline:
                raise RuntimeError(f"waited {STATE_TIMEOUT_S:.0f} s for {what}")
            time.sleep(0.05)

    def _cuts(self, fault: str, target: str, partition: int | None) -> dict[str, list[str]]:
        """Which broker gets which peers in fault.network.partition, for a partition fault on `target`."""
        me = node(self.cluster, target).node_id
        others = [b for b in self.cluster.brokers() if b.node_id != me]
        if fault == "isolated-leader":  # both ways: set on the leader, and on each other broker against it
            return {target: [str(b.node_id) for b in others] + [CONTROLLER_PEER],
                    **{b.name: [str(me)] for b in others}}
        if fault == "controller-partition":
            return {target: [CONTROLLER_PEER]}
        if fault == "one-way-partition" and partition is not None:
            follower = next(r for r in self._state(partition).replicas if r != me)
            return {target: [str(follower)]}
        return {target: [f"{CLIENT_PEER_PREFIX}{PRODUCER_CLIENT_ID}"]}

    def _state(self, partition: int) -> admin.PartitionState:
        """The partition as the newest leader epoch among the running brokers' answers has it (KIP-232's rule:
        a broker whose metadata lags, a stale leader above all, is not believed)."""
        states = [state for n in self.cluster.running_brokers()
                  if (state := self._state_from(n.address, partition)) is not None]
        state = max(states, key=lambda s: s.leader_epoch, default=None)
        if state is None or state.leader < 0:
            raise RuntimeError(f"{self.topic}-{partition} has no leader to fault")
        return state

    def _state_from(self, address: str, partition: int) -> admin.PartitionState | None:
        try:
            return asyncio.run(admin.fetch_metadata([address], timeout_s=2.0)).partitions.get((self.topic, partition))
        except admin.AdminError:
            return None

    def _resolve(self, target: str) -> str:
        if target == TXN_COORDINATOR:
            addresses = [broker.address for broker in self.cluster.running_brokers()]
            return name_of(self.cluster, asyncio.run(admin.transaction_coordinator(addresses, TRANSACTIONAL_ID)))
        if target == GROUP_COORDINATOR:
            addresses = [broker.address for broker in self.cluster.running_brokers()]
            return name_of(self.cluster, asyncio.run(admin.group_coordinator(addresses, GROUP_ID)))
        role, _, partition = target.partition(":")
        if role not in ("leader", "follower"):
            return target
        if role == "leader":
            return name_of(self.cluster, self._state(int(partition)).leader)
        return name_of(self.cluster, self._in_sync(int(partition))[1])

    def _hook(self, target: str, settings: dict[str, str], clear: list[str]) -> None:
        found = node(self.cluster, target)
        asyncio.run(admin.alter_faults(found.address, found.node_id, settings, clear))
