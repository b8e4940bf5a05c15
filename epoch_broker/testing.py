"""Brokers and clusters for your tests, started in milliseconds: no JVM, no Docker, nothing else to install.

    from epoch_broker.testing import broker, cluster

    with broker() as b:                          # in this process, on its own thread and event loop
        b.create_topic("orders", partitions=3)
        Producer({"bootstrap.servers": b.bootstrap_servers})...

    with cluster(brokers=3) as c:                # a controller and three brokers, as processes
        c.create_topic("orders", partitions=3, replication_factor=3)
        c.kill(c.leader("orders", 0)); c.restart(...)

Both also work as `async with`. The pytest plugin (`epoch_broker.pytest_plugin`, loaded by the `pytest11` entry
point) wraps them as the fixtures `kafka_broker`, `kafka_broker_session` and `kafka_cluster`.

Rules:
- Config is given as Kafka's keys, or as keyword arguments with dots written as underscores
  (`broker(num_partitions=3)` is `num.partitions=3`); booleans become true/false.
- Test defaults, applied unless overridden: a group's first join does not wait (group.initial.rebalance.delay.ms
  0, as Kafka's shipped development config), a consumer-protocol or share group member heartbeats every 500 ms
  (group.consumer.heartbeat.interval.ms, group.share.heartbeat.interval.ms; Kafka's 5 s would make each
  rebalance step seconds long),
  `__consumer_offsets` has one partition on a lone broker, the
  fault hooks can be set (fault.hooks.enable), and a cluster fences, elects and shrinks ISRs within seconds
  (drill/launcher.py's DRILL_DEFAULTS).
- Ports are free loopback ports below the kernel's ephemeral range (an outgoing connection cannot take one
  between the pick and the bind); data goes to a temporary directory removed at the end, unless `data_dir` is
  given (then it is kept).
- Only processes started here are ever signalled, by the pids recorded when they were started.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import random
import resource
import selectors
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from epoch_broker.client.blocking import BlockingKafkaClient
from epoch_broker.drill import admin, launcher
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import create_topics, metadata

# what tests want: no join delay, one offsets and one transaction-state partition, and the fault hooks (cluster()
# has the launcher's)
BROKER_DEFAULTS = {"group.initial.rebalance.delay.ms": "0", "group.consumer.heartbeat.interval.ms": "500",
                   "group.share.heartbeat.interval.ms": "500", "offsets.topic.num.partitions": "1",
                   "transaction.state.log.num.partitions": "1", "fault.hooks.enable": "true"}
READY_TIMEOUT_S = 30.0
WAIT_TIMEOUT_S = 30.0
REQUEST_TIMEOUT_S = 10.0
PORT_RACE_RETRIES = 3
T = TypeVar("T")


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


LISTEN_PORTS = range(20000, min(_ephemeral_low(), 32768))
_random = random.Random()  # its own generator: a test that seeds `random` must not make tests share ports


def free_port() -> int:
    """A free loopback port below the kernel's ephemeral range: a port bound to 0 and released could be taken by
    any client's outgoing connection before the server binds it; below that range only another pick can
    collide, and a random pick among thousands, checked by a bind, makes that unlikely."""
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


def settings(config: dict[str, Any] | None, keywords: dict[str, Any]) -> dict[str, str]:
    """Kafka config keys and values as text, from a dict of real keys and keyword arguments (`_` for `.`)."""
    merged = {**(config or {}), **{key.replace("_", "."): value for key, value in keywords.items()}}
    return {key: str(value).lower() if isinstance(value, bool) else str(value) for key, value in merged.items()}


def wait_until(condition: Callable[[], T], what: str, timeout_s: float = WAIT_TIMEOUT_S) -> T:
    """Poll `condition` until it returns something truthy, and return that; TimeoutError naming `what`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(0.02)


class _Both:
    """`with` and `async with` for a handle whose start and stop block (async callers run them on a thread)."""

    def _start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self: Any) -> Any:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    async def __aenter__(self: Any) -> Any:
        return await asyncio.to_thread(self.__enter__)

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await asyncio.to_thread(self.stop)


