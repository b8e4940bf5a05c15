"""Real cluster processes for integration tests: `start_cluster(tmp_path, brokers=3, overrides) -> Cluster`.

A controller and N brokers run as a user runs them, through broker/launcher.py's code (the same that
`epoch-broker cluster` and `epoch-broker admin` use), on free loopback ports, with their data, logs and
cluster.json under tmp_path/cluster. Processes are signalled and stopped by the pids in cluster.json: only
those this harness started. Requests go through broker/admin.py's helpers and broker/client.py's KafkaClient.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from broker import admin, launcher
from broker.client import KafkaClient
from tests.helpers import REPO, free_port

T = TypeVar("T")


class Cluster:
    def __init__(self, directory: Path, processes: launcher.ClusterFile) -> None:
        self.directory = directory
        self.file = processes

    @property
    def bootstrap(self) -> str:
        return self.file.bootstrap

    @property
    def controller(self) -> str:
        return self.file.controller.address

    def broker(self, node: int) -> launcher.ProcessSpec:
        return self.file.process(node)

    def _reload(self) -> None:
        self.file = launcher.ClusterFile.read(self.directory)

    def kill(self, node: int, sig: signal.Signals = signal.SIGKILL) -> None:
        """Send `sig`; for SIGKILL and SIGTERM, return once the process has exited."""
        spec = self.broker(node)
        launcher.signal_process(spec, sig)
        if sig in (signal.SIGKILL, signal.SIGTERM) and not launcher.wait_exit(spec, launcher.STOP_TIMEOUT_S):
            raise TimeoutError(f"{spec.name} (pid {spec.pid}) still runs after {sig.name}")

    def pause(self, node: int) -> None:
        launcher.signal_process(self.broker(node), signal.SIGSTOP)

    def resume(self, node: int) -> None:
        launcher.signal_process(self.broker(node), signal.SIGCONT)

    def restart(self, node: int, hard: bool = False) -> launcher.ProcessSpec:
        """Stop (SIGKILL when `hard`) if running, start with the recorded argv, wait for its ready line."""
        launcher.restart_process(self.directory, node, hard)
        self._reload()
        return self.broker(node)

    def stop(self) -> None:
        self._reload()
        launcher.stop_cluster(self.file)

    def admin(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`epoch-broker admin --cluster DIR *args` as a user runs it."""
        return subprocess.run([sys.executable, "-m", "broker", "admin", "--cluster", str(self.directory), *args],
                              capture_output=True, text=True, timeout=60, cwd=REPO)

    async def elect(self, topic: str, partition: int, leader: int | None = None, unclean: bool = False) -> str:
        """"elected" or "not needed"; raises admin.AdminError on an error answer."""
        return await admin.elect(self.controller, topic, partition, -1 if leader is None else leader, unclean)

    async def set_fault(self, node: int, key: str, value: str) -> str:
        return await admin.alter_faults(self.broker(node).address, node, {key: value})

    @contextlib.asynccontextmanager
    async def client(self, node: int) -> AsyncIterator[KafkaClient]:
        """A KafkaClient to one node (broker or controller), versions negotiated."""
        async with await KafkaClient.connect(self.broker(node).address) as connected:
            await connected.negotiate()
            yield connected

    async def metadata(self) -> dict[tuple[str, int], admin.PartitionState]:
        """Leader, leader epoch, replicas and ISR of every partition, from the first running broker."""
        return (await admin.fetch_metadata(admin.running_brokers(self.file))).partitions

    def log_tails(self) -> str:
        return "\n".join(f"--- {spec.log} ---\n{launcher.log_tail(spec.log)}" for spec in self.file.processes)


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


def start_cluster(tmp_path: Path, brokers: int = 3, overrides: dict[str, Any] | None = None) -> Cluster:
    directory = Path(tmp_path) / "cluster"
    processes = launcher.plan_cluster(directory, brokers, free_port(), [free_port() for _ in range(brokers)],
                                      {key: str(value) for key, value in (overrides or {}).items()})
    launcher.start_cluster(processes, directory)
    return Cluster(directory, processes)
