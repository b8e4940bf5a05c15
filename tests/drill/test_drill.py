"""`epoch-broker drill` end to end (issue 12): real cluster processes, real clients, a seeded fault schedule, the
checker's verdict and the report; the schedule's determinism; replay; attaching to a running cluster. The
consumer-group drill (issue 29) with both group protocols, and its faults' plumbing without a cluster. The
share-group drill (issue 34): its plan, its member faults' plumbing, and a run with leader kills."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from epoch_broker.drill.history import HistoryWriter, read_history
from epoch_broker.drill.nemesis import FAULTS, GROUP, SHARE_GROUP, Nemesis, ScheduledFault, make_schedule
from epoch_broker.drill.scenarios import scenarios
from epoch_broker.drill.workload import CLASSIC_ONLY, STATIC_MEMBER, consumer_config
from tests.cluster.support import start_cluster

BROKERS = ["broker-0", "broker-1", "broker-2"]


def drill(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "epoch_broker", "drill", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def fault_events(out: Path) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in (out / "history" / "nemesis.jsonl").read_text().splitlines()]
    return [e for e in events if e["op"] == "fault"]


def fault_starts(out: Path) -> list[tuple[str, str]]:
    return [(e["fault"], e["target"]) for e in fault_events(out) if e["phase"] == "start"]


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    for scenario in scenarios().values():
        first = scenario.schedule(42, 30.0, BROKERS)
        assert first == scenario.schedule(42, 30.0, BROKERS)
        assert first, scenario.name
        assert all(f.fault in scenario.faults and f.at_s + f.duration_s <= 30.0 for f in first)
        assert all(a.at_s + a.duration_s < b.at_s for a, b in pairwise(first))  # no overlap
    chaos = list(FAULTS)
    assert make_schedule(chaos, 1, 60.0, BROKERS, 3) != make_schedule(chaos, 2, 60.0, BROKERS, 3)
    assert [f.target for f in scenarios()["rolling-restart"].schedule(5, 30.0, BROKERS)] == BROKERS


def test_drill_help_lists_every_scenario_with_its_summary(tmp_path: Path) -> None:
    """The CLI's list comes from the catalogue (docs/drills.md too: tests/test_docs.py checks the page)."""
    run = drill("--help", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert [name for name, scenario in scenarios().items()
            if not any(line.split() == [name, *scenario.summary.split()] for line in run.stdout.splitlines())] == []


@pytest.mark.slow
def test_a_leader_kill_drill_passes_its_invariants_and_a_replay_applies_the_same_faults(tmp_path: Path) -> None:
    out = tmp_path / "report"
    run = drill("leader-kill", "--seed", "7", "--duration", "12", "--out", str(out), cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-3000:]
    assert "phase: faults" in run.stdout and "PASS" in run.stdout
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    assert report["check"]["passed"] is True
    assert report["check"]["figures"]["acked"] > 100
    assert [f["fault"] for f in report["schedule"]] == ["leader-kill"] * len(report["schedule"])
    assert len(fault_starts(out)) == len(report["schedule"]) >= 2
    # every kill's failover, as the producer saw it, measured from the history
    assert len(report["failover_s"]) == len(report["schedule"]) and all(0 < t < 15 for t in report["failover_s"])
    assert "failover seen by the producer" in run.stdout
    page = (out / "report.html").read_text()
    assert "<svg" in page and "class='leader'" in page and "id='invariants'" in page

    again = tmp_path / "replay"
    run = drill("leader-kill", "--replay", str(out), "--out", str(again), cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-3000:]
    assert json.loads((again / "schedule.json").read_text()) == json.loads((out / "schedule.json").read_text())
    assert [fault for fault, _ in fault_starts(again)] == [fault for fault, _ in fault_starts(out)]


@pytest.mark.slow
def test_a_drill_attaches_to_a_running_cluster_and_leaves_it_running(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path, brokers=3)
    try:
        run = drill("isr-churn", "--seed", "3", "--duration", "10", "--cluster", str(cluster.directory),
                    "--out", str(tmp_path / "report"), cwd=tmp_path)
        assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-3000:]
        assert "attaching to the cluster" in run.stdout and "stopping the cluster" not in run.stdout
        status = cluster.admin("status")
        assert status.returncode == 0 and status.stdout.count(" running") == 4, status.stdout
    finally:
        cluster.stop()