def _request(bootstrap: str, api: Any, body: Any) -> Any:
    """Sent to the first bootstrap server that takes a connection (a cluster's first broker may be down)."""
    addresses = bootstrap.split(",")
    for address in addresses:
        try:
            client = BlockingKafkaClient.connect(address, "epoch-broker-testing", REQUEST_TIMEOUT_S)
        except ConnectionRefusedError:
            if address == addresses[-1]:
                raise
            continue
        with client:
            client.negotiate()
            return client.request(api, client.version_for(api), body)
    raise ValueError("no bootstrap servers")


def _create_topic(bootstrap: str, name: str, partitions: int, replication_factor: int,
                  config: dict[str, Any] | None) -> None:
    topic = create_topics.REQUEST.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication_factor,
        configs=[create_topics.REQUEST.CreatableTopicConfig(name=key, value=value)
                 for key, value in settings(config, {}).items()])
    answer = _request(bootstrap, create_topics.API, create_topics.REQUEST.cls(topics=[topic], timeout_ms=30000))
    found = answer.topics[0]
    if found.error_code != ErrorCode.NONE:
        raise RuntimeError(f"create topic {name}: {ErrorCode(found.error_code).name}: {found.error_message}")
    wait_until(lambda: _leaders(bootstrap, name, partitions), f"every partition of {name} led")


