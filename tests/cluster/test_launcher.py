"""`epoch-broker cluster` and `epoch-broker admin` as a user runs them, and the `cluster` fixture's harness."""

from __future__ import annotations

import asyncio
import json
import os
import re
import selectors
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from epoch_broker.broker.faults import POWER_LOSS, REPLICATION_PAUSED
from epoch_broker.drill import launcher
from epoch_broker.drill.admin import AdminError, fetch_metadata
from tests.cluster.support import Cluster, create_topic, produce, wait_for, wait_state
from tests.helpers import REPO, free_base_port, not_yet, wait_for_sync

pytestmark = pytest.mark.slow


def epoch_broker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "epoch_broker", *args], capture_output=True, text=True, timeout=60,
                          cwd=REPO)


def read_until(proc: subprocess.Popen[str], marker: str, timeout: float = 60.0) -> list[str]:
    """The launcher's output lines up to the one containing `marker`. Reads the raw descriptor: select() on a
    buffered text stream misses lines already read into its buffer."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    pending = b""
    lines: list[str] = []

    def printed(selector: selectors.BaseSelector) -> object:
        nonlocal pending
        if selector.select(0.1):  # the wait's pace: wait_for_sync itself does not sleep
            chunk = os.read(fd, 65536)
            if not chunk:
                raise AssertionError(f"no {marker!r} from the launcher before it closed its output; it printed:\n"
                                     + "\n".join(lines))
            *complete, pending = (pending + chunk).split(b"\n")
            for line in complete:
                lines.append(line.decode())
                if marker in lines[-1]:
                    return True
        return not_yet("it printed:\n" + "\n".join(lines))

    with selectors.DefaultSelector() as selector:  # not select(): the test process may hold fds past 1024
        selector.register(fd, selectors.EVENT_READ)
        wait_for_sync(lambda: printed(selector), timeout, interval=0, what=f"{marker!r} from the launcher")
    return lines


def test_cluster_command_runs_four_processes_that_admin_drives_and_ctrl_c_stops(tmp_path: Path) -> None:
    data = tmp_path / "cluster-data"
    base = free_base_port(3)
    proc = subprocess.Popen([sys.executable, "-m", "epoch_broker", "cluster", "--brokers", "3", "--data-dir", str(data),
                             "--base-port", str(base)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=REPO)
    cluster: launcher.ClusterFile | None = None
    try:
        printed = read_until(proc, "bootstrap servers:")
        bootstrap = ",".join(f"127.0.0.1:{base + i}" for i in range(3))
        assert printed[-1].endswith(f"bootstrap servers: {bootstrap}")

        cluster = launcher.ClusterFile.read(data)
        raw = json.loads((data / "cluster.json").read_text())
        assert raw["bootstrap"] == bootstrap
        assert [(p["name"], p["node_id"], p["port"]) for p in raw["processes"]] == [
            ("controller", 1000, base + 100), ("broker-0", 0, base), ("broker-1", 1, base + 1),
            ("broker-2", 2, base + 2)]
        assert all(launcher.is_running(p) for p in cluster.processes)
        assert len({p.pid for p in cluster.processes}) == 4
        assert "broker.session.timeout.ms=1500" in cluster.brokers[0].argv

        admin = ("admin", "--cluster", str(data))
        status = epoch_broker(*admin, "status")
        assert status.returncode == 0, status.stdout + status.stderr
        assert status.stdout.count(" running") == 4
        # The controller is named by its process; brokers tell clients one of them is the controller (they forward
        # admin requests to the real one, KRaft's way), and status says so rather than mixing the two.
        assert re.search(rf"controller node 1000 at 127\.0\.0\.1:{base + 100}; metadata from 127\.0\.0\.1:\d+ \(it "
                         r"tells clients broker [012] is the controller, as KRaft does\): brokers 0=127\.0\.0\.1",
                         status.stdout), status.stdout

        paused = epoch_broker(*admin, "fault", "--node", "0", "--set", f"{REPLICATION_PAUSED}=true")
        assert paused.returncode == 0 and paused.stdout.strip().endswith("node 0: applied"), paused.stdout
        as_json = json.loads(epoch_broker(*admin, "status", "--json").stdout)
        assert {p["name"]: p["faults"] for p in as_json["processes"]} == {
            "controller": {}, "broker-0": {REPLICATION_PAUSED: "true"}, "broker-1": {}, "broker-2": {}}
        assert as_json["controller"] == {"node_id": 1000, "address": f"127.0.0.1:{base + 100}"}
        watch = subprocess.Popen([sys.executable, "-m", "epoch_broker", *admin, "status", "--json", "--watch", "0.2"],
                                 stdout=subprocess.PIPE, text=True, cwd=REPO)
        try:
            assert watch.stdout is not None
            first, second = (json.loads(watch.stdout.readline()) for _ in range(2))
            assert second["time"] > first["time"] and second["partitions"] == first["partitions"]
        finally:
            watch.kill()
            watch.wait()
        assert any(line.startswith("broker-0") and line.endswith(f"{REPLICATION_PAUSED}=true")
                   for line in epoch_broker(*admin, "status").stdout.splitlines())
        bad_key = epoch_broker(*admin, "fault", "--node", "0", "--set", "fault.nope=1")
        assert bad_key.returncode == 1 and "INVALID_CONFIG: fault.nope" in bad_key.stdout
        no_topic = epoch_broker(*admin, "elect", "--topic", "nope", "--partition", "0")
        assert no_topic.returncode == 1 and f"via 127.0.0.1:{base + 100}" in no_topic.stdout
        assert "elect failed: UNKNOWN_TOPIC_OR_PARTITION" in no_topic.stdout

        killed = epoch_broker(*admin, "kill", "--node", "1")
        assert killed.returncode == 0, killed.stdout + killed.stderr
        assert "SIGKILL to broker-1" in killed.stdout
        assert not launcher.is_running(cluster.process(1))
        status = epoch_broker(*admin, "status")
        assert any(line.startswith("broker-1") and " dead " in line for line in status.stdout.splitlines())

        old_pid = cluster.process(1).pid
        restarted = epoch_broker(*admin, "restart", "--node", "1")
        assert restarted.returncode == 0, restarted.stdout + restarted.stderr
        cluster = launcher.ClusterFile.read(data)
        assert cluster.process(1).pid != old_pid and launcher.is_running(cluster.process(1))

        proc.send_signal(signal.SIGINT)  # Ctrl-C
        assert proc.wait(60) == 0
        assert proc.stdout is not None
        assert "controller (pid" in proc.stdout.read()
        assert not any(launcher.is_running(p) for p in cluster.processes)  # the restarted broker too
    finally:
        if proc.poll() is None:  # Ctrl-C: the launcher stops what it started, even midway through its start
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if (data / launcher.CLUSTER_FILE).exists():  # also a broker restarted by `admin restart`
            launcher.stop_cluster(launcher.ClusterFile.read(data))


def test_a_cluster_without_fault_hooks_refuses_them_on_every_node(tmp_path: Path) -> None:
    """`epoch-broker cluster --no-fault-hooks`: nobody who reaches a broker or the controller can set a hook."""
    data = tmp_path / "cluster-data"
    proc = subprocess.Popen([sys.executable, "-m", "epoch_broker", "cluster", "--brokers", "1", "--data-dir", str(data),
                             "--base-port", str(free_base_port(1)), "--no-fault-hooks"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=REPO)
    try:
        read_until(proc, "bootstrap servers:")
        for node in ("0", "1000"):
            refused = epoch_broker("admin", "--cluster", str(data), "fault", "--node", node, "--set",
                                   f"{REPLICATION_PAUSED}=true")
            assert refused.returncode == 1 and "fault.hooks.enable=true" in refused.stdout, refused.stdout
        assert all(launcher.is_running(p) for p in launcher.ClusterFile.read(data).processes)
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0


def test_bad_arguments_give_one_line_and_a_non_zero_status(tmp_path: Path) -> None:
    fixed_key = epoch_broker("cluster", "--data-dir", str(tmp_path), "--override", "node.id=3")
    assert fixed_key.returncode == 2
    assert fixed_key.stdout.strip().splitlines() == [
        "epoch-broker cluster: --override node.id is set per process by the launcher"]
    bad_value = epoch_broker("cluster", "--data-dir", str(tmp_path), "--override", "min.insync.replicas=zero")
    assert bad_value.returncode == 2 and "invalid value for min.insync.replicas" in bad_value.stdout

    no_cluster = epoch_broker("admin", "--cluster", str(tmp_path), "status")
    assert no_cluster.returncode == 1
    assert no_cluster.stdout.strip().splitlines() == [
        f"epoch-broker admin: status failed: no cluster.json in {tmp_path} (start a cluster with "
        "`epoch-broker cluster`)"]
    no_value = epoch_broker("admin", "--bootstrap", "127.0.0.1:1", "fault", "--node", "0", "--set", "x")
    assert no_value.returncode == 1 and "--set needs key=value" in no_value.stdout
    unreachable = epoch_broker("admin", "--bootstrap", "127.0.0.1:1", "elect", "--topic", "t", "--partition", "0")
    assert unreachable.returncode == 1 and "cannot reach 127.0.0.1:1" in unreachable.stdout
    assert not list(tmp_path.iterdir())  # nothing was started or written


async def test_harness_failover_restart_election_and_fault_hook(cluster: Cluster) -> None:
    await create_topic(cluster, "drill", replication_factor=3, configs={"min.insync.replicas": "2"}, wait=False)
    state = await wait_state(cluster, "drill", lambda s: len(s.isr) == 3, what="ISR of 3")
    leader, epoch = state.leader, state.leader_epoch
    assert (await produce(cluster, leader, "drill", b"v", version=9)).error_code == 0

    cluster.kill(leader)
    moved = await wait_state(cluster, "drill", lambda s: s.leader not in (leader, -1), what="a new leader")
    assert moved.leader_epoch > epoch and leader not in moved.isr
    assert (await produce(cluster, moved.leader, "drill", b"v", version=9)).error_code == 0

    cluster.restart(leader)
    await wait_state(cluster, "drill", lambda s: leader in s.isr, what="the restarted node in ISR")
    assert await asyncio.to_thread(cluster.elect, "drill", 0, leader=leader) == "elected"
    back = await wait_state(cluster, "drill", lambda s: s.leader == leader, what="elected leader")
    assert back.leader_epoch > moved.leader_epoch

    follower = next(n for n in back.isr if n != leader)
    assert await cluster.set_fault(follower, REPLICATION_PAUSED, "true") == "applied"
    # acks=all still succeeds; after replica.lag.time.max.ms: ISR of 2
    assert (await produce(cluster, leader, "drill", b"v", version=9)).error_code == 0
    await wait_state(cluster, "drill", lambda s: follower not in s.isr, what="ISR shrink")
    assert cluster.admin("fault", "--node", str(follower), "--clear", REPLICATION_PAUSED).returncode == 0
    await wait_state(cluster, "drill", lambda s: follower in s.isr, what="ISR expand")


@pytest.mark.cluster(brokers=2)
async def test_pause_resume_power_loss_and_restart_of_a_broker(cluster: Cluster) -> None:
    spec = cluster.broker(1)
    cluster.pause(1)
    await wait_for(lambda: launcher.process_state(spec) == "paused", what="SIGSTOP")
    with pytest.raises(AdminError, match="did not answer within 1 s"):
        await fetch_metadata([spec.address], timeout_s=1)
    status = cluster.admin("status")
    assert any(line.startswith("broker-1") and " paused " in line for line in status.stdout.splitlines())

    cluster.resume(1)
    assert (await fetch_metadata([spec.address])).source == spec.address
    assert launcher.process_state(spec) == "running"

    cut = cluster.admin("fault", "--node", "1", "--set", f"{POWER_LOSS}=1")
    assert cut.returncode == 0, cut.stdout + cut.stderr
    assert f"broker-1 (pid {spec.pid}) exited" in cut.stdout
    assert launcher.process_state(spec) == "dead"
    assert cluster.restart(1).pid != spec.pid
    assert (await fetch_metadata([spec.address])).source == spec.address