def test_bad_arguments_get_one_line_and_status_2(tmp_path: Path) -> None:
    run = drill("no-such-scenario", cwd=tmp_path)
    assert run.returncode == 2 and "unknown scenario 'no-such-scenario'" in run.stderr
    run = drill("leader-kill", "--replay", str(tmp_path / "missing"), cwd=tmp_path)
    assert run.returncode == 2 and "is not a drill schedule" in run.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("scenario", "seed"), [("unclean-truncation", "3"), ("power-loss", "5"),
                                               ("kip207-offsets", "4"), ("zombie-follower", "4"),
                                               ("controller-loss", "2"), ("rolling-restart", "1"),
                                               ("network-partition", "6"), ("disk-faults", "8"),
                                               ("kip101-scenario-1", "1"), ("kip101-scenario-2", "1"),
                                               ("stale-leader", "1"), ("chaos", "9")])
def test_each_kind_of_fault_drill_passes_its_invariants(tmp_path: Path, scenario: str, seed: str) -> None:
    out = tmp_path / "report"
    run = drill(scenario, "--seed", seed, "--duration", "12", "--out", str(out), cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    check, timeline = report["check"], report["cluster_events"]
    figures, invariants = check["figures"], {i["name"]: i for i in check["invariants"]}
    assert figures["faults_applied"] >= 1 and figures["acked"] > 100
    assert "no replica logs" not in invariants["replicas_consistent"]["note"]
    if scenario != "chaos":  # chaos may draw a fault its target cannot take then (it is recorded, and skipped)
        assert not [e for e in fault_events(out) if "not applied" in (e["detail"] or "")]
    if scenario == "unclean-truncation":
        # records only the old leader had were read by the live consumer, cut by the election, and reported
        assert figures["acks1_lost"] > 0 and figures["truncations_reported"] >= 1
        assert figures["truncations_detected"] > 0 and invariants["undetected_truncation"]["passed"]
        # the cluster's own timeline, merged from the nodes' logs: the hook, the ISR shrinking, the election,
        # the old leader's truncation, in that order
        hook = next(i for i, e in enumerate(timeline) if e["kind"] == "fault" and e["value"] == "true")
        shrink = next(i for i, e in enumerate(timeline) if i > hook and e["kind"] == "isr")
        election = next(i for i, e in enumerate(timeline) if e["kind"] == "leader" and "unclean" in e["why"])
        truncation = next(i for i, e in enumerate(timeline) if e["kind"] == "truncate")
        assert hook < shrink < election < truncation
        assert "id='cluster-events'" in (out / "report.html").read_text()
    else:
        assert figures["acks1_lost"] == 0 and invariants["lost"]["count"] == 0
    if scenario == "kip101-scenario-1":
        # the restarted follower was elected (the old leader died): nothing above its high watermark was lost
        started = {e["partition"]: e for e in fault_events(out) if e["phase"] == "start"}
        assert any(e["kind"] == "leader" and e["topic"] == "drill" and int(e["partition"]) in started
                   and e["time"] > started[int(e["partition"])]["time"] for e in timeline)
    if scenario == "kip101-scenario-2":
        # the old leader, started last, cut its unreplicated tail by leader epoch: the replicas diverged, then
        # agreed (replicas_consistent passed above)
        assert [e for e in timeline if e["kind"] == "truncate" and e["topic"] == "drill"]
    if scenario == "stale-leader":
        # KIP-359: a stale leader refused the new epoch; once it knew, stale producers were fenced (74) and stock
        # ones sent elsewhere (6); nothing carrying an epoch was written in another
        answers = {(e["probe"], e["error"]) for e in map(json.loads, (out / "history" / "probe.jsonl").open())
                   if e["op"] == "ack"}
        assert {("kip359", "UNKNOWN_LEADER_EPOCH"), ("stale-kip359", "FENCED_LEADER_EPOCH"),
                ("stock", "NOT_LEADER_OR_FOLLOWER")} <= answers
        assert invariants["epoch_fenced_produce"]["passed"] and figures["produce_epoch_refused"] > 0
    if scenario == "kip207-offsets":
        # the new leader's window was seen: OFFSET_NOT_AVAILABLE answers, and LATEST never went back
        polled = [json.loads(line) for line in (out / "history" / "poller.jsonl").read_text().splitlines()]
        assert any(e["op"] == "latest" and e["error"] == "OFFSET_NOT_AVAILABLE" for e in polled)
        assert invariants["latest_regression"]["passed"] and invariants["latest_regression"]["count"] == 0


@pytest.mark.slow
def test_a_transactions_drill_kills_the_coordinator_mid_transaction_and_reads_each_committed_record_once(
        tmp_path: Path) -> None:
    out = tmp_path / "report"
    run = drill("transactions", "--seed", "2", "--duration", "12", "--out", str(out), cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    figures, invariants = report["check"]["figures"], {i["name"]: i for i in report["check"]["invariants"]}
    assert figures["transactions_commit"] >= 10 and figures["transactions_abort"] >= 3, figures
    assert figures["acked"] == 12 * figures["transactions_commit"] and invariants["lost"]["count"] == 0
    for name in ("aborted_read", "partial_transaction"):
        assert invariants[name]["passed"] and "no transactions" not in invariants[name]["note"], invariants[name]
    kills = [e for e in fault_events(out) if e["fault"] == "txn-coordinator-kill" and e["phase"] == "start"]
    assert kills and not [e for e in fault_events(out) if "not applied" in (e["detail"] or "")]
    # mid-transaction: a transaction had records sent before a kill and ended after it (committed by the successor)
    history = [json.loads(line) for line in (out / "history" / "producer.jsonl").read_text().splitlines()]
    first_send = {}
    for event in history:
        if event["op"] == "send":
            first_send.setdefault(event["txn"], event["time"])
    ended = {e["txn"]: e for e in history if e["op"] == "txn"}
    assert any(first_send[txn] < kill["time"] < ended[txn]["time"] for kill in kills for txn in ended
               if txn in first_send), "no kill fell inside a transaction"


# --- the consumer group's drill (issue 29)

def test_the_consumer_protocol_leaves_out_what_librdkafka_refuses_there() -> None:
    config = {"group.id": "g", "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
              "partition.assignment.strategy": "range", "group.protocol.type": "consumer"}
    assert consumer_config(config, "classic") == {**config, "group.protocol": "classic"}
    assert consumer_config(config, "consumer") == {"group.id": "g", "group.protocol": "consumer"}
    assert set(CLASSIC_ONLY) == set(config) - {"group.id"}
    with pytest.raises(ValueError, match="group protocol 'eager' is not one of classic, consumer"):
        consumer_config(config, "eager")


@pytest.mark.parametrize("seed", range(12))
def test_the_churn_plan_holds_every_member_fault_and_one_or_two_coordinator_kills(seed: int) -> None:
    churn = scenarios()["consumer-group-churn"]
    assert (churn.group_protocol, churn.group_members) == ("consumer", 3)
    plan = churn.schedule(seed, 25.0, BROKERS)
    counts = Counter(fault.fault for fault in plan)
    assert {"member-join", "member-leave", "static-restart"} <= set(counts), plan
    assert 1 <= counts["group-coordinator-kill"] <= 2, plan
    assert {fault.target for fault in plan if fault.fault != "group-coordinator-kill"} == {GROUP}
    assert all(a.at_s + a.duration_s < b.at_s for a, b in pairwise(plan))


class FakeGroup:
    """What the nemesis asks of the workload's ConsumerGroup, recorded."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.numbers = 0

    def next_name(self) -> str:
        return f"member-{self.numbers}"

    def join(self) -> str:
        self.calls.append(f"join {self.next_name()}")
        self.numbers += 1
        return f"member-{self.numbers - 1}"

    def oldest(self) -> str:
        return "member-0"

    def leave(self, name: str) -> None:
        self.calls.append(f"leave {name}")

    def stop_static(self) -> str:
        self.calls.append("stop static")
        return STATIC_MEMBER

    def start_static(self) -> str:
        self.calls.append("start static")
        return STATIC_MEMBER


def test_member_faults_act_on_the_workloads_group_and_name_the_member(tmp_path: Path) -> None:
    group = FakeGroup()
    with HistoryWriter(tmp_path, "nemesis") as history:
        nemesis = Nemesis(None, "drill", history, group)  # type: ignore[arg-type]  # member faults need no cluster
        for name in ("member-join", "member-leave", "static-restart"):
            nemesis.start(ScheduledFault(0.0, name, GROUP, 1.0))()
        Nemesis(None, "drill", history).start(ScheduledFault(0.0, "member-join", GROUP, 1.0))()  # type: ignore[arg-type]
    assert group.calls == ["join member-0", "leave member-0", "leave member-0", "join member-1", "stop static",
                           "start static"]
    events = [(e["fault"], e["target"], e["phase"], e["detail"]) for e in read_history(tmp_path)]
    assert [event[:3] for event in events[:6]] == [
        ("member-join", "member-0", "start"), ("member-join", "member-0", "end"),
        ("member-leave", "member-0", "start"), ("member-leave", "member-0", "end"),
        ("static-restart", STATIC_MEMBER, "start"), ("static-restart", STATIC_MEMBER, "end")]
    assert events[3][3] == "member-1 joined" and events[5][3] == f"a new instance of {STATIC_MEMBER} started"
    assert events[6][2] == "end" and events[6][3] == "not applied: the drill has no consumer group for member-join"
    assert nemesis.applied == 3


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_consumer_group_churn_drill_passes_with_either_group_protocol(tmp_path: Path, protocol: str) -> None:
    out = tmp_path / "report"
    run = drill("consumer-group-churn", "--group-protocol", protocol, "--seed", "3", "--duration", "25",
                "--out", str(out), cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-3000:]
    assert f"group protocol {protocol} (3 members in group drill-group)" in run.stdout
    report = json.loads((out / "report.json").read_text())
    assert (report["group_protocol"], report["group_members"]) == (protocol, 3)
    figures, invariants = report["check"]["figures"], {i["name"]: i for i in report["check"]["invariants"]}
    for name in ("poll_skip", "nonmonotonic_poll", "owned_twice", "unconsumed"):
        assert invariants[name]["passed"] and invariants[name]["count"] == 0, invariants[name]
    assert "no consumer group" not in invariants["unconsumed"]["note"]
    # every fault applied: members joined, left and the static one restarted; the coordinator was killed
    applied = [(e["fault"], e["target"]) for e in fault_events(out) if e["phase"] == "start"]
    assert not [e for e in fault_events(out) if "not applied" in (e["detail"] or "")]
    assert {fault for fault, _ in applied} == {"member-join", "member-leave", "static-restart",
                                                "group-coordinator-kill"}
    assert all(target.startswith("broker-") for fault, target in applied if fault == "group-coordinator-kill")
    # the members read: the group rebalanced on each join and leave, and every member's start has its end
    history = read_history(out / "history")
    members = [e for e in history if e["op"] == "member"]
    assert figures["member_reads"] > 1000 and figures["assignments"] >= 6 and figures["assignments_lost"] == 0
    assert Counter(e["phase"] for e in members) == {"start": figures["member_starts"], "end": figures["member_starts"]}
    assert {e["protocol"] for e in members} == {protocol}
    # the static member came back as a new instance of itself, with partitions again
    static = [e for e in history if e["client"] == STATIC_MEMBER and e["op"] in ("member", "assigned")]
    restart = next(i for i, e in enumerate(static) if e["op"] == "member" and e["phase"] == "start" and i > 0)
    assert any(e["op"] == "assigned" and e["partitions"] for e in static[restart:])
    page = (out / "report.html").read_text()
    assert "id='holders'" in page and f"group protocol {protocol}" in page


# --- the share group's drill (issue 34)

SHARE_MEMBER_FAULTS = ("share-member-crash", "share-member-stall")


@pytest.mark.parametrize("seed", range(12))
def test_the_share_plan_holds_each_member_fault_and_two_leader_kills_and_faults_keeps_the_members(seed: int) -> None:
    share = scenarios()["share-group"]
    assert (share.share_members, share.partitions) == (3, 1)
    plan = share.schedule(seed, 25.0, BROKERS)
    counts = Counter(fault.fault for fault in plan)
    assert set(SHARE_MEMBER_FAULTS) <= set(counts) and counts["leader-kill"] >= 2, plan
    assert {fault.target for fault in plan if fault.fault != "leader-kill"} == {SHARE_GROUP}
    assert {fault.target for fault in plan if fault.fault == "leader-kill"} == {"leader:0"}
    members_only = share.schedule(seed, 25.0, BROKERS, SHARE_MEMBER_FAULTS)
    assert members_only == [fault for fault in plan if fault.fault != "leader-kill"]
    with pytest.raises(ValueError, match="share-group draws no fault kill"):
        share.schedule(seed, 25.0, BROKERS, ("kill",))


class FakeShareGroup:
    """What the nemesis asks of the workload's ShareGroup, recorded."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def oldest(self) -> str:
        return "share-member-0"

    def crash(self, name: str) -> None:
        self.calls.append(f"crash {name}")

    def join(self) -> str:
        self.calls.append("join")
        return "share-member-3"

    def stall(self, name: str) -> None:
        self.calls.append(f"stall {name}")

    def resume(self, name: str) -> None:
        self.calls.append(f"resume {name}")


def test_share_member_faults_act_on_the_workloads_share_group_and_name_the_member(tmp_path: Path) -> None:
    share = FakeShareGroup()
    with HistoryWriter(tmp_path, "nemesis") as history:
        nemesis = Nemesis(None, "drill", history, share_group=share)  # type: ignore[arg-type]  # no cluster needed
        for name in SHARE_MEMBER_FAULTS:
            nemesis.start(ScheduledFault(0.0, name, SHARE_GROUP, 1.0))()
        Nemesis(None, "drill", history).start(ScheduledFault(0.0, "share-member-crash", SHARE_GROUP, 1.0))()  # type: ignore[arg-type]
    assert share.calls == ["crash share-member-0", "join", "stall share-member-0", "resume share-member-0"]
    events = [(e["fault"], e["target"], e["phase"], e["detail"]) for e in read_history(tmp_path)]
    assert [event[:3] for event in events[:4]] == [
        ("share-member-crash", "share-member-0", "start"), ("share-member-crash", "share-member-0", "end"),
        ("share-member-stall", "share-member-0", "start"), ("share-member-stall", "share-member-0", "end")]
    assert (events[1][3], events[3][3]) == ("share-member-3 joined", "share-member-0 goes on")
    assert events[4][2:] == ("end", "not applied: the drill has no share group for share-member-crash")
    assert nemesis.applied == 2


@pytest.mark.slow
def test_a_share_group_drill_finishes_every_record_once_through_member_crashes_stalls_and_leader_kills(
        tmp_path: Path) -> None:
    out = tmp_path / "report"
    run = drill("share-group", "--seed", "1", "--duration", "25", "--out", str(out), cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    figures, invariants = report["check"]["figures"], {i["name"]: i for i in report["check"]["invariants"]}
    for name in ("share_accepted_twice", "share_lost", "share_locked_twice", "share_delivery_count"):
        assert invariants[name]["passed"] and "no share group" not in invariants[name]["note"], invariants[name]
    applied = Counter(fault for fault, _ in fault_starts(out))
    assert applied == {"leader-kill": 2, "share-member-crash": 1, "share-member-stall": 2}, applied
    assert not [e for e in fault_events(out) if "not applied" in (e["detail"] or "")]
    # every record finished: accepted, rejected or archived at the limit (the poison records), each once
    assert figures["share_records"] == figures["final_read"] == figures["acked"] > 1000
    assert figures["share_accepted"] + figures["share_rejected"] + figures["share_archived"] == figures["share_records"]
    assert figures["share_rejected"] > 0 and figures["share_archived"] > 0 and figures["share_released"] > 0
    # the crashed member held records it never acknowledged, and they came back; the killed leaders' successors
    # refused acknowledgements of records their predecessors had handed out
    assert figures["share_held_at_crash"] > 0 and figures["share_redeliveries"] > figures["share_released"]
    assert figures["share_ack_failed"] > 0 and figures["share_member_starts"] == 4
