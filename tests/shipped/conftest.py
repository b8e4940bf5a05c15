"""What users install, built and installed as they would (issue 28), not the development venv.

- `wheel`: built once per run with `pip wheel` from a copy of the checkout's own files (`git ls-files`: nothing the
  development install generated, no stale build/ folder).
- Fresh venvs holding it, each as one kind of user makes it: `core_venv` the wheel alone (no extras),
  `user_venv` a test author's (the wheel with its [drill] extra, pytest and the three Python clients), `spark_venv`
  the wheel with its [spark] extra only.
- Their programs run from a temporary directory outside the checkout, with no PYTHONPATH: only the venv answers.
- `produce` and `read_all`: confluent-kafka on the host, as the suite's clients of those brokers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from epoch_broker.testing import BrokerProcess
from tests.helpers import REPO

INSTALL_TIMEOUT_S = 600  # pip from PyPI (or its cache) on a loaded 2-core machine
READY_TIMEOUT_S = 30.0
CLIENT_PINS = ("confluent-kafka==2.16.1", "kafka-python==3.0.12", "aiokafka==0.14.0")  # as the dev extra pins them


def run(argv: list[str | Path], timeout: float, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run to completion; a failure shows the command and the end of its output."""
    if "input" not in kwargs:
        kwargs.setdefault("stdin", subprocess.DEVNULL)
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout,
                          **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, (f"{' '.join(map(str, argv))} exited {done.returncode}:\n"
                                  f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def user_env(**extra: str) -> dict[str, str]:
    """The environment a user's shell has: no PYTHONPATH pointing into the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, **extra}


def source_copy(dest: Path) -> Path:
    """The files git knows (committed or not, ignored ones left out), copied to `dest`."""
    listed = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], 60, cwd=REPO).stdout
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():  # a file deleted but not yet committed is still listed
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    source = source_copy(out / "source")
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, source], INSTALL_TIMEOUT_S)
    (built,) = out.glob("epoch_broker-*.whl")
    return built


class Venv:
    """A fresh venv at `path` (made from this interpreter's base Python)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        run([sys.executable, "-m", "venv", path], 300)

    def bin(self, name: str) -> Path:
        return self.path / "bin" / name

    def install(self, *requirements: str | Path) -> None:
        run([self.bin("python"), "-m", "pip", "install", "-q", *requirements], INSTALL_TIMEOUT_S, env=user_env())

    def python(self, code: str, cwd: Path, timeout: float = 120) -> str:
        return run([self.bin("python"), "-c", code], timeout, cwd=cwd, env=user_env()).stdout


@pytest.fixture(scope="session")
def core_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    venv = Venv(tmp_path_factory.mktemp("core") / "venv")
    venv.install(wheel)
    return venv


@pytest.fixture(scope="session")
def user_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    venv = Venv(tmp_path_factory.mktemp("user") / "venv")
    venv.install(f"{wheel}[drill]", "pytest", *CLIENT_PINS)
    return venv


@pytest.fixture(scope="session")
def spark_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    venv = Venv(tmp_path_factory.mktemp("spark") / "venv")
    venv.install(f"{wheel}[spark]")
    return venv


@pytest.fixture(scope="module")
def served(core_venv: Venv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """The broker of a plain install: `epoch-broker serve` from the core venv, run outside the checkout."""
    broker = BrokerProcess(tmp_path_factory.mktemp("served"), {}, program=str(core_venv.bin("epoch-broker")))
    yield broker.start()
    broker.stop()


def produce(bootstrap: str, topic: str, records: list[bytes], codec: str = "lz4") -> list[bytes]:
    """Send every record (acks=all, idempotent); returns the ones acknowledged."""
    acked: list[bytes] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "compression.type": codec, "linger.ms": 5, "message.timeout.ms": 30000})
    for value in records:
        producer.produce(topic, value, on_delivery=lambda err, msg: acked.append(msg.value()) if err is None else None)
        producer.poll(0)
    assert producer.flush(60) == 0
    return acked


def read_all(bootstrap: str, topic: str, at_least: int, quiet_s: float = 2.0) -> list[bytes]:
    """Every record of the topic from the beginning, once `at_least` have come and no more come for `quiet_s`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline, quiet_since = time.monotonic() + 90, time.monotonic()
    try:
        while time.monotonic() < deadline and (len(got) < at_least or time.monotonic() - quiet_since < quiet_s):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
                quiet_since = time.monotonic()
    finally:
        consumer.close()
    return got
