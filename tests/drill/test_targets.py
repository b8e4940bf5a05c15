"""The docker-compose target of a drill runs the docker commands a user would: checked against a stub `docker`
executable that records what it is asked (no Docker engine runs here) and answers `ps` as a project with
broker-1 paused would."""

from __future__ import annotations

from pathlib import Path

from epoch_broker.drill.targets import ComposeCluster, name_of, node

from tests.helpers import REPO

STUB = """#!/bin/sh
printf '%s\\n' "$*" >> "{log}"
case "$*" in
  *"ps --status running --services"*) printf 'controller\\nbroker-0\\nbroker-2\\n' ;;
  *"ps --status paused --services"*) printf 'broker-1\\n' ;;
esac
"""


def test_the_compose_target_asks_docker_compose_for_each_fault_and_the_heal(tmp_path: Path) -> None:
    log = tmp_path / "docker.log"
    docker = tmp_path / "docker"
    docker.write_text(STUB.format(log=log))
    docker.chmod(0o755)
    compose_file = REPO / "docker-compose.yml"
    target = ComposeCluster(compose_file, "broker-0:9092,broker-1:9093,broker-2:9094", docker=str(docker))

    assert [(b.name, b.node_id, b.address, b.data_dir) for b in target.brokers()] == [
        ("broker-0", 0, "broker-0:9092", None), ("broker-1", 1, "broker-1:9093", None),
        ("broker-2", 2, "broker-2:9094", None)]
    assert node(target, "controller").address == "controller:9192" and name_of(target, 2) == "broker-2"
    assert [b.name for b in target.running_brokers()] == ["broker-0", "broker-2"]
    target.kill("broker-0")
    target.wait_exit("broker-0")
    target.restart("broker-0")
    target.pause("controller")
    target.resume("controller")
    assert target.heal_all() == ["resumed broker-1", "docker compose up -d --wait"]

    prefix = f"compose -f {compose_file} "
    assert log.read_text().splitlines() == [prefix + args for args in [
        "ps --status running --services", "kill -s SIGKILL broker-0", "wait broker-0", "restart broker-0",
        "pause controller", "unpause controller", "ps --status paused --services", "unpause broker-1",
        "up -d --wait"]]
