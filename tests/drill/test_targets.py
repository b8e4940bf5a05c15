"""The docker-compose target of a drill runs the docker commands a user would, with whichever Compose is
installed: `docker compose` (v2) when it answers, else Debian's docker-compose (v1, without `ps --status`, `wait`
or `up --wait`). Checked against stub `docker` and `docker-compose` executables that record what they are asked
(no Docker engine runs here) and answer as a project with broker-1 paused would; the v1 command lines were
checked against docker-compose 1.29's own --help."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from epoch_broker.drill import runner, targets
from epoch_broker.drill.targets import ComposeCluster, compose_cli, name_of, node
from tests.helpers import REPO

LOG = """#!/bin/sh
printf '%s %s\\n' "$(basename "$0")" "$*" >> "{log}"
"""
DOCKER_V2 = LOG + """case "$*" in
  "compose version --short") printf 'v2.29.1\\n' ;;
  *"ps --status running --services"*) printf 'controller\\nbroker-0\\nbroker-2\\n' ;;
  *"ps --status paused --services"*) printf 'broker-1\\n' ;;
  *"ps -a -q broker-0") printf 'c0\\n' ;;
  "wait "*) printf '137\\n' ;;
esac
"""
# Without the compose plugin, as Debian's docker.io: `docker compose` is an unknown command.
DOCKER_V1 = LOG + """case "$*" in
  "compose "*) echo "docker: 'compose' is not a docker command." >&2; exit 1 ;;
  "wait "*) printf '137\\n' ;;
  "inspect "*) cat "{health}"; sed -i 's/starting/healthy/' "{health}" ;;
esac
"""
# v1's status=running is Docker's State.Running: a paused container has it too.
DOCKER_COMPOSE_V1 = LOG + """case "$*" in
  "version --short") printf '1.29.2\\n' ;;
  *"ps --services --filter status=running"*) printf 'controller\\nbroker-0\\nbroker-1\\nbroker-2\\n' ;;
  *"ps --services --filter status=paused"*) printf 'broker-1\\n' ;;
  *"ps -q broker-0") printf 'c0\\n' ;;
  *"ps -q") printf 'c0\\nc1\\nc2\\nc3\\n' ;;
