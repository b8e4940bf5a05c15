"""A ZooKeeper server process for clusters whose controllers keep their state in ZooKeeper (issue 13): the
launcher's `--zookeeper embedded`, and the tests' real ZooKeeper.

It runs Debian's `zookeeper` package (ZooKeeper 3.8 on Java 17) on loopback: a `zoo.cfg` in its data dir, the
server's output in `zookeeper.log` there, ready once the `srvr` four-letter word answers with its mode. One
server alone (`ZooKeeperServer`), or an ensemble of them (`ZooKeeperEnsemble`: each with its `myid`, the
`server.N` lines of all, and three ports: clients, followers, elections).

Rules:
- A short tick (`tick_ms`, default 500) so that sessions of about a second can be asked for (a drill's failover
  is measured in session timeouts); `minSessionTimeout` follows it.
- Its admin HTTP server is off (it would take port 8080) and only the `ruok`, `srvr`, `stat`, `mntr` and `conf`
  four-letter words answer.
- A start that cannot find Java or the package's jars says which is missing; a server that does not answer in
  time is stopped and its log's tail is in the error. It is stopped by its pid, started here.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

JARS_DIR = Path("/usr/share/java")
JARS = ("zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar", "slf4j-log4j12.jar", "log4j-1.2.jar")
MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
QUORUM_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
HEAP_FLAGS = ("-Xms32m", "-Xmx64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")  # about 60 MB of RSS
READY_TIMEOUT_S = 30.0
LOG4J = """log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File={log}
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{{ISO8601}} %-5p %c{{1}}: %m%n
"""


class ZooKeeperError(RuntimeError):
    """ZooKeeper could not be started (the message says why)."""


def four_letter_word(host: str, port: int, word: str, timeout_s: float = 2.0) -> str:
    """The server's answer to a four-letter word (`ruok`, `srvr`, ...); raises OSError if it cannot answer."""
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(word.encode())
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperServer:
    """One ZooKeeper server on `host`:`port`, its data in `data_dir`: standalone, or member `my_id` of the
    ensemble whose `server.N=host:peer:election` lines are `servers`."""

    def __init__(self, data_dir: str | Path, port: int, host: str = "127.0.0.1", tick_ms: int = 500,
                 my_id: int = 0, servers: tuple[str, ...] = ()) -> None:
        self.data_dir = Path(data_dir)
        self.host, self.port, self.tick_ms = host, port, tick_ms
        self.my_id, self.servers = my_id, servers
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        """The `zookeeper.connect` string for it."""
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "zookeeper.log"

    def configure(self) -> list[str]:
        """Write its zoo.cfg and log4j settings; returns the argv that runs it."""
        java = shutil.which("java")
        missing = [name for name in JARS if not (JARS_DIR / name).is_file()]
        if java is None or missing:
            raise ZooKeeperError("ZooKeeper needs Debian's zookeeper package and Java (apt-get install zookeeper "
                                 f"libslf4j-java): {'no java' if java is None else 'missing ' + ', '.join(missing)}")
        conf = self.data_dir / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "data").mkdir(exist_ok=True)
        if self.servers:
            (self.data_dir / "data" / "myid").write_text(f"{self.my_id}\n")
        # a Java properties file: no comment after a value on its line
        (conf / "zoo.cfg").write_text("\n".join([
            f"tickTime={self.tick_ms}", f"dataDir={self.data_dir / 'data'}", f"clientPort={self.port}",
            f"clientPortAddress={self.host}", "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr,stat,mntr,conf", f"minSessionTimeout={2 * self.tick_ms}",
            "initLimit=10", "syncLimit=5", *self.servers, ""]))
        (conf / "log4j.properties").write_text(LOG4J.format(log=self.log_path))
        classpath = ":".join([str(conf), *(str(JARS_DIR / name) for name in JARS)])
        return [java, *HEAP_FLAGS, "-cp", classpath, QUORUM_MAIN if self.servers else MAIN, str(conf / "zoo.cfg")]

    def launch(self) -> None:
        """Start the process without waiting (an ensemble's members wait for each other)."""
        argv = self.configure()
        with open(self.data_dir / "zookeeper.out", "ab") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)

    def mode(self) -> str:
        """standalone, leader or follower; empty while it does not serve."""
        try:
            answer = four_letter_word(self.host, self.port, "srvr")
        except OSError:
            return ""
        return next((line.split(":", 1)[1].strip() for line in answer.splitlines() if line.startswith("Mode:")), "")

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> ZooKeeperServer:
        """Start the server and return once it serves."""
        self.launch()
        return self.wait_ready(timeout_s)

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> ZooKeeperServer:
        assert self.proc is not None, "not launched"
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise ZooKeeperError(f"ZooKeeper on {self.connect} exited with status {self.proc.returncode}: "
                                     f"{self._tail()}")
            if self.mode():
                return self
            if time.monotonic() > deadline:
                self.stop()
                raise ZooKeeperError(f"ZooKeeper on {self.connect} did not answer within {timeout_s:.0f} s: "
                                     f"{self._tail()}")
            time.sleep(0.05)

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `timeout_s`."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def cli(self, *command: str, timeout_s: float = 60.0) -> str:
        """ZooKeeper's own CLI (`zkCli`) run once against this server, e.g. `cli("get", "/controller")`: what
        it prints."""
        java = shutil.which("java")
        assert java is not None, "ZooKeeper's CLI needs Java"
        classpath = ":".join(str(JARS_DIR / name) for name in JARS)
        run = subprocess.run([java, *HEAP_FLAGS, "-Dlog4j.configuration=none", "-cp", classpath,
                              "org.apache.zookeeper.ZooKeeperMain", "-server", self.connect, *command],
                             capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
        return run.stdout

    def kill(self) -> None:
        """SIGKILL: a crash."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def _tail(self, lines: int = 15) -> str:
        found = []
        for path in (self.data_dir / "zookeeper.out", self.log_path):
            if path.is_file():
                found.extend(path.read_text(errors="replace").splitlines()[-lines:])
        return "\n".join(found) or "(no output)"


class ZooKeeperEnsemble:
    """`size` ZooKeeper servers on loopback forming one ensemble, their data in `data_dir`/zk-<id>."""

    def __init__(self, data_dir: str | Path, ports: list[tuple[int, int, int]], host: str = "127.0.0.1",
                 tick_ms: int = 500) -> None:
        """`ports`: (client, peer, election) of each member, ids 1, 2, ..."""
        servers = tuple(f"server.{i}={host}:{peer}:{election}" for i, (_, peer, election) in enumerate(ports, 1))
        self.members = [ZooKeeperServer(Path(data_dir) / f"zk-{i}", client, host, tick_ms, i, servers)
                        for i, (client, _, _) in enumerate(ports, 1)]

    @property
    def connect(self) -> str:
        return ",".join(member.connect for member in self.members)

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> ZooKeeperEnsemble:
        for member in self.members:
            member.launch()
        try:
            for member in self.members:
                member.wait_ready(timeout_s)
        except ZooKeeperError:
            self.stop()
            raise
        return self

    def leader(self) -> ZooKeeperServer:
        return next(member for member in self.members if member.mode() == "leader")

    def stop(self) -> None:
        for member in self.members:
            member.stop()
