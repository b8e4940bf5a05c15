"""Start a real broker process for a test: `start_broker(tmp_path, overrides, node_id) -> BrokerProcess`.

The broker runs as a user runs it (`python -m epoch_broker serve --override ...`) with its data in `tmp_path/data`
and its log in `tmp_path/broker-<node>.log`, on a free loopback port that stays the same across `restart()`.
Start returns once the broker printed its ready line (it then answers requests).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import random
import resource
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from epoch_broker.drill import launcher

REPO = Path(__file__).resolve().parents[1]
READY_TIMEOUT_S = 30.0


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


LISTEN_PORTS = range(20000, min(_ephemeral_low(), 32768))
_random = random.Random()  # its own generator: a test that seeds `random` must not make tests share ports


def free_port() -> int:
    """A free loopback port for a server a test starts, below the kernel's ephemeral range: a port bound to 0
    and released could be taken by any client's outgoing connection before the server binds it (seen: a
    broker of a cluster test exiting with "address already in use"); below that range only another
    test's pick can collide, and a random pick among thousands makes that unlikely, checked by a bind."""
    for _ in range(100):
        port = _random.choice(LISTEN_PORTS)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:  # a crowded range: the kernel's choice
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def free_base_port(brokers: int) -> int:
    """A base port for a cluster's brokers (base+i) and controller, below the kernel's ephemeral range (as
    free_port: no client's outgoing connection can take one meanwhile)."""
    return launcher.free_base_port(brokers, LISTEN_PORTS)


class BrokerProcess:
    def __init__(self, tmp_path: Path, overrides: dict[str, str], node_id: int,
                 open_files_limit: int | None = None) -> None:
        self.tmp_path = Path(tmp_path)
        self.open_files_limit = open_files_limit  # ulimit -n (soft and hard) of the process, when set
        self.node_id = node_id
        self.port = free_port()
        self.data_dir = self.tmp_path / "data"
        self.log_path = self.tmp_path / f"broker-{node_id}.log"
        self.overrides = {
            "node.id": str(node_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.data_dir),
            **overrides,
        }
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "broker is not running"
        return self.proc.pid

    def start(self) -> BrokerProcess:
        command = [sys.executable, "-m", "epoch_broker", "serve"]
        for key, value in self.overrides.items():
            command += ["--override", f"{key}={value}"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                                         cwd=self.tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
                                         preexec_fn=self._limit_open_files)
        self._wait_ready()
        return self

    def _limit_open_files(self) -> None:
        if self.open_files_limit is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files_limit, self.open_files_limit))

    def _wait_ready(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            readable, _, _ = select.select([self.proc.stdout], [], [], 0.1)
            if readable:
                line = self.proc.stdout.readline().decode()
                if "listening on" in line:
                    return
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}; see {self.log_path}")
        self.kill()
        raise TimeoutError(f"broker not ready after {READY_TIMEOUT_S} s; see {self.log_path}")

    def stop(self, timeout_s: float = 15.0) -> int:
        """SIGTERM (clean shutdown) and wait; SIGKILL if it does not exit in time. Returns the exit status."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        status = self.proc.returncode
        self.proc = None
        return status

    def kill(self) -> None:
        """SIGKILL: a crash, with no checkpoint and no clean-shutdown marker."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def restart(self) -> BrokerProcess:
        """Clean stop (if running), then start again on the same port and data dir."""
        self.stop()
        return self.start()


def start_broker(tmp_path: Path, overrides: dict[str, str] | None = None, node_id: int = 0,
                 open_files_limit: int | None = None) -> BrokerProcess:
    return BrokerProcess(tmp_path, overrides or {}, node_id, open_files_limit).start()


T = TypeVar("T")


async def wait_for(predicate: Callable[[], T | Awaitable[T]], timeout: float = 10.0, interval: float = 0.05,
                   what: str = "condition") -> T:
    """Poll `predicate` (plain or async) until it returns something truthy, and return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not reached within {timeout} s (last: {value!r})")
        await asyncio.sleep(interval)