def _leaders(bootstrap: str, topic: str, partitions: int) -> bool:
    answer = _request(bootstrap, metadata.API, metadata.REQUEST.cls(
        topics=[metadata.REQUEST.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False))
    led = [p for t in answer.topics if t.name == topic for p in t.partitions if p.leader_id >= 0]
    return len(led) == partitions


class BrokerProcess:
    """`epoch-broker serve` as a subprocess, as a user runs it: its data in `tmp_path/data`, its log (stderr) in
    `tmp_path/broker-<node>.log`, on a free loopback port that stays the same across `restart()`. `start`
    returns once it printed its ready line (it then answers requests)."""

    def __init__(self, tmp_path: str | Path, overrides: dict[str, str], node_id: int = 0,
                 open_files_limit: int | None = None, program: str | None = None) -> None:
        self.tmp_path = Path(tmp_path)
        # an installed `epoch-broker` console script to run instead of this package (then with no PYTHONPATH:
        # only its own install answers)
        self.program = program
        self.open_files_limit = open_files_limit  # ulimit -n (soft and hard) of the process, when set
        self.node_id = node_id
        self.port = free_port()
        self.data_dir = self.tmp_path / "data"
        self.log_path = self.tmp_path / f"broker-{node_id}.log"
        self.overrides = {"node.id": str(node_id), "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                          "log.dirs": str(self.data_dir), "fault.hooks.enable": "true", **overrides}
        # metrics.listener on port 0 gets a port picked here, as the Kafka one: the kernel's pick would be known
        # only from the process's log, and change with every restart
        host, _, metrics_port = self.overrides.get("metrics.listener", "").rstrip("/").rpartition(":")
        if metrics_port.isdigit() and int(metrics_port) == 0:
            self.overrides["metrics.listener"] = f"{host}:{free_port()}"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        """http://host:port of its metrics.listener ("" without one)."""
        return self.overrides.get("metrics.listener", "")

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise RuntimeError("the broker is not running")
        return self.proc.pid

    def start(self) -> BrokerProcess:
        env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        if self.program is None:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, (launcher.SOURCE_ROOT, os.environ.get("PYTHONPATH"))))
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(launcher.serve_argv(self.overrides, self.program), stdout=subprocess.PIPE,
                                         stderr=log, stdin=subprocess.DEVNULL, cwd=self.tmp_path, env=env,
                                         preexec_fn=self._limit_open_files)
        self._wait_ready()
        return self

    def _limit_open_files(self) -> None:
        if self.open_files_limit is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files_limit, self.open_files_limit))

    def _wait_ready(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        # a selector, not select.select: a test process may hold descriptors past FD_SETSIZE (1024)
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if selector.select(0.1) and b"listening on" in self.proc.stdout.readline():
                    return
                if self.proc.poll() is not None:
                    status = self.proc.returncode
                    self._release()
                    raise RuntimeError(f"the broker exited with status {status}: "
                                       f"{launcher.log_tail(str(self.log_path), 3).strip()}")
        self.kill()
        raise TimeoutError(f"the broker was not ready within {READY_TIMEOUT_S:.0f} s; see {self.log_path}")

    def stop(self, timeout_s: float = 15.0) -> int:
        """SIGTERM (a clean shutdown) and wait; SIGKILL if it does not exit in time. Returns the exit status."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self._release()

    def kill(self) -> None:
        """SIGKILL: a crash, with no checkpoint and no clean-shutdown marker."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self._release()

    def _release(self) -> int:
        assert self.proc is not None
        status = self.proc.returncode
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None
        return status

    def restart(self) -> BrokerProcess:
        """A clean stop (if running), then a start on the same port and data dir."""
        self.stop()
        return self.start()


class Broker(_Both):
    """One broker (with its embedded controller), in this process or as a subprocess (`broker()` makes one)."""

    def __init__(self, *, in_process: bool, data_dir: str | Path | None, config: dict[str, str]) -> None:
        self.in_process = in_process
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir if data_dir is not None else tempfile.mkdtemp(prefix="epoch-broker-"))
        self.config = {**BROKER_DEFAULTS, **config}
        self.port = 0  # in process, the kernel's pick is read back once bound; a subprocess has its own
        self.listeners: dict[str, int] = {}  # in process: listener name -> its bound port
        self.server: Any = None  # in process: the running broker.app.Broker (its faults, config, logs)
        self.process: BrokerProcess | None = None  # as a subprocess
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def bootstrap_servers(self) -> str:
        """The first PLAINTEXT listener (the first listener if none is plaintext)."""
        return f"127.0.0.1:{self.port}"

    def address(self, listener: str) -> str:
        """host:port of a named listener (in process, with `listeners` in the config: TLS and SASL tests)."""
        return f"127.0.0.1:{self.listeners[listener.upper()]}"

    @property
    def metrics_url(self) -> str:
        """http://host:port of `/metrics`, `/` and `/api/status`, with `metrics.listener` in the config (port 0:
        in process, the kernel's pick; in a subprocess, a free port picked before its start, kept by a restart)."""
        if self.server is not None and self.server.status_server is not None:
            return self.server.status_server.url
        listener = self.process.metrics_url if self.process is not None else self.config.get("metrics.listener", "")
        assert listener and not listener.endswith(":0"), "metrics.listener is needed (port 0: known once started)"
        return listener

    @property
    def pid(self) -> int | None:
        """The subprocess's pid (None in process, or stopped)."""
        return None if self.process is None or self.process.proc is None else self.process.pid

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     config: dict[str, Any] | None = None) -> str:
        """Create a topic and wait until every partition has a leader; returns its name."""
        _create_topic(self.bootstrap_servers, name, partitions, replication_factor, config)
        return name

    def restart(self) -> None:
        """A clean stop and a start on the same port and data."""
        self._halt()
        self._start()

    def stop(self) -> None:
        """Stop it (cleanly) and remove the temporary data dir it made."""
        self._halt()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def _start(self) -> None:
        if not self.in_process:
            if self.process is None:
                self.process = BrokerProcess(self.data_dir, self.config)
            self.port = self.process.start().port
            return
        from epoch_broker.broker.app import Broker as Server
        from epoch_broker.broker.config import build_config

        # the caller's listeners (TLS, SASL; port 0 = a free one), else one PLAINTEXT listener
        config = {"node.id": "0", "log.dirs": str(self.data_dir / "data"),
                  "listeners": f"PLAINTEXT://127.0.0.1:{self.port}", **self.config}
        server = Server(build_config(list(config.items())))
        loop = _new_loop()
        ready: concurrent.futures.Future[Any] = concurrent.futures.Future()

        async def start() -> None:
            try:
                ready.set_result(await server.start())
            except BaseException as exc:  # reported to the starting thread, which stops the loop
                ready.set_exception(exc)

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.create_task(start())
            loop.run_forever()

        self.server, self._loop = server, loop
        self._thread = threading.Thread(target=run, name=f"epoch-broker-{id(self):x}", daemon=True)
        self._thread.start()
        ready.result(READY_TIMEOUT_S)
        bound = server.config.listeners
        self.listeners = {endpoint.listener: endpoint.port for endpoint in bound}
        plaintext = [e.port for e in bound if server.config.security_protocol(e.listener) == "PLAINTEXT"]
        self.port = (plaintext or [bound[0].port])[0]
        if "listeners" in self.config:  # a restart binds the same ports again
            self.config["listeners"] = ",".join(map(str, bound))

    def _halt(self) -> None:
        if self.process is not None:
            self.process.stop()
        if self._loop is not None and self._thread is not None:
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(READY_TIMEOUT_S)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(READY_TIMEOUT_S)
            self._loop.close()
            self._thread = self._loop = self.server = None


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def broker(*, in_process: bool = True, data_dir: str | Path | None = None, config: dict[str, Any] | None = None,
           **keywords: Any) -> Broker:
    """A broker to use in `with` or `async with`: started on entry, stopped (and its temporary data removed) on
    exit. `in_process=False` runs `epoch-broker serve` as a subprocess (a crash, a restart from disk)."""
    return Broker(in_process=in_process, data_dir=data_dir, config=settings(config, keywords))