esac
"""
BOOTSTRAP = "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"


def stubs(tmp_path: Path, docker: str, docker_compose: str | None = None) -> Path:
    """A directory holding the stubs (for PATH), writing to tmp_path/docker.log; v1's `docker inspect` answers
    with tmp_path/health, where a starting container is healthy the next time."""
    directory = tmp_path / "bin"
    directory.mkdir(parents=True)
    for name, text in (("docker", docker), ("docker-compose", docker_compose)):
        if text is not None:
            path = directory / name
            path.write_text(text.format(log=tmp_path / "docker.log", health=tmp_path / "health"))
            path.chmod(0o755)
    return directory


def target(directory: Path, project: str | None = None) -> ComposeCluster:
    return ComposeCluster(REPO / "docker-compose.yml", BOOTSTRAP, project, docker=str(directory / "docker"),
                          docker_compose=str(directory / "docker-compose"))


def asked(tmp_path: Path) -> list[str]:
    return (tmp_path / "docker.log").read_text().splitlines()


def test_with_compose_v2_the_target_asks_docker_compose_for_each_fault_and_the_heal(tmp_path: Path) -> None:
    cluster = target(stubs(tmp_path, DOCKER_V2))
    assert (cluster.cli_name, cluster.version, cluster.v1) == ("docker compose", "2.29.1", False)

    assert [(b.name, b.node_id, b.address, b.data_dir) for b in cluster.brokers()] == [
        ("broker-0", 0, "127.0.0.1:9092", None), ("broker-1", 1, "127.0.0.1:9093", None),
        ("broker-2", 2, "127.0.0.1:9094", None)]
    assert node(cluster, "controller").address == "127.0.0.1:9192" and name_of(cluster, 2) == "broker-2"
    assert [b.name for b in cluster.running_brokers()] == ["broker-0", "broker-2"]
    cluster.kill("broker-0")
    assert cluster.wait_exit("broker-0")
    cluster.restart("broker-0")
    cluster.pause("controller")
    cluster.resume("controller")
    assert cluster.heal_all() == ["resumed broker-1", "docker compose up -d --wait"]

    prefix = f"docker compose -f {REPO / 'docker-compose.yml'} "
    assert asked(tmp_path) == ["docker compose version --short"] + [prefix + args for args in [
        "ps --status running --services", "kill -s SIGKILL broker-0", "ps -a -q broker-0"]] + ["docker wait c0"] + [
        prefix + args for args in ["restart broker-0", "pause controller", "unpause controller",
                                   "ps --status paused --services", "unpause broker-1", "up -d --wait"]]


def test_with_compose_v1_the_target_uses_ps_filters_docker_wait_and_waits_for_health_itself(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(targets, "HEALTH_POLL_S", 0.0)
    (tmp_path / "health").write_text("controller healthy\nbroker-0 starting\nbroker-1 healthy\nbroker-2 running\n")
    cluster = target(stubs(tmp_path, DOCKER_V1, DOCKER_COMPOSE_V1), project="drill-test")
    assert (cluster.cli_name, cluster.version, cluster.v1) == ("docker-compose", "1.29.2", True)

    assert [b.name for b in cluster.running_brokers()] == ["broker-0", "broker-2"]  # broker-1: paused
    cluster.kill("broker-0")
    assert cluster.wait_exit("broker-0")
    cluster.restart("broker-0")
    cluster.pause("controller")
    cluster.resume("controller")
    assert cluster.log_text("broker-0") == ""
    assert cluster.heal_all() == ["resumed broker-1", "docker-compose up -d, and every service healthy"]

    prefix = f"docker-compose -f {REPO / 'docker-compose.yml'} -p drill-test "
    inspect = f"docker inspect --format {targets.HEALTH_FORMAT} c0 c1 c2 c3"
    assert asked(tmp_path) == ["docker compose version --short", "docker-compose version --short"] + [
        prefix + args if not args.startswith("docker ") else args for args in [
            "ps --services --filter status=running", "ps --services --filter status=paused",
            "kill -s SIGKILL broker-0", "ps -q broker-0", "docker wait c0", "restart broker-0",
            "pause controller", "unpause controller", "logs --no-color --no-log-prefix broker-0",
            "ps --services --filter status=paused", "unpause broker-1", "up -d", "ps -q", inspect, inspect]]


def test_with_compose_v1_a_service_that_stays_unhealthy_fails_the_heal_with_its_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(targets, "UP_WAIT_TIMEOUT_S", 0.0)
    (tmp_path / "health").write_text("controller healthy\nbroker-0 healthy\nbroker-1 unhealthy\nbroker-2 exited\n")
    cluster = target(stubs(tmp_path, DOCKER_V1, DOCKER_COMPOSE_V1))
    with pytest.raises(RuntimeError, match=r"after docker-compose up -d, not healthy within 0 s: "
                                           r"broker-1 unhealthy, broker-2 exited$"):
        cluster.heal_all()


def test_compose_cli_names_the_command_the_target_drives(tmp_path: Path) -> None:
    v2, v1 = stubs(tmp_path / "v2", DOCKER_V2), stubs(tmp_path / "v1", DOCKER_V1, DOCKER_COMPOSE_V1)
    assert compose_cli(str(v2 / "docker"), str(v2 / "docker-compose")) == [str(v2 / "docker"), "compose"]
    assert compose_cli(str(v1 / "docker"), str(v1 / "docker-compose")) == [str(v1 / "docker-compose")]


def test_without_a_compose_cli_the_target_says_so(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"neither .* compose` \(Compose v2\) nor .*docker-compose` \(v1\)"):
        compose_cli(str(tmp_path / "docker"), str(tmp_path / "docker-compose"))


def test_the_drill_says_which_compose_it_attached_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PATH", str(stubs(tmp_path, DOCKER_V1, DOCKER_COMPOSE_V1)))
    args = argparse.Namespace(compose=Path("docker-compose.yml"), bootstrap=runner.COMPOSE_BOOTSTRAP,
                              compose_project="drill-test", cluster=None)
    with runner.cluster_for(args, tmp_path) as cluster:
        assert [b.address for b in cluster.brokers()] == BOOTSTRAP.split(",")
    assert capsys.readouterr().out == (
        "drill: attaching to the docker-compose project of docker-compose.yml (drill-test), with docker-compose "
        f"1.29.2 (bootstrap {BOOTSTRAP})\n")
    assert cluster.description == ("the docker-compose project of docker-compose.yml (drill-test), with "
                                   "docker-compose 1.29.2")  # also the report's "against" line
