"""`epoch-broker cluster`: controllers and N brokers as separate processes, and the process bookkeeping
that the admin CLI, the cluster tests and the cluster benchmark share (docs/cluster.md, "Launcher").

- One controller with its metadata in its data dir (the file store), or with `--zookeeper HOST:PORT` (or
  `embedded`: a ZooKeeper process started here, from Debian's package, on a free loopback port, its data in the
  data dir) `--controllers N` of them sharing the store in ZooKeeper, one active (broker/controller/quorum.py);
  the brokers are given the list.

- A process is a `ProcessSpec`: its identity (name, node id, role, address, data dir, log) and the exact argv
  that starts it, so any tool can restart it later. `cluster.json` (`ClusterFile`) records them with their
  pids; it is written atomically (tmp, fsync, rename) because the admin CLI rewrites it on restart while
  other tools read it.
- Every process is `python -m epoch_broker serve --override ...` in its own session (Ctrl-C in the launcher's
  terminal reaches only the launcher, which then stops brokers before the controller), with stdout and
  stderr appended to DIR/<name>.log. It is ready once its ready line appears in that log: a file, not a
  pipe, so a process restarted by a short-lived admin command does not write into a closed pipe later.
- Processes are stopped and signalled by pid. A pid is trusted only while /proc says it runs the recorded
  argv (pids are reused); a child of this process is also reaped, so it never lingers as a zombie.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from epoch_broker.broker.config import CLUSTER_SECRET_ENV, ConfigError, load_config
from epoch_broker.drill.zookeeper import ZooKeeperError, ZooKeeperServer, four_letter_word

CONTROLLER_NODE_ID = 1000  # controller i is node 1000 + i
ZOOKEEPER_NODE_ID = 2000  # an embedded ZooKeeper, in cluster.json (admin kill/restart name it by this id)
CONTROLLER_PORT_OFFSET = 100  # controller i listens on base + 100 + 2i (its CONTROLLER listener on the next)
MAX_CONTROLLERS = 9
ZOOKEEPER_SESSION_TIMEOUT_MS = "4000"  # a drill's controller failover in seconds (Kafka's default is 18000)
METRICS_PORT_OFFSET = 200  # each process's metrics.listener (/metrics, the status page): its port + 200
CLUSTER_FILE = "cluster.json"
# The children run the same code as this process, installed or not (`python -m epoch_broker` from a checkout).
SOURCE_ROOT = str(Path(__file__).resolve().parents[1])
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
LOG_TAIL_LINES = 20

# Short timings so that a drill on one machine sees fencing and ISR changes within seconds (Kafka's defaults
# are tuned for real networks). Applied unless the user overrides them.
DRILL_DEFAULTS = {
    "broker.heartbeat.interval.ms": "200",
    "broker.session.timeout.ms": "1500",
    "replica.lag.time.max.ms": "2000",
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.heartbeat.interval.ms": "500",  # consumer-protocol rebalances in steps of 0.5 s, not 5 s
    "fault.hooks.enable": "true",  # a drill cluster's faults are its purpose; `--no-fault-hooks` turns them off
}
# Keys the launcher sets per process; a cluster-wide override of one of them would break the layout.
PER_PROCESS_KEYS = ("node.id", "broker.id", "process.roles", "listeners", "log.dirs", "log.dir",
                    "controller.address", "controller.quorum.voters", "cluster.secret", "advertised.listeners",
                    "controller.listener.names", "inter.broker.listener.name", "metrics.listener",
                    "zookeeper.connect")
# The listeners' protocols: the clients' PLAINTEXT, and the cluster's own SASL listeners (the secret's login).
INTERNAL_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT"

Progress = Callable[[str], None]


class LaunchError(RuntimeError):
    """A process did not start (the message names it and ends with its log's tail)."""


@dataclass(slots=True)
class ProcessSpec:
    name: str
    node_id: int
    role: str  # "controller", "broker" or "zookeeper" (an embedded one)
    host: str
    port: int
    data_dir: str
    log: str
    argv: list[str]
    pid: int = 0
    metrics_url: str = ""  # its metrics.listener: /metrics, the status page at /, /api/status

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(slots=True)
class ClusterFile:
    bootstrap: str
    processes: list[ProcessSpec]
    secret: str = ""  # cluster.secret, given to the processes in their environment; the file is the owner's only

    @property
    def controller(self) -> ProcessSpec:
        """The first controller (the only one, with the file store)."""
        return self.controllers[0]

    @property
    def controllers(self) -> list[ProcessSpec]:
        return [p for p in self.processes if p.role == "controller"]

    @property
    def zookeeper(self) -> ProcessSpec | None:
        """The embedded ZooKeeper, if the launcher started one."""
        return next((p for p in self.processes if p.role == "zookeeper"), None)

    @property
    def brokers(self) -> list[ProcessSpec]:
        return [p for p in self.processes if p.role == "broker"]

    def process(self, node_id: int) -> ProcessSpec:
        for spec in self.processes:
            if spec.node_id == node_id:
                return spec
        known = ", ".join(str(p.node_id) for p in self.processes)
        raise KeyError(f"no node {node_id} in the cluster (nodes: {known})")

    def write(self, directory: str | Path) -> Path:
        path = Path(directory) / CLUSTER_FILE
        tmp = path.with_name(path.name + ".tmp")
        # readable by its owner only: it holds the cluster's secret
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as f:
            json.dump({"bootstrap": self.bootstrap, "processes": [asdict(p) for p in self.processes],
                       "secret": self.secret}, f, indent=2)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # the rename itself survives a crash
        finally:
            os.close(dir_fd)
        return path

    @classmethod
    def read(cls, directory: str | Path) -> ClusterFile:
        path = Path(directory) / CLUSTER_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(data["bootstrap"], [ProcessSpec(**p) for p in data["processes"]], data.get("secret", ""))
        except FileNotFoundError:
            raise FileNotFoundError(f"no {CLUSTER_FILE} in {directory} (start a cluster with "
                                    "`epoch-broker cluster`)") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path} is not a cluster file: {exc}") from None


