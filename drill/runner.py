"""`epoch-broker drill SCENARIO [--seed N] [--duration S] [--brokers N] [--cluster DIR] [--out DIR] [--replay DIR]
[--group-protocol classic|consumer] [--faults NAME,...]` and `epoch-broker drill check HISTORY_DIR`: a failover
drill from start to verdict.

Phases, each announced, with a progress line every few seconds (elapsed time, faults applied, records acked):
1. cluster: start one (the launcher's code, in OUT/cluster, on free loopback ports) or attach to a running one
   (`--cluster DIR`: its cluster.json; `--compose FILE`: a docker-compose project); one it attached to is left
   running afterwards;
2. schedule: made from the seed (or loaded with `--replay REPORT_DIR`), printed, saved as OUT/schedule.json;
3. workload: the drill's topic created, then producers, a live consumer and a poller start (drill/workload.py),
   and the members of a consumer group where the scenario has one (or `--group-protocol` is given: then at
   least GROUP_MEMBERS_ON_REQUEST, so that the scenario's faults meet that protocol); where the scenario runs a
   Spark pipeline (drill/pipeline.py), its output and commit-log topics are created and its driver started
   (its query running) before the producers; where it has a share group (drill/share_workload.py), its configs
   are set and its member processes started;
4. faults: the schedule applied, each fault healed when its duration is up;
5. heal: every process running again, every ISR full, the producers flushed;
6. read back: every partition to its high watermark (the consumer group's members, once they have read up to
   it too, and the share group's, once every record below it is finished, closed first); then a pipeline's
   output, once it holds a row for every input record read back (its driver stopped cleanly first, then read to
   the output's high watermarks);
7. check: the history checked (drill/checker.py), OUT/report.json and OUT/report.html written.
Exit status: 0 when every invariant holds, 1 when one is broken, 2 for a bad argument, a cluster that does
not come up, or an environment that cannot run the scenario (the spark-pipeline drill without the [spark] extra
or Java).

Rules:
- Every client and the nemesis write their own history file under OUT/history: the checker and the report read
  nothing else, so a history from other clients can be checked the same way.
- A drill never leaves a process it started: the cluster it started is stopped at the end, also on failure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from epoch_broker.broker import events
from epoch_broker.drill import admin, checker, launcher, report
from epoch_broker.drill.history import HistoryWriter, read_history
from epoch_broker.drill.nemesis import Nemesis, ScheduledFault, load_schedule, save_schedule
from epoch_broker.drill.pipeline import CATCH_UP_S, OUTPUT_READER, Pipeline, missing_extra, read_output
from epoch_broker.drill.replicas import replica_logs
from epoch_broker.drill.scenarios import Scenario, scenarios
from epoch_broker.drill.share_workload import SHARE_GROUP_ID, ShareGroup
from epoch_broker.drill.targets import ComposeCluster, LocalCluster, Target
from epoch_broker.drill.workload import (
    GROUP_ID,
    GROUP_PROTOCOLS,
    ConsumerGroup,
    EpochProbe,
    LiveConsumer,
    Poller,
    Producers,
    TransactionalProducer,
    Worker,
    read_back,
)

TOPIC = "drill"
OUTPUT_TOPIC = "drill-output"  # a Spark pipeline's (drill/pipeline.py), shaped as TOPIC
COMMIT_LOG_TOPIC = "drill-pipeline-commits"  # its exactly-once sink's commit log, replicated as TOPIC
# docker-compose.yml's PLAINTEXT listeners, published and advertised on 127.0.0.1 (no /etc/hosts lines needed)
COMPOSE_BOOTSTRAP = "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"
PROGRESS_EVERY_S = 2.0
HEAL_TIMEOUT_S = 60.0
CONSUMER_STOP_S = 20.0
GROUP_CATCH_UP_S = 30.0  # the consumer group's members, to read up to the high watermarks before they close
GROUP_MEMBERS_ON_REQUEST = 2  # a consumer group's members in a scenario without one, when --group-protocol is given
SHARE_CATCH_UP_S = 90.0  # the share group, to finish every record below the high watermarks before it closes


class DrillError(RuntimeError):
    """A drill that cannot go on (not an invariant broken): one line says why."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    known = scenarios()
    width = max(map(len, known))
    parser.formatter_class = argparse.RawDescriptionHelpFormatter  # the scenarios' list keeps its lines
    parser.epilog = ("scenarios (faults, invariants and options of each: docs/drills.md):\n"
                     + "\n".join(f"  {name:<{width}}  {scenario.summary}" for name, scenario in known.items()))
    parser.add_argument("scenario", help="a scenario named below; or `check HISTORY_DIR`")
    parser.add_argument("--seed", type=int, default=None, help="the fault schedule's seed (default: random)")
    parser.add_argument("--duration", type=float, default=None, help="seconds of faults (default: the scenario's)")
    parser.add_argument("--brokers", type=int, default=3, help="brokers of the cluster it starts (default 3)")
    parser.add_argument("--cluster", type=Path, default=None, help="attach to a running cluster (its directory)")
    parser.add_argument("--compose", type=Path, default=None,
                        help="attach to a running docker-compose project (its compose file)")
    parser.add_argument("--bootstrap", default=COMPOSE_BOOTSTRAP,
                        help=f"with --compose: the brokers as clients here reach them (default {COMPOSE_BOOTSTRAP})")
    parser.add_argument("--compose-project", default=None,
                        help="with --compose: its project name (Compose's -p; default: Compose's own, the file's "
                             "directory)")
    parser.add_argument("--out", type=Path, default=None, help="report directory (default ./drill-SCENARIO-SEED)")
    parser.add_argument("--replay", type=Path, default=None, help="run the schedule of an earlier report again")
    parser.add_argument("--faults", default=None, metavar="NAME,...",
                        help="draw only these of the scenario's faults (a planned schedule keeps only these)")
    parser.add_argument("--group-protocol", choices=GROUP_PROTOCOLS, default=None,
                        help="the consumers' group.protocol (default: the scenario's, classic but for "
                             "consumer-group-churn, or the replayed drill's); on a scenario without a consumer "
                             f"group it adds one of {GROUP_MEMBERS_ON_REQUEST} members")


