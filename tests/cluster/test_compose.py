"""docker-compose.yml and docker-compose.zookeeper.yml: valid for docker-compose (v1.29, Debian's), and every
node's command is one the broker accepts, with the launcher's drill settings and ports, advertised listeners and
controller addresses that agree with each other. docker-compose.yml has one controller with its metadata in its
data dir; docker-compose.zookeeper.yml has three sharing it in a ZooKeeper service, which every broker lists. No
Docker engine is needed: `docker-compose config` only reads the file (tests/shipped/test_docker.py runs both)."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

import pytest

from epoch_broker.__main__ import _parse_args
from epoch_broker.broker.config import CLUSTER_SECRET_ENV, KEYS, load_config
from epoch_broker.drill.launcher import CONTROLLER_NODE_ID, DRILL_DEFAULTS, ZOOKEEPER_SESSION_TIMEOUT_MS
from tests.helpers import REPO

BROKERS = 3
SECRET = "a-test-secret-of-32-characters!!"
ZOOKEEPER_SERVICE = "zookeeper"
ZOOKEEPER_IMAGE = "zookeeper:3.8"
ZOOKEEPER_PORT = 2181  # the official image's client port
ZOOKEEPER_VOLUMES = ["zookeeper-data:/data:rw", "zookeeper-datalog:/datalog:rw"]  # the image's data and txn log


@dataclass(frozen=True)
class Variant:
    file: str
    controllers: tuple[str, ...]  # the controller services, node 1000, 1001, ... in order
    zookeeper: bool  # the controllers keep the metadata log in the `zookeeper` service


FILE_STORE = Variant("docker-compose.yml", ("controller",), zookeeper=False)
IN_ZOOKEEPER = Variant("docker-compose.zookeeper.yml", ("controller-0", "controller-1", "controller-2"),
                       zookeeper=True)
BROKER_NAMES = tuple(f"broker-{node}" for node in range(BROKERS))


@functools.cache
def resolve(file: str) -> dict[str, Any]:
    """The file as docker-compose resolves it (anchors merged, ports normalized), as a dict."""
    path = str(REPO / file)
    binary = shutil.which("docker-compose")
    assert binary is not None, "docker-compose is not installed (Debian: apt-get install docker-compose)"
    unset = subprocess.run([binary, "-f", path, "config", "-q"], capture_output=True, text=True,
                           env={k: v for k, v in os.environ.items() if k != CLUSTER_SECRET_ENV})
    assert unset.returncode != 0 and CLUSTER_SECRET_ENV in unset.stderr  # no cluster without its secret
    env = {**os.environ, CLUSTER_SECRET_ENV: SECRET}
    checked = subprocess.run([binary, "-f", path, "config", "-q"], capture_output=True, text=True, env=env)
    assert checked.returncode == 0, checked.stderr
    resolved = subprocess.run([binary, "-f", path, "config"], capture_output=True, text=True, check=True,
                              env=env).stdout
    # docker-compose's own interpreter has its YAML parser; this project's venv does not need one
    with open(binary) as f:
        interpreter = f.readline().removeprefix("#!").strip()
    as_json = subprocess.run([interpreter, "-c", "import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin), "
                              "sys.stdout)"], input=resolved, capture_output=True, text=True, check=True).stdout
    return json.loads(as_json)


@pytest.fixture(scope="module", params=[FILE_STORE, IN_ZOOKEEPER], ids=lambda variant: variant.file)
def variant(request: pytest.FixtureRequest) -> Variant:
    return request.param


@pytest.fixture(scope="module")
def compose(variant: Variant) -> dict[str, Any]:
    return resolve(variant.file)


def _ours(variant: Variant) -> tuple[str, ...]:
    """The services that run epoch-broker (all but ZooKeeper)."""
    return (*variant.controllers, *BROKER_NAMES)


def test_the_file_is_valid_for_docker_compose(compose: dict[str, Any], variant: Variant) -> None:
    zookeeper = [ZOOKEEPER_SERVICE] if variant.zookeeper else []
    assert sorted(compose["services"]) == sorted([*_ours(variant), *zookeeper])
    zookeeper_volumes = [volume.partition(":")[0] for volume in ZOOKEEPER_VOLUMES] if variant.zookeeper else []
    assert sorted(compose["volumes"]) == sorted([f"{name}-data" for name in _ours(variant)] + zookeeper_volumes)


def test_every_command_is_accepted_with_the_launchers_settings(compose: dict[str, Any], variant: Variant) -> None:
    for name in _ours(variant):
        service = compose["services"][name]
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


def test_ports_listeners_and_the_controller_address_agree(compose: dict[str, Any], variant: Variant) -> None:
    services = compose["services"]
    controller_addresses = []
    for index, name in enumerate(variant.controllers):
        service = services[name]
        controller = load_config(None, _parse_args(service["command"]).override)
        assert controller.process_roles == {"controller"} and controller.node_id == CONTROLLER_NODE_ID + index
        plaintext, internal = controller.listeners
        assert (plaintext.listener, internal.listener) == ("PLAINTEXT", "CONTROLLER")
        assert controller.controller_listener_names == ("CONTROLLER",)
        assert controller.security_protocol("CONTROLLER") == "SASL_PLAINTEXT"  # the brokers' login, not published
        # the launcher's layout: controller i on the first one's port + 2i, its CONTROLLER listener on the next
        first_port = load_config(None, _parse_args(services[variant.controllers[0]]["command"]).override
                                 ).listeners[0].port
        assert (plaintext.port, internal.port) == (first_port + 2 * index, first_port + 2 * index + 1), name
        assert _health_port(service) == plaintext.port
        metrics_port = int(controller.metrics_listener.rpartition(":")[2])
        assert controller.metrics_listener.startswith("http://0.0.0.0:")
        # admin requests and the status page, from this machine only
        assert service["ports"] == [_on_loopback(port) for port in (plaintext.port, metrics_port)]
        if variant.zookeeper:
            assert controller.zookeeper_connect == f"{ZOOKEEPER_SERVICE}:{ZOOKEEPER_PORT}", name
            assert controller.zookeeper_session_timeout_ms == int(ZOOKEEPER_SESSION_TIMEOUT_MS), name
            assert service["depends_on"] == {ZOOKEEPER_SERVICE: {"condition": "service_healthy"}}, name
        else:
            assert controller.zookeeper_connect == "" and "depends_on" not in service, name
        controller_addresses.append(f"{name}:{internal.port}")  # its SASL listener

    for node, name in enumerate(BROKER_NAMES):
        service = services[name]
        config = load_config(None, _parse_args(service["command"]).override)
        listener, in_network, replication = config.listeners
        assert (listener.listener, in_network.listener, replication.listener) == ("PLAINTEXT", "DOCKER", "INTERNAL")
        advertised = config.advertised_endpoints()
        internal = config.advertised  # where the other brokers replicate from: INTERNAL, not published
        assert (internal.listener, internal.host, internal.port) == ("INTERNAL", name, replication.port)
        assert config.process_roles == {"broker"} and config.node_id == node
        # every controller, by its service name and CONTROLLER listener, in node id order
        assert config.controller_address == ",".join(controller_addresses)
        assert config.inter_broker_listener == "INTERNAL"
        assert config.security_protocol("INTERNAL") == config.security_protocol("CONTROLLER") == "SASL_PLAINTEXT"
        assert listener.host == in_network.host == "0.0.0.0"
        # host clients: published 1:1 on loopback and advertised as 127.0.0.1, so no name needs to resolve there
        assert (advertised["PLAINTEXT"].host, advertised["PLAINTEXT"].port) == ("127.0.0.1", listener.port)
        # clients in other containers of the compose network: the service name, not published
        assert (advertised["DOCKER"].host, advertised["DOCKER"].port) == (name, in_network.port)
        assert config.security_protocol("PLAINTEXT") == config.security_protocol("DOCKER") == "PLAINTEXT"
        # and its metrics listener (the status page), published 1:1 too
        metrics_port = int(config.metrics_listener.rpartition(":")[2])
        assert config.metrics_listener.startswith("http://0.0.0.0:")
        assert service["ports"] == [_on_loopback(port) for port in (listener.port, metrics_port)]
        assert _health_port(service) == listener.port
        assert service["depends_on"] == {controller: {"condition": "service_healthy"}
                                         for controller in variant.controllers}
    configs = [load_config(None, _parse_args(services[name]["command"]).override) for name in _ours(variant)]
    ports = [endpoint.port for config in configs for endpoint in config.listeners]
    assert len(set(ports)) == len(ports)
    published = [port for service in services.values() for port in service.get("ports", [])]
    assert len(set(published)) == len(published)


def test_the_zookeeper_service() -> None:
    """The official image (ZOOKEEPER_IMAGE names another), on its own volumes, reachable only inside the compose
    network and healthy once it answers `srvr`; the controllers start after it."""
    services = resolve(IN_ZOOKEEPER.file)["services"]
    zookeeper = services[ZOOKEEPER_SERVICE]
    assert zookeeper["image"] == ZOOKEEPER_IMAGE and "build" not in zookeeper and "command" not in zookeeper
    assert CLUSTER_SECRET_ENV not in zookeeper.get("environment", {})  # the cluster's secret is not its business
    assert not zookeeper.get("ports")  # no login: never published
    assert sorted(zookeeper["volumes"]) == ZOOKEEPER_VOLUMES
    check = " ".join(zookeeper["healthcheck"]["test"])
    assert f"/dev/tcp/127.0.0.1/{ZOOKEEPER_PORT}" in check and "srvr" in check, check
    for name in IN_ZOOKEEPER.controllers:
        assert services[name]["depends_on"] == {ZOOKEEPER_SERVICE: {"condition": "service_healthy"}}, name


def _on_loopback(port: int) -> str:
    """A port published 1:1 on the host's 127.0.0.1 only, as docker-compose v1 resolves it."""
    return f"127.0.0.1:{port}:{port}/tcp"


def _health_port(service: dict[str, Any]) -> int:
    match = re.search(r"create_connection\(\('127\.0\.0\.1', (\d+)\)", " ".join(service["healthcheck"]["test"]))
    assert match is not None, service["healthcheck"]
    return int(match.group(1))