def free_base_port(brokers: int, ports: range, controllers: int = 1, zookeeper: bool = False) -> int:
    """A base port in `ports` whose broker ports (base+i), controller ports (base+CONTROLLER_PORT_OFFSET+2i and
    the next, its CONTROLLER listener), an embedded ZooKeeper's (after the controllers') and the metrics ports
    (+METRICS_PORT_OFFSET) are all free, checked by binding each on loopback."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(ports.start, ports.stop - CONTROLLER_PORT_OFFSET - METRICS_PORT_OFFSET - 2 * controllers)
        controller_ports = [base + CONTROLLER_PORT_OFFSET + 2 * i for i in range(controllers)]
        served = [base + i for i in range(brokers)] + controller_ports
        others = [p + 1 for p in controller_ports] + ([controller_ports[-1] + 2] if zookeeper else [])
        try:
            for port in [*served, *others, *(p + METRICS_PORT_OFFSET for p in served)]:
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise LaunchError(f"no free loopback ports for {brokers} brokers and {controllers} controller(s) in {ports}")


def serve_argv(overrides: dict[str, str], program: str | None = None) -> list[str]:
    """`serve` with `overrides`, run by this interpreter, or by `program` (an installed console script)."""
    argv = [program, "serve"] if program else [sys.executable, "-m", "epoch_broker", "serve"]
    for key, value in overrides.items():
        argv += ["--override", f"{key}={value}"]
    return argv


def plan_cluster(data_dir: str | Path, brokers: int, controller_port: int, broker_ports: list[int],
                 overrides: dict[str, str] | None = None, host: str = "127.0.0.1", metrics: bool = True,
                 controllers: int = 1, zookeeper: str = "") -> ClusterFile:
    """The processes of a cluster (not started): an embedded ZooKeeper if `zookeeper` is "embedded", the
    controllers (node 1000 + i on controller_port + 2i), then brokers 0..N-1, and a new secret. `zookeeper`
    (host:port[,...][/chroot], or "embedded" on the port after the controllers') gives every controller the
    store in ZooKeeper; several controllers need it.

    Every process has a PLAINTEXT listener on its port (clients, the admin CLI) and a SASL listener for the
    cluster's own traffic, which the brokers and the controller log in to with the secret: the controller's
    CONTROLLER listener on controller_port+1 (what brokers register and heartbeat on), each broker's INTERNAL
    listener on a port the kernel picks (registered, so replicas find it). Only that login may send what
    brokers send (registrations, heartbeats, AlterPartition, replica fetches); `listener.security.protocol.map`
    may be overridden to put TLS or other SASL logins on any of them. With `metrics`, each process serves its
    metrics and status page on its port + METRICS_PORT_OFFSET (recorded in cluster.json)."""
    if len(broker_ports) != brokers:
        raise ValueError(f"{brokers} brokers need {brokers} ports, got {len(broker_ports)}")
    if not 1 <= controllers <= MAX_CONTROLLERS:
        raise ValueError(f"--controllers must be between 1 and {MAX_CONTROLLERS}")
    if controllers > 1 and not zookeeper:
        raise ValueError("several controllers share their metadata in ZooKeeper: give --zookeeper HOST:PORT "
                         "(or embedded)")
    data = Path(data_dir).resolve()
    replication = str(min(3, brokers))
    in_zookeeper = {"zookeeper.session.timeout.ms": ZOOKEEPER_SESSION_TIMEOUT_MS} if zookeeper else {}
    common = {**DRILL_DEFAULTS, **in_zookeeper, "default.replication.factor": replication,
              "offsets.topic.replication.factor": replication,
              "transaction.state.log.replication.factor": replication, **(overrides or {})}
    fixed = [key for key in PER_PROCESS_KEYS if key in common]
    if fixed:
        raise ConfigError(f"--override {fixed[0]} is set per process by the launcher")

    common = {"listener.security.protocol.map": INTERNAL_PROTOCOL_MAP, "controller.listener.names": "CONTROLLER",
              "inter.broker.listener.name": "INTERNAL", **common}

    def spec(name: str, node_id: int, role: str, port: int, internal: str, extra: dict[str, str]) -> ProcessSpec:
        process_data = data / name
        settings = {**common, "process.roles": role, "node.id": str(node_id),
                    "listeners": f"PLAINTEXT://{host}:{port},{internal}", "log.dirs": str(process_data), **extra}
        metrics_url = f"http://{host}:{port + METRICS_PORT_OFFSET}" if metrics else ""
        if metrics_url:
            settings["metrics.listener"] = metrics_url
        return ProcessSpec(name, node_id, role, host, port, str(process_data), str(data / f"{name}.log"),
                           serve_argv(settings), metrics_url=metrics_url)

    processes: list[ProcessSpec] = []
    if zookeeper == "embedded":
        server = ZooKeeperServer(data / "zookeeper", controller_port + 2 * controllers, host)
        processes.append(ProcessSpec("zookeeper", ZOOKEEPER_NODE_ID, "zookeeper", host, server.port,
                                     str(server.data_dir), str(server.log_path), server.configure()))
        zookeeper = server.connect
    stored = {"zookeeper.connect": zookeeper} if zookeeper else {}
    ports = [controller_port + 2 * i for i in range(controllers)]
    processes += [spec("controller" if controllers == 1 else f"controller-{i}", CONTROLLER_NODE_ID + i, "controller",
                       port, f"CONTROLLER://{host}:{port + 1}", stored) for i, port in enumerate(ports)]
    voters = ",".join(f"{host}:{port + 1}" for port in ports)
    processes += [spec(f"broker-{i}", i, "broker", port, f"INTERNAL://{host}:0", {"controller.address": voters})
                  for i, port in enumerate(broker_ports)]
    bootstrap = ",".join(p.address for p in processes if p.role == "broker")
    return ClusterFile(bootstrap, processes, secrets.token_urlsafe(32))


# --- one process ------------------------------------------------------------------------------------------

_children: dict[int, subprocess.Popen[bytes]] = {}  # processes started here, by pid: waited on, never zombies
_HAVE_PROC = os.path.isdir("/proc/self")


def _proc_state(pid: int) -> str | None:
    """The state letter of /proc/<pid>/stat (R, S, T, Z, ...), "" when unknown (no /proc), None if no process."""
    if not _HAVE_PROC:
        return ""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0].decode()
    except FileNotFoundError:
        return None


def _cmdline(pid: int) -> list[str] | None:
    """The argv of a live process, [] when unknown (no /proc), None when it is not running (or a zombie)."""
    if _proc_state(pid) in (None, "Z"):
        return None
    if not _HAVE_PROC:
        return []
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [part.decode(errors="replace") for part in f.read().split(b"\0")[:-1]]
    except FileNotFoundError:
        return None


def _reap(pid: int) -> bool:
    """True once `pid` has exited (and is reaped, when it is a child of this process)."""
    child = _children.get(pid)
    if child is not None:
        if child.poll() is None:
            return False
        del _children[pid]
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return _cmdline(pid) is None


def is_running(spec: ProcessSpec) -> bool:
    """The recorded pid is alive and still runs this spec's argv (not a reused pid)."""
    if spec.pid <= 0 or _reap(spec.pid):
        return False
    argv = _cmdline(spec.pid)
    return argv == [] or argv == spec.argv


def process_state(spec: ProcessSpec) -> str:
    """"running", "paused" (SIGSTOP) or "dead"."""
    if not is_running(spec):
        return "dead"
    return "paused" if _proc_state(spec.pid) in ("T", "t") else "running"


def signal_process(spec: ProcessSpec, sig: signal.Signals) -> None:
    if not is_running(spec):
        raise ProcessLookupError(f"{spec.name} (pid {spec.pid}) is not running")
    os.kill(spec.pid, sig)


def wait_exit(spec: ProcessSpec, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not _reap(spec.pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def stop_process(spec: ProcessSpec, timeout_s: float = STOP_TIMEOUT_S, hard: bool = False) -> str:
    """SIGTERM and wait (SIGKILL after `timeout_s`), or SIGKILL at once when `hard`. Returns what happened."""
    if not is_running(spec):
        return "not running"
    with contextlib.suppress(ProcessLookupError):  # it may exit on its own meanwhile
        if not hard:
            os.kill(spec.pid, signal.SIGTERM)
            os.kill(spec.pid, signal.SIGCONT)  # a paused process must run to act on SIGTERM
            if wait_exit(spec, timeout_s):
                return "stopped"
        os.kill(spec.pid, signal.SIGKILL)
    wait_exit(spec, timeout_s)
    return "killed"


def log_tail(path: str, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 64 * 1024))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def launch_process(spec: ProcessSpec, secret: str = "") -> int:
    """Start the process (not waiting for it), with the cluster's secret in its environment (never in argv,
    which `ps` shows to every user); returns the log offset its ready line will come after."""
    Path(spec.data_dir).mkdir(parents=True, exist_ok=True)
    with open(spec.log, "ab") as log:
        offset = log.tell()
        python_path = os.pathsep.join(filter(None, (SOURCE_ROOT, os.environ.get("PYTHONPATH"))))
        proc = subprocess.Popen(spec.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True, cwd=Path(spec.data_dir).parent,
                                env={**os.environ, "PYTHONPATH": python_path,
                                     **({CLUSTER_SECRET_ENV: secret} if secret else {})})
    _children[proc.pid] = proc
    spec.pid = proc.pid
    return offset


def _serves_zookeeper(spec: ProcessSpec) -> bool:
    try:
        return "Mode:" in four_letter_word(spec.host, spec.port, "srvr")
    except OSError:
        return False


def wait_ready(spec: ProcessSpec, log_offset: int, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Return once the process printed its ready line (ZooKeeper: answers `srvr` with its mode); raise
    LaunchError (having killed it) otherwise."""
    ready = f"epoch-broker: node {spec.node_id} listening on".encode()
    deadline = time.monotonic() + timeout_s
    with open(spec.log, "rb") as log:
        log.seek(log_offset)
        seen = b""
        while True:
            seen += log.read()
            if ready in seen or (spec.role == "zookeeper" and _serves_zookeeper(spec)):
                return
            if _reap(spec.pid):
                problem = "exited before it was ready"
                break
            if time.monotonic() >= deadline:
                stop_process(spec, hard=True)
                problem = f"was not ready after {timeout_s:.0f} s (killed)"
                break
            time.sleep(0.005)
    raise LaunchError(f"{spec.name} {problem}; the end of {spec.log}:\n{log_tail(spec.log)}")


def start_process(spec: ProcessSpec, secret: str = "", timeout_s: float = READY_TIMEOUT_S) -> None:
    wait_ready(spec, launch_process(spec, secret), timeout_s)


# --- a cluster --------------------------------------------------------------------------------------------

def _quiet(_: str) -> None:
    pass


def start_cluster(cluster: ClusterFile, directory: str | Path, progress: Progress = _quiet,
                  timeout_s: float = READY_TIMEOUT_S) -> Path:
    """Start the embedded ZooKeeper if any, then the first controller (it becomes the active one), then the other
    controllers and every broker (launched together, each awaited); write cluster.json.

    On any failure the processes already started are stopped and LaunchError is raised."""
    Path(directory).mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        first = [*([cluster.zookeeper] if cluster.zookeeper else []), cluster.controller]
        for spec in first:
            progress(f"starting {spec.name} (node {spec.node_id}) on {spec.address}")
            start_process(spec, cluster.secret, timeout_s)
            progress(f"{spec.name} ready (pid {spec.pid}, {time.monotonic() - started:.1f} s)")
        rest = [spec for spec in cluster.processes if spec not in first]
        offsets = []
        for spec in rest:
            progress(f"starting {spec.name} (node {spec.node_id}) on {spec.address}")
            offsets.append(launch_process(spec, cluster.secret))
        for spec, offset in zip(rest, offsets, strict=True):
            wait_ready(spec, offset, timeout_s)
            progress(f"{spec.name} ready (pid {spec.pid}, {time.monotonic() - started:.1f} s)")
        return cluster.write(directory)
    except BaseException:
        stop_cluster(cluster)
        raise


def stop_cluster(cluster: ClusterFile, progress: Progress = _quiet, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Brokers first (together: each shuts down cleanly through the controller), then the controllers, then an
    embedded ZooKeeper."""
    for group in (cluster.brokers, cluster.controllers, [cluster.zookeeper] if cluster.zookeeper else []):
        if not group:
            continue
        with ThreadPoolExecutor(len(group)) as pool:
            outcomes = list(pool.map(lambda spec: stop_process(spec, timeout_s), group))
        for spec, outcome in zip(group, outcomes, strict=True):
            progress(f"{spec.name} (pid {spec.pid}): {outcome}")


def restart_process(directory: str | Path, node_id: int, hard: bool = False, progress: Progress = _quiet,
                    timeout_s: float = READY_TIMEOUT_S) -> ProcessSpec:
    """Stop a node of the cluster in `directory` (if running), start it with its recorded argv, record its pid."""
    recorded = ClusterFile.read(directory)
    spec = recorded.process(node_id)
    progress(f"{spec.name} (pid {spec.pid}): {stop_process(spec, hard=hard)}")
    start_process(spec, recorded.secret, timeout_s)
    progress(f"{spec.name} ready again (pid {spec.pid})")
    cluster = ClusterFile.read(directory)  # re-read: another tool may have changed another process meanwhile
    cluster.process(node_id).pid = spec.pid
    cluster.write(directory)
    return spec


# --- the `cluster` command --------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    parser.add_argument("--controllers", type=int, default=1,
                        help="number of controllers, one active (default 1; more need --zookeeper)")
    parser.add_argument("--zookeeper", default="", metavar="HOST:PORT|embedded",
                        help="keep the controllers' metadata in this ZooKeeper (zookeeper.connect, with an optional "
                             "/chroot), or in one started here from Debian's zookeeper package (embedded)")
    parser.add_argument("--data-dir", default="cluster-data", help="data, logs and cluster.json (./cluster-data)")
    parser.add_argument("--base-port", type=int, default=9092,
                        help="broker i listens on base+i, controller i on base+100+2i (an embedded ZooKeeper "
                             "after them), their metrics and status pages on those ports + 200 (default 9092)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a config key for every process (repeatable)")
    parser.add_argument("--no-fault-hooks", action="store_true",
                        help="leave the fault hooks off (fault.hooks.enable=false): no client can set them")


def run(args: argparse.Namespace) -> int:
    def say(message: str) -> None:
        print(f"epoch-broker cluster: {message}", flush=True)

    if not 1 <= args.brokers <= 99:
        say("--brokers must be between 1 and 99")
        return 2
    if not 1 <= args.base_port <= 65535 - CONTROLLER_PORT_OFFSET - METRICS_PORT_OFFSET:
        say(f"--base-port must be between 1 and {65535 - CONTROLLER_PORT_OFFSET - METRICS_PORT_OFFSET}")
        return 2
    try:
        load_config(None, args.override)  # one line naming a bad key before anything starts
        overrides = {key.strip(): value.strip() for key, _, value in (o.partition("=") for o in args.override)}
        if args.no_fault_hooks:
            overrides["fault.hooks.enable"] = "false"
        cluster = plan_cluster(args.data_dir, args.brokers, args.base_port + CONTROLLER_PORT_OFFSET,
                               [args.base_port + i for i in range(args.brokers)], overrides,
                               controllers=args.controllers, zookeeper=args.zookeeper)
    except (ConfigError, ValueError, ZooKeeperError) as exc:
        say(str(exc))
        return 2
    with contextlib.suppress(FileNotFoundError, ValueError):
        running = [p for p in ClusterFile.read(args.data_dir).processes if is_running(p)]
        if running:
            say(f"a cluster already runs from {args.data_dir} ({', '.join(f'{p.name} pid {p.pid}' for p in running)})")
            return 1

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    try:
        path = start_cluster(cluster, args.data_dir, say)
    except (LaunchError, OSError) as exc:
        say(f"failed: {exc}")
        return 1
    say(f"wrote {path}")
    say(f"bootstrap servers: {cluster.bootstrap}")
    say("status pages: " + ", ".join(f"{p.name} {p.metrics_url}/" for p in cluster.processes if p.metrics_url))
    say("running; Ctrl-C stops it")
    _watch(args.data_dir, stop, say)
    say("stopping")
    # cluster.json, not the plan: `admin restart` may have replaced a process since
    stop_cluster(ClusterFile.read(args.data_dir), say)
    return 0


def _watch(directory: str, stop: threading.Event, say: Progress) -> None:
    """Until stopped, report processes that die (drills kill them on purpose, so the cluster stays up)."""
    reported: set[tuple[str, int]] = set()
    while not stop.wait(0.5):
        with contextlib.suppress(FileNotFoundError, ValueError):
            for spec in ClusterFile.read(directory).processes:
                if (spec.name, spec.pid) not in reported and not is_running(spec):
                    reported.add((spec.name, spec.pid))
                    say(f"{spec.name} (pid {spec.pid}) is not running; see {spec.log}")