def main(argv: list[str]) -> int:
    if argv[:1] == ["check"]:
        return checker.main(argv[1:])
    parser = argparse.ArgumentParser(prog="epoch-broker drill", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    known = scenarios()
    if args.scenario not in known:
        print(f"epoch-broker drill: unknown scenario {args.scenario!r} (have: {', '.join(known)})", file=sys.stderr)
        return 2
    try:
        return run(known[args.scenario], args)
    except (DrillError, launcher.LaunchError, ValueError, FileNotFoundError) as exc:
        print(f"epoch-broker drill: {exc}", file=sys.stderr)
        return 2


def say(message: str) -> None:
    print(f"drill: {message}", flush=True)


def run(scenario: Scenario, args: argparse.Namespace) -> int:
    if scenario.pipeline and (missing := missing_extra()):
        raise DrillError(missing)
    if args.replay is not None:
        about, schedule = load_schedule(args.replay / "schedule.json")
        if about.get("scenario") != scenario.name:
            raise DrillError(f"{args.replay} holds a schedule of {about.get('scenario')}, not {scenario.name}")
        seed, duration = int(about["seed"]), float(about["duration_s"])
        protocol = args.group_protocol or about.get("group_protocol", scenario.group_protocol)
    else:
        seed = args.seed if args.seed is not None else random.randrange(1 << 31)
        duration = args.duration if args.duration is not None else scenario.duration_s
        protocol = args.group_protocol or scenario.group_protocol
        schedule = []
    members = scenario.group_members or (GROUP_MEMBERS_ON_REQUEST if args.group_protocol else 0)
    out = (args.out or Path(f"drill-{scenario.name}-{seed}")).resolve()
    (out / "history").mkdir(parents=True, exist_ok=True)
    started = time.time()
    with cluster_for(args, out) as cluster:
        if args.replay is None:
            faults = tuple(args.faults.split(",")) if args.faults else None
            schedule = scenario.schedule(seed, duration, [broker.name for broker in cluster.brokers()], faults)
        save_schedule(out / "schedule.json", schedule, scenario=scenario.name, seed=seed, duration_s=duration,
                      group_protocol=protocol)
        say(f"{scenario.name}, seed {seed}, group protocol {protocol}"
            f"{f' ({members} members in group {GROUP_ID})' if members else ''}, {len(schedule)} faults over "
            f"{duration:.0f} s (replay: epoch-broker drill {scenario.name} --replay {out}):")
        for fault in schedule:
            say(f"  at {fault.at_s:6.2f} s  {fault.fault:<18} {fault.target:<12} for {fault.duration_s:.2f} s")
        timings = drive(scenario, schedule, duration, cluster, out, protocol, members)
        timeline = cluster_timeline(cluster, started)
    result = checker.check_directory(out / "history", allow_acks1_loss=scenario.allow_acks1_loss,
                                     allow_unclean=scenario.unclean)
    failovers = failover_times(read_history(out / "history"))
    document = {"scenario": scenario.name, "target": cluster.description, "seed": seed, "duration_s": duration,
                "group_protocol": protocol, "group_members": members, "started": started,
                "wall_s": round(time.time() - started, 2), "timings": timings, "check": result.to_json(),
                "schedule": [vars(f) for f in schedule], "cluster_events": timeline,
                "failover_s": failovers}
    (out / "report.json").write_text(json.dumps(document, indent=2) + "\n")
    (out / "report.html").write_text(report.render(document, out / "history"))
    print(checker.format_text(result), flush=True)
    if failovers:
        say(f"failover seen by the producer (leader SIGKILL to its first acknowledged record sent after it): "
            f"median {statistics.median(failovers):.2f} s, min {min(failovers):.2f}, max {max(failovers):.2f} "
            f"over {len(failovers)}")
    say(f"{'PASS' if result.passed else 'FAIL'} in {document['wall_s']:.0f} s; report: {out / 'report.html'}")
    return 0 if result.passed else 1


@contextlib.contextmanager
def cluster_for(args: argparse.Namespace, out: Path) -> Iterator[Target]:
    """The cluster to drill: attached (left running) or started here (stopped at the end, whatever happens)."""
    if args.compose is not None:
        try:
            target = ComposeCluster(args.compose, args.bootstrap, args.compose_project)
        except RuntimeError as exc:  # no Compose CLI installed
            raise DrillError(str(exc)) from exc
        say(f"attaching to {target.description} (bootstrap {args.bootstrap})")
        yield target
        return
    if args.cluster is not None:
        attached = LocalCluster(args.cluster)
        say(f"attaching to {attached.description}")
        yield attached
        return
    if not 1 <= args.brokers <= 9:
        raise DrillError("--brokers must be between 1 and 9")
    directory = out / "cluster"
    base = launcher.free_base_port(args.brokers, range(20000, 30000))
    plan = launcher.plan_cluster(directory, args.brokers, base + launcher.CONTROLLER_PORT_OFFSET,
                                 [base + i for i in range(args.brokers)])
    say(f"starting a controller and {args.brokers} brokers in {directory}")
    launcher.start_cluster(plan, directory, lambda line: say(f"  {line}"))
    try:
        yield LocalCluster(directory)
    finally:
        say("stopping the cluster")
        launcher.stop_cluster(launcher.ClusterFile.read(directory))


def drive(scenario: Scenario, schedule: list[ScheduledFault], duration: float, cluster: Target,
          out: Path, protocol: str = "classic", members: int = 0) -> dict[str, float]:
    """Phases 3 to 6; the time each took. `protocol`: the consumers' group.protocol; `members`: of the consumer
    group at the start (0: none)."""
    bootstrap = cluster.bootstrap
    timings: dict[str, float] = {}
    current_phase, phase_start = "", time.monotonic()  # the phase running, and since when

    def phase(name: str) -> None:
        nonlocal current_phase, phase_start
        now = time.monotonic()
        if current_phase:
            timings[current_phase] = round(now - phase_start, 2)
        current_phase, phase_start = name, now
        if name:
            say(f"phase: {name}")

    phase("workload")
    create_topic(bootstrap, scenario)
    if scenario.pipeline:
        create_topic(bootstrap, scenario, OUTPUT_TOPIC)
        create_topic(bootstrap, scenario, COMMIT_LOG_TOPIC, partitions=1, configs={"cleanup.policy": "compact"})
    wait_full_isr(cluster, scenario, "the topic's partitions led, with full ISRs")
    histories = [HistoryWriter(out / "history", name) for name in ("producer", "consumer", "poller", "nemesis",
                                                                   "reader", "replicas", "probe", "pipeline",
                                                                   OUTPUT_READER)]
    (producer_history, consumer_history, poller_history, nemesis_history, reader_history, replicas_history,
     probe_history, pipeline_history, output_history) = histories
    logs = client_logger(out / "client.log")
    workers: list[Worker] = []
    group: ConsumerGroup | None = None
    share_group: ShareGroup | None = None
    pipeline: Pipeline | None = None
    try:
        if scenario.pipeline:
            pipeline = Pipeline(bootstrap, TOPIC, OUTPUT_TOPIC, COMMIT_LOG_TOPIC, out / "pipeline", pipeline_history)
            say(f"  starting the Spark pipeline's driver (log: {pipeline.log})")
            try:
                pipeline.start()
            except RuntimeError as exc:
                raise DrillError(str(exc)) from exc
        if scenario.share_members:
            share_group = ShareGroup(bootstrap, TOPIC, out / "history", out / "share-members.log")
            share_group.start(scenario.share_members)
        producers = (TransactionalProducer(bootstrap, TOPIC, scenario.partitions, producer_history, logs)
                     if scenario.transactional else
                     Producers(bootstrap, TOPIC, scenario.partitions, producer_history, logs, scenario.acks)).start()
        consumer = LiveConsumer(bootstrap, TOPIC, scenario.partitions, consumer_history, logs, protocol).start()
        if members:
            group = ConsumerGroup(bootstrap, TOPIC, protocol, out / "history", logs)
            group.start(members)
        running = lambda: {broker.node_id: broker.address for broker in cluster.running_brokers()}  # noqa: E731
        poller = Poller(running, TOPIC, poller_history).start()
        probe = EpochProbe(running, TOPIC, probe_history).start() if scenario.probe else None
        workers += [producers, consumer, poller, *([probe] if probe else [])]
        nemesis = Nemesis(cluster, TOPIC, nemesis_history, group, pipeline, share_group)

        def status() -> str:
            polled = f", group {group.read} ({len(group.members)} members)" if group is not None else ""
            return f"acked {producers.acked}, read {consumer.read}{polled}"

        phase("faults")
        apply_schedule(schedule, duration, nemesis, status)

        phase("heal")
        for done in cluster.heal_all():
            say(f"  {done}")
        wait_full_isr(cluster, scenario, "every process running and every ISR full")
        producers.stop()
        say(f"  producers flushed: {producers.acked} acked, {producers.failed} failed")
        poller.stop()
        if probe is not None:
            probe.stop()
            say(f"  epoch probe: {probe.sent} Produce requests to old leaders")

        phase("read back")
        ends = high_watermarks(cluster, scenario)
        wait_until(lambda: consumer.caught_up(ends), 15.0)  # let it catch up
        consumer.stop(CONSUMER_STOP_S)
        if consumer.thread.is_alive():  # a client wedged in poll or close: its history so far stands
            say(f"  the live consumer did not stop within {CONSUMER_STOP_S:.0f} s; left behind")
        if group is not None:
            if not wait_until(lambda: group is not None and group.caught_up(ends), GROUP_CATCH_UP_S):
                say(f"  the consumer group did not read up to the high watermarks within {GROUP_CATCH_UP_S:.0f} s")
            group.stop()
            say(f"  consumer group {GROUP_ID} ({protocol}): {group.started} members started over the drill, "
                f"{group.read} records polled")
        if share_group is not None:
            if not wait_until(lambda: share_group is not None and share_group.done(ends), SHARE_CATCH_UP_S):
                say(f"  the share group did not finish every record below the high watermarks within "
                    f"{SHARE_CATCH_UP_S:.0f} s")
            share_group.stop()
            say(f"  share group {SHARE_GROUP_ID}: {share_group.started} members started over the drill, "
                f"{share_group.crashed} crashed")
        say(f"  {read_back(bootstrap, TOPIC, ends, reader_history, logs)} records read back up to {ends}")
        if pipeline is not None:
            wanted = {(event["partition"], event["offset"]) for event in read_history(out / "history")
                      if event["client"] == reader_history.client and event["op"] == "read"}
            rows, caught_up = read_output(bootstrap, TOPIC, OUTPUT_TOPIC, scenario.partitions, wanted, pipeline,
                                          output_history, logs)
            say(f"  {rows} rows of the pipeline's output read back ({pipeline.starts} driver starts)"
                + ("" if caught_up else f"; it had not written a row for every input record within "
                                        f"{CATCH_UP_S:.0f} s"))
        logs_on_disk = replica_logs_caught_up(cluster, ends)
        for replica in logs_on_disk:
            replicas_history.record("replica_log", **replica)
        say(f"  {len(logs_on_disk)} replica logs read from the brokers' disks")
        phase("")
    finally:
        for worker in workers:  # stopped already unless the drill failed midway: their histories close next
            worker.stop()
        if pipeline is not None:
            pipeline.stop()
        if group is not None:
            group.stop()
            group.close()
        if share_group is not None:
            share_group.stop()
        for history in histories:
            history.close()
        for handler in logs.handlers:
            handler.close()
    return timings


def client_logger(path: Path) -> logging.Logger:
    """The clients' own logs, into a file of the report (one logger per drill: a file of its own)."""
    logger = logging.getLogger(f"epoch_broker.drill.clients.{path}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger.addHandler(handler)
    return logger


def apply_schedule(schedule: list[ScheduledFault], duration: float, nemesis: Nemesis,
                   status: Callable[[], str]) -> None:
    """Start each fault at its time, heal it when its duration is up; a progress line every few seconds.

    Heals are due at their scheduled time (at_s + duration_s) and run before any start in the same turn: a start
    or heal that took long (a restart waits for its ready line) delays what follows, but never makes two faults
    overlap, as the schedule does not."""
    started = time.monotonic()
    pending = list(schedule)
    healing: list[tuple[float, Callable[[], None]]] = []
    next_progress = PROGRESS_EVERY_S
    while True:
        elapsed = time.monotonic() - started
        for due, heal in [h for h in healing if h[0] <= elapsed]:
            healing.remove((due, heal))
            heal()
        if pending and pending[0].at_s <= elapsed and not healing:
            fault = pending.pop(0)
            say(f"  {elapsed:6.2f} s  {fault.fault} {fault.target} for {fault.duration_s:.2f} s")
            healing.append((fault.at_s + fault.duration_s, nemesis.start(fault)))
        if elapsed >= next_progress:
            say(f"  {elapsed:6.1f} s of {duration:.0f}: {nemesis.applied} faults applied, {status()}")
            next_progress += PROGRESS_EVERY_S
        if elapsed >= duration and not pending and not healing:
            return
        time.sleep(0.05)


def create_topic(bootstrap: str, scenario: Scenario, topic: str = TOPIC, partitions: int | None = None,
                 configs: dict[str, str] | None = None) -> None:
    """`topic` shaped as the scenario says (its partitions unless given; its configs plus `configs`)."""
    client = AdminClient({"bootstrap.servers": bootstrap})
    futures = client.create_topics([NewTopic(topic, num_partitions=partitions or scenario.partitions,
                                             replication_factor=scenario.replication,
                                             config={**scenario.configs, **(configs or {})})])
    try:
        futures[topic].result(60)
    except KafkaException as exc:
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise DrillError(f"cannot create topic {topic}: {exc}") from exc
        raise DrillError(f"topic {topic} already exists in the cluster: drill a fresh cluster") from exc


def partitions_state(cluster: Target) -> dict[tuple[str, int], admin.PartitionState]:
    with contextlib.suppress(admin.AdminError):
        return asyncio.run(admin.fetch_metadata([b.address for b in cluster.running_brokers()])).partitions
    return {}


def wait_full_isr(cluster: Target, scenario: Scenario, what: str) -> None:
    def full() -> bool:
        states = partitions_state(cluster)
        return all((state := states.get((TOPIC, p))) is not None and state.leader >= 0
                   and len(state.isr) == scenario.replication for p in range(scenario.partitions))

    if not wait_until(full, HEAL_TIMEOUT_S):
        raise DrillError(f"{what}: not within {HEAL_TIMEOUT_S:.0f} s")


def high_watermarks(cluster: Target, scenario: Scenario) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "drill-watermarks"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1]
                for p in range(scenario.partitions)}
    finally:
        consumer.close()