class Cluster(_Both):
    """Controllers and N brokers as processes (drill/launcher.py's, as `epoch-broker cluster` runs them)."""

    def __init__(self, brokers: int, data_dir: str | Path | None, config: dict[str, str], metrics: bool = False,
                 controllers: int = 1, zookeeper: str = "") -> None:
        self._own_dir = data_dir is None
        self.metrics = metrics  # each process serves /metrics and its status page (ClusterFile's metrics_url)
        self.data_dir = Path(data_dir if data_dir is not None else tempfile.mkdtemp(prefix="epoch-cluster-"))
        self.brokers = brokers
        self.controllers = controllers
        self.zookeeper = zookeeper  # "" (the file store), "embedded" or a zookeeper.connect string
        self.config = config
        self.file: launcher.ClusterFile | None = None

    def _start(self) -> None:
        # The ports are checked free when picked, but another test may bind one before our process does: a
        # start that lost a port is retried on others (start_cluster has stopped what it started).
        for attempt in range(PORT_RACE_RETRIES + 1):
            base = launcher.free_base_port(self.brokers, LISTEN_PORTS, self.controllers, self.zookeeper == "embedded")
            plan = launcher.plan_cluster(self.data_dir, self.brokers, base + launcher.CONTROLLER_PORT_OFFSET,
                                         [base + i for i in range(self.brokers)], self.config, metrics=self.metrics,
                                         controllers=self.controllers, zookeeper=self.zookeeper)
            try:
                launcher.start_cluster(plan, self.data_dir)
            except launcher.LaunchError as exc:
                if "address already in use" not in str(exc).lower() or attempt == PORT_RACE_RETRIES:
                    raise
                continue
            self.file = plan
            return

    def stop(self) -> None:
        if self.file is not None:
            launcher.stop_cluster(launcher.ClusterFile.read(self.data_dir))
            self.file = None
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def _cluster_file(self) -> launcher.ClusterFile:
        return launcher.ClusterFile.read(self.data_dir)  # re-read: a restart records a new pid

    @property
    def bootstrap_servers(self) -> str:
        return self._cluster_file().bootstrap

    def address(self, node: int) -> str:
        return self._cluster_file().process(node).address

    def metrics_url(self, node: int) -> str:
        """http://host:port of the node's /metrics, status page and /api/status (the controller is node 1000)."""
        url = self._cluster_file().process(node).metrics_url
        assert url, "start the cluster with metrics=True"
        return url

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int | None = None,
                     config: dict[str, Any] | None = None) -> str:
        """Create a topic (replication factor: min(3, brokers) by default) and wait until every ISR is full."""
        replicas = min(3, self.brokers) if replication_factor is None else replication_factor
        _create_topic(self.bootstrap_servers, name, partitions, replicas, config)
        for partition in range(partitions):
            self.wait_for_isr(name, partition, replicas)
        return name

    def status(self) -> dict[tuple[str, int], admin.PartitionState]:
        """Leader, leader epoch, replicas and ISR of every partition, as the running brokers answer (the newest
        leader epoch wins: a broker whose metadata lags is not believed, KIP-232)."""
        found: dict[tuple[str, int], admin.PartitionState] = {}
        for address in admin.running_brokers(self._cluster_file()):
            with contextlib.suppress(admin.AdminError):
                answer = _run(admin.fetch_metadata([address], timeout_s=REQUEST_TIMEOUT_S))
                for key, state in answer.partitions.items():
                    if key not in found or state.leader_epoch > found[key].leader_epoch:
                        found[key] = state
        return found

    def state(self, topic: str, partition: int) -> admin.PartitionState | None:
        return self.status().get((topic, partition))

    def leader(self, topic: str, partition: int = 0, other_than: int | None = None) -> int:
        """The node id leading the partition; waits while it has none, or while `other_than` still leads (after
        killing a leader: `c.leader(topic, 0, other_than=old)` returns once the controller elected another)."""
        state = wait_until(lambda: (s := self.state(topic, partition)) is not None
                           and s.leader not in (-1, other_than) and s,
                           f"a leader for {topic}-{partition}" + ("" if other_than is None else f" but {other_than}"))
        assert state  # wait_until returns only a truthy value: the state, not False
        return state.leader

    def wait_for_isr(self, topic: str, partition: int, size: int, timeout_s: float = WAIT_TIMEOUT_S) -> None:
        wait_until(lambda: (s := self.state(topic, partition)) is not None and s.leader >= 0 and len(s.isr) == size,
                   f"{topic}-{partition} led with an ISR of {size}", timeout_s)

    def kill(self, node: int, sig: signal.Signals = signal.SIGKILL) -> None:
        """Send `sig` (SIGKILL: a crash); for SIGKILL and SIGTERM, return once the process has exited."""
        spec = self._cluster_file().process(node)
        launcher.signal_process(spec, sig)
        if sig in (signal.SIGKILL, signal.SIGTERM) and not launcher.wait_exit(spec, launcher.STOP_TIMEOUT_S):
            raise TimeoutError(f"{spec.name} (pid {spec.pid}) still runs after {sig.name}")

    def pause(self, node: int) -> None:
        launcher.signal_process(self._cluster_file().process(node), signal.SIGSTOP)

    def resume(self, node: int) -> None:
        launcher.signal_process(self._cluster_file().process(node), signal.SIGCONT)

    def restart(self, node: int, hard: bool = False) -> launcher.ProcessSpec:
        """Stop it (SIGKILL when `hard`, else cleanly) if it runs, start it again, wait until it is ready; returns
        its process (its new pid)."""
        return launcher.restart_process(self.data_dir, node, hard)

    def controller_address(self) -> str:
        """host:port of the active controller (with several in ZooKeeper, the one not answering NOT_CONTROLLER)."""
        return _run(admin.active_controller(self._cluster_file()))

    def elect(self, topic: str, partition: int, leader: int | None = None, unclean: bool = False) -> str:
        """"elected" or "not needed"; admin.AdminError for an error answer."""
        return _run(admin.elect(self.controller_address(), topic, partition,
                                       -1 if leader is None else leader, unclean))

    def fault(self, node: int, key: str, value: str | None) -> str:
        """Set (or with None clear) a fault hook of the catalogue (broker/faults.py) on one node."""
        address = self.address(node)
        settings_ = {} if value is None else {key: value}
        return _run(admin.alter_faults(address, node, settings_, [key] if value is None else []))


