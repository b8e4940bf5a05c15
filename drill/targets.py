"""What a drill's faults act on, through one interface (`Target`) with two implementations:

- `LocalCluster`: the processes of a cluster the launcher started, named as in its `cluster.json`
  ("controller", "broker-0", ...), signalled by the launcher's own code (as `epoch-broker admin` does).
- `ComposeCluster`: the services of a docker-compose project (this repository's docker-compose.yml names them
  the same way), through `docker compose kill|pause|unpause|restart|up` (Compose v2), or Debian's
  `docker-compose` (v1) where v2 is not installed: v1 lacks `ps --status`, `wait` and `up --wait`, so the
  target asks for the same through `ps --filter`, `docker wait` and `docker inspect`.

Rules:
- Local processes are signalled by the pids in `cluster.json`, never by name: only what the launcher started;
  the file is read afresh for every action (a restart records a new pid there).
- Every action is one command or signal (with Compose v1, a few commands) and returns once it is done;
  `heal_all` brings every node back (resumed where stopped, started where dead): a drill ends on a whole cluster.
- A target that cannot read its brokers' disks (compose volumes) has no data dirs; the drill then checks no
  replica logs and says so. Every target gives each node's log (`log_text`): the cluster's own timeline is
  read from there (broker/events.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from epoch_broker.drill import admin, launcher

CONTROLLER = "controller"
BROKER_NAME = re.compile(r"broker-(\d+)$")
COMPOSE_CONTROLLER_ADDRESS = "127.0.0.1:9192"  # docker-compose.yml publishes the controller's PLAINTEXT there
COMMAND_TIMEOUT_S = 120.0
UP_WAIT_TIMEOUT_S = 120.0  # Compose v1's `up -d`, then every service healthy (v2: `up --wait`)
HEALTH_POLL_S = 1.0
# each container of the project: its service, then its health, or its state where it has no healthcheck
HEALTH_FORMAT = ('{{index .Config.Labels "com.docker.compose.service"}} '
                 "{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}")


@dataclass(frozen=True)
class Node:
    name: str
    node_id: int
    address: str
    data_dir: str | None  # None where the drill cannot read it (a container's volume)


class Target(Protocol):
    bootstrap: str
    description: str  # what the drill ran against, for its output and report

    def brokers(self) -> list[Node]: ...
    def controller(self) -> Node: ...
    def running_brokers(self) -> list[Node]: ...
    def kill(self, name: str) -> None: ...
    def wait_exit(self, name: str) -> bool: ...
    def pause(self, name: str) -> None: ...
    def resume(self, name: str) -> None: ...
    def restart(self, name: str) -> None: ...
    def heal_all(self) -> list[str]: ...
    def log_text(self, name: str) -> str: ...


def node(target: Target, name: str) -> Node:
    for candidate in [*target.brokers(), target.controller()]:
        if candidate.name == name:
            return candidate
    raise KeyError(f"no node {name!r} (have {', '.join(n.name for n in target.brokers())}, controller)")


def name_of(target: Target, node_id: int) -> str:
    return next(n.name for n in [*target.brokers(), target.controller()] if n.node_id == node_id)


class LocalCluster:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.bootstrap = self._file().bootstrap
        self.description = f"the cluster in {directory}"

    def _file(self) -> launcher.ClusterFile:
        return launcher.ClusterFile.read(self.directory)

    def _spec(self, name: str) -> launcher.ProcessSpec:
        return next(spec for spec in self._file().processes if spec.name == name)

    @staticmethod
    def _node(spec: launcher.ProcessSpec) -> Node:
        return Node(spec.name, spec.node_id, spec.address, spec.data_dir)

    def brokers(self) -> list[Node]:
        return [self._node(spec) for spec in self._file().brokers]

    def controller(self) -> Node:
        """The active controller: with several (in ZooKeeper), the one not answering NOT_CONTROLLER (the first
        while none is active)."""
        cluster = self._file()
        if len(cluster.controllers) > 1:
            with contextlib.suppress(admin.AdminError):
                address = asyncio.run(admin.active_controller(cluster))
                return self._node(next(spec for spec in cluster.controllers if spec.address == address))
        return self._node(cluster.controller)

    def running_brokers(self) -> list[Node]:
        return [self._node(spec) for spec in self._file().brokers if launcher.process_state(spec) == "running"]

    def kill(self, name: str) -> None:
        spec = self._spec(name)
        launcher.signal_process(spec, signal.SIGKILL)
        if not launcher.wait_exit(spec, launcher.STOP_TIMEOUT_S):
            raise RuntimeError(f"{name} (pid {spec.pid}) still runs after SIGKILL")

    def wait_exit(self, name: str) -> bool:
        return launcher.wait_exit(self._spec(name), launcher.STOP_TIMEOUT_S)

    def pause(self, name: str) -> None:
        launcher.signal_process(self._spec(name), signal.SIGSTOP)

    def resume(self, name: str) -> None:
        launcher.signal_process(self._spec(name), signal.SIGCONT)

    def restart(self, name: str) -> None:
        """Start again (stopping it cleanly first if it runs), and wait for its ready line."""
        launcher.restart_process(self.directory, self._spec(name).node_id)

    def log_text(self, name: str) -> str:
        return Path(self._spec(name).log).read_text(errors="replace")

    def heal_all(self) -> list[str]:
        done = []
        for spec in self._file().processes:
            state = launcher.process_state(spec)
            if state == "paused":
                launcher.signal_process(spec, signal.SIGCONT)
                done.append(f"resumed {spec.name}")
            elif state != "running":
                launcher.restart_process(self.directory, spec.node_id)
                done.append(f"started {spec.name}")
        return done


def compose_cli(docker: str = "docker", docker_compose: str = "docker-compose") -> list[str]:
    """The Compose command installed here, as the drill picks it (for whatever else drives the same project)."""
    return _installed_compose(docker, docker_compose)[0]


def _installed_compose(docker: str, docker_compose: str) -> tuple[list[str], str]:
    """The Compose command and its version: `docker compose` (v2) when it answers, else `docker-compose`;
    RuntimeError when neither does."""
    for command in ([docker, "compose"], [docker_compose]):
        try:
            done = subprocess.run([*command, "version", "--short"], capture_output=True, text=True,
                                  timeout=COMMAND_TIMEOUT_S)
        except OSError:  # no such executable
            continue
        if done.returncode == 0:
            return command, done.stdout.strip().removeprefix("v")
    raise RuntimeError(f"neither `{docker} compose` (Compose v2) nor `{docker_compose}` (v1) is installed")


class ComposeCluster:
    """A docker-compose project: services `controller` and `broker-N` (node id N), as docker-compose.yml has
    them; `bootstrap` is how clients here reach the brokers (docker-compose.yml publishes and advertises their
    PLAINTEXT listeners on 127.0.0.1). `project` is Compose's -p (default: its own, from the file's directory)."""

    def __init__(self, compose_file: Path, bootstrap: str, project: str | None = None, docker: str = "docker",
                 docker_compose: str = "docker-compose") -> None:
        self.compose_file = compose_file
        self.bootstrap = bootstrap
        self.project = project
        self.docker = docker
        self.cli, self.version = _installed_compose(docker, docker_compose)
        # by version, not by command: a standalone `docker-compose` may be v2
        self.v1 = self.version.startswith("1.")
        self.cli_name = " ".join([Path(self.cli[0]).name, *self.cli[1:]])  # as a user types it
        self.description = (f"the docker-compose project of {compose_file}{f' ({project})' if project else ''}, "
                            f"with {self.cli_name} {self.version}")
        self._brokers = [Node(f"broker-{i}", i, address.strip(), None)
                         for i, address in enumerate(bootstrap.split(","))]

    def compose(self, *args: str) -> str:
        return _run([*self.cli, "-f", str(self.compose_file), *(["-p", self.project] if self.project else []), *args])

    def brokers(self) -> list[Node]:
        return list(self._brokers)

    def controller(self) -> Node:
        return Node(CONTROLLER, launcher.CONTROLLER_NODE_ID, COMPOSE_CONTROLLER_ADDRESS, None)

    def running_brokers(self) -> list[Node]:
        running = self._services("running")
        if self.v1:  # v1's status=running is Docker's State.Running, which a paused container also has
            running -= self._services("paused")
        return [n for n in self._brokers if n.name in running]

    def _services(self, status: str) -> set[str]:
        if self.v1:
            return set(self.compose("ps", "--services", "--filter", f"status={status}").split())
        return set(self.compose("ps", "--status", status, "--services").split())

    def kill(self, name: str) -> None:
        self.compose("kill", "-s", "SIGKILL", name)

    def wait_exit(self, name: str) -> bool:
        # `docker wait` for both CLIs: v2's `compose wait` exits with the container's status (137 after SIGKILL),
        # which would read as a failure; v1 has no `wait`
        listed = ("ps", "-q", name) if self.v1 else ("ps", "-a", "-q", name)  # v1's ps lists stopped ones too
        containers = self.compose(*listed).split()
        if not containers:
            raise RuntimeError(f"{name}: no container in the compose project")
        _run([self.docker, "wait", *containers])
        return True

    def pause(self, name: str) -> None:
        self.compose("pause", name)

    def resume(self, name: str) -> None:
        self.compose("unpause", name)

    def restart(self, name: str) -> None:
        self.compose("restart", name)  # a running service restarts; a killed one starts

    def log_text(self, name: str) -> str:
        return self.compose("logs", "--no-color", "--no-log-prefix", name)

    def heal_all(self) -> list[str]:
        paused = self._services("paused")
        if paused:
            self.compose("unpause", *sorted(paused))
        done = [f"resumed {name}" for name in sorted(paused)]
        if not self.v1:
            self.compose("up", "-d", "--wait")
            return [*done, f"{self.cli_name} up -d --wait"]
        self.compose("up", "-d")
        self._wait_healthy()
        return [*done, f"{self.cli_name} up -d, and every service healthy"]

    def _wait_healthy(self) -> None:
        """What v2's `up --wait` waits for: every container of the project healthy (running, without a
        healthcheck); RuntimeError naming the others after UP_WAIT_TIMEOUT_S."""
        containers = self.compose("ps", "-q").split()
        deadline = time.monotonic() + UP_WAIT_TIMEOUT_S
        while containers:
            states = _run([self.docker, "inspect", "--format", HEALTH_FORMAT, *containers]).splitlines()
            waiting = [state for state in states if state.split()[-1] not in ("healthy", "running")]
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"after {self.cli_name} up -d, not healthy within {UP_WAIT_TIMEOUT_S:.0f} s: "
                                   + ", ".join(waiting))
            time.sleep(HEALTH_POLL_S)


def _run(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip()}")
    return done.stdout