def failover_times(history: list[dict[str, Any]]) -> list[float]:
    """For each leader-kill: seconds from the SIGKILL to the first acknowledgement of a record of that partition
    sent after it (what the producing application waited), from the history alone."""
    kills = [e for e in history if e["op"] == "fault" and e["phase"] == "start" and e["fault"] == "leader-kill"
             and "partition" in e]
    sent_at = {(e["partition"], e["value"]): e["time"] for e in history if e["op"] == "send"}
    times = []
    for kill in kills:
        first = next((e["time"] for e in history if e["op"] == "ack" and e["error"] is None
                      and e["partition"] == kill["partition"]
                      and sent_at.get((e["partition"], e["value"]), 0.0) > kill["time"]), None)
        if first is not None:
            times.append(round(first - kill["time"], 3))
    return times


def cluster_timeline(cluster: Target, since: float) -> list[dict[str, Any]]:
    """Every event the cluster's nodes logged since the drill began (broker/events.py), merged by time."""
    found = []
    for name in [broker.name for broker in cluster.brokers()] + [cluster.controller().name]:
        with contextlib.suppress(OSError, RuntimeError):  # a log that cannot be read leaves a gap, said below
            found += [event for line in cluster.log_text(name).splitlines()
                      if (event := events.parse(line)) is not None and event["time"] >= since]
    say(f"  {len(found)} cluster events in the nodes' logs")
    return sorted(found, key=lambda event: event["time"])


def replica_logs_caught_up(cluster: Target, ends: dict[int, int]) -> list[dict[str, Any]]:
    """Every replica's log once each holds every batch below the high watermark (followers may still be fetching
    the last ones when the producers stop); after HEAL_TIMEOUT_S, as they are (the checker then names the gap)."""
    found: list[dict[str, Any]] = []

    def caught_up() -> bool:
        found[:] = replica_logs(cluster, TOPIC, ends)
        return all(log["high_watermark"] <= (log["batches"][-1][1] + 1 if log["batches"] else 0) for log in found)

    wait_until(caught_up, HEAL_TIMEOUT_S)
    return found


def wait_until(condition: Callable[[], Any], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True
