"""docker-compose.yml: valid for docker-compose (v1.29, Debian's), and every node's command is one the broker
accepts, with the launcher's drill settings and ports, advertised listeners and the controller address that
agree with each other. No Docker engine is needed: `docker-compose config` only reads the file."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from typing import Any

import pytest
from epoch_broker.broker.config import CLUSTER_SECRET_ENV, KEYS, load_config
from epoch_broker.drill.launcher import CONTROLLER_NODE_ID, DRILL_DEFAULTS

from epoch_broker.__main__ import _parse_args
from tests.helpers import REPO

COMPOSE_FILE = REPO / "docker-compose.yml"
BROKERS = 3
SECRET = "a-test-secret-of-32-characters!!"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """The file as docker-compose resolves it (anchors merged, ports normalized), as a dict."""
    binary = shutil.which("docker-compose")
    assert binary is not None, "docker-compose is not installed (Debian: apt-get install docker-compose)"
    unset = subprocess.run([binary, "-f", str(COMPOSE_FILE), "config", "-q"], capture_output=True, text=True,
                           env={k: v for k, v in os.environ.items() if k != CLUSTER_SECRET_ENV})
    assert unset.returncode != 0 and CLUSTER_SECRET_ENV in unset.stderr  # no cluster without its secret
    env = {**os.environ, CLUSTER_SECRET_ENV: SECRET}
    checked = subprocess.run([binary, "-f", str(COMPOSE_FILE), "config", "-q"], capture_output=True, text=True,
                             env=env)
    assert checked.returncode == 0, checked.stderr
    resolved = subprocess.run([binary, "-f", str(COMPOSE_FILE), "config"], capture_output=True, text=True,
                              check=True, env=env).stdout
    # docker-compose's own interpreter has its YAML parser; this project's venv does not need one
    with open(binary) as f:
        interpreter = f.readline().removeprefix("#!").strip()
    as_json = subprocess.run([interpreter, "-c", "import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin), "
                              "sys.stdout)"], input=resolved, capture_output=True, text=True, check=True).stdout
    return json.loads(as_json)


def test_the_file_is_valid_for_docker_compose(compose: dict[str, Any]) -> None:
    assert sorted(compose["services"]) == ["broker-0", "broker-1", "broker-2", "controller"]
    assert sorted(compose["volumes"]) == ["broker-0-data", "broker-1-data", "broker-2-data", "controller-data"]


def test_every_command_is_accepted_with_the_launchers_settings(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        args = _parse_args(service["command"])
        assert args.command == "serve" and args.properties is None, name
        pairs = dict(item.split("=", 1) for item in args.override)
        assert set(pairs) <= set(KEYS), f"{name}: keys the broker does not know: {set(pairs) - set(KEYS)}"
        config = load_config(None, args.override)
        assert service["environment"] == {CLUSTER_SECRET_ENV: SECRET}, name  # the secret, never in the command
        assert {key: pairs.get(key) for key in DRILL_DEFAULTS} == DRILL_DEFAULTS, name
        assert pairs["default.replication.factor"] == pairs["offsets.topic.replication.factor"] == str(BROKERS), name
        # the data dir is the service's named volume
        assert f"{name}-data:{config.data_dir}:rw" in service["volumes"], name


def test_ports_listeners_and_the_controller_address_agree(compose: dict[str, Any]) -> None:
    services = compose["services"]
    controller = load_config(None, _parse_args(services["controller"]["command"]).override)
    assert controller.process_roles == {"controller"} and controller.node_id == CONTROLLER_NODE_ID
    controller_port = controller.listeners[0].port
    assert _health_port(services["controller"]) == controller_port
    metrics_port = int(controller.metrics_listener.rpartition(":")[2])
    assert services["controller"]["ports"] == [{"published": metrics_port, "target": metrics_port}]

    for node in range(BROKERS):
        name = f"broker-{node}"
        service = services[name]
        config = load_config(None, _parse_args(service["command"]).override)
        listener, advertised = config.listeners[0], config.advertised_endpoints()["PLAINTEXT"]
        internal = config.advertised  # where the other brokers replicate from: INTERNAL, not published
        assert (internal.listener, internal.host, internal.port) == ("INTERNAL", name, config.listeners[1].port)
        assert config.process_roles == {"broker"} and config.node_id == node
        assert config.controller_address == f"controller:{controller.listeners[1].port}"  # its SASL listener
        assert config.inter_broker_listener == "INTERNAL"
        assert config.security_protocol("INTERNAL") == config.security_protocol("CONTROLLER") == "SASL_PLAINTEXT"
        assert listener.host == "0.0.0.0"  # reachable from other containers and through the published port
        # advertised as the service name on the same port, published 1:1 so host clients use it too
        assert (advertised.host, advertised.port) == (name, listener.port)
        # and its metrics listener (the status page), published 1:1 too
        metrics_port = int(config.metrics_listener.rpartition(":")[2])
        assert config.metrics_listener.startswith("http://0.0.0.0:")
        assert service["ports"] == [{"published": port, "target": port} for port in (listener.port, metrics_port)]
        assert _health_port(service) == listener.port
        assert service["depends_on"] == {"controller": {"condition": "service_healthy"}}
    ports = [load_config(None, _parse_args(s["command"]).override).listeners[0].port for s in services.values()]
    assert len(set(ports)) == len(ports)


def _health_port(service: dict[str, Any]) -> int:
    match = re.search(r"create_connection\(\('127\.0\.0\.1', (\d+)\)", " ".join(service["healthcheck"]["test"]))
    assert match is not None, service["healthcheck"]
    return int(match.group(1))