def cluster(brokers: int = 3, *, data_dir: str | Path | None = None, config: dict[str, Any] | None = None,
            metrics: bool = False, controllers: int = 1, zookeeper: str = "", **keywords: Any) -> Cluster:
    """A cluster to use in `with` or `async with`: a controller and `brokers` brokers started on entry,
    stopped on exit (its temporary data removed). `metrics`: each process serves /metrics and its status page
    (`metrics_url(node)`); off by default, as it adds to every process's start. `zookeeper` ("embedded": a
    ZooKeeper process started with the cluster, from Debian's package; or a zookeeper.connect string) keeps the
    controllers' metadata in ZooKeeper, where `controllers` of them (nodes 1000, 1001, ...) elect one."""
    if not 1 <= brokers <= 9:
        raise ValueError(f"brokers must be between 1 and 9, not {brokers}")
    return Cluster(brokers, data_dir, settings(config, keywords), metrics, controllers, zookeeper)


def _run(work: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, also when the caller's thread runs an event loop (an
    asyncio test calling these sync methods): then on a thread of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()


def unique_name(prefix: str = "topic") -> str:
    return f"{prefix}-{os.urandom(5).hex()}"


__all__ = ["Broker", "Cluster", "broker", "cluster", "free_port", "unique_name", "wait_until"]
