"""What users install, built and installed as they would (issue 28), not the development venv.

- `wheel`: built once per run with `pip wheel` from a copy of the checkout's own files (`git ls-files`: nothing the
  development install generated, no stale build/ folder).
- Fresh venvs holding it, each as one kind of user makes it: `core_venv` the wheel alone (no extras),
  `user_venv` a test author's (the wheel with its [drill] extra, pytest and the three Python clients), `spark_venv`
  the wheel with its [spark] extra only.
- Their programs run from a temporary directory outside the checkout, with no PYTHONPATH: only the venv answers.
- `produce` and `read_all`: confluent-kafka on the host, as the suite's clients of those brokers; `GroupMember`
  one of a KIP-848 consumer group (`group.protocol=consumer`), polled by the test's own thread;
  `share_group_hands_over` two ShareConsumers of a KIP-932 share group, one after the other.
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
from confluent_kafka import AcknowledgeType, Consumer, Message, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from epoch_broker.testing import BrokerProcess
from tests.helpers import REPO, holds_sync, not_yet, wait_for_sync

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


def produce(bootstrap: str, topic: str, records: list[bytes], codec: str = "lz4",
            partitions: int | None = None) -> list[bytes]:
    """Send every record (acks=all, idempotent), record i to partition i % `partitions` if given (else the
    client's partitioner picks); returns the ones acknowledged."""
    acked: list[bytes] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "compression.type": codec, "linger.ms": 5, "message.timeout.ms": 30000})
    for i, value in enumerate(records):
        where = {} if partitions is None else {"partition": i % partitions}
        producer.produce(topic, value, on_delivery=lambda err, msg: acked.append(msg.value()) if err is None else None,
                         **where)
        producer.poll(0)
    assert producer.flush(60) == 0
    return acked


def read_all(bootstrap: str, topic: str, count: int, quiet_s: float = 2.0) -> list[bytes]:
    """Every record of the topic from the beginning: `count` of them (90 s at most), then no more for `quiet_s`
    (a record read twice shows there)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[bytes] = []

    def read() -> object:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
        return len(got) >= count or not_yet(f"{len(got)} read")

    def no_more() -> object:
        return read() and (len(got) == count or not_yet(f"{len(got) - count} more: {got[count:][:10]}"))

    try:
        wait_for_sync(read, 90, interval=0, what=f"{count} records of {topic}")
        if quiet_s:
            holds_sync(no_more, quiet_s, interval=0, what=f"no record of {topic} past the {count}")
    finally:
        consumer.close()
    return got


class GroupMember:
    """One member of a KIP-848 consumer group (`group.protocol=consumer`: the broker assigns, the member reconciles
    incrementally), polled by the test's thread through `poll()`: the partitions it owns (its assign and revoke
    callbacks, which librdkafka calls from poll), the records it read (partition, value), each batch committed
    before the next poll, synchronously."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
        self.owned: set[int] = set()
        self.read: list[tuple[int, bytes]] = []
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked)

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.owned.update(p.partition for p in partitions)

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.owned.difference_update(p.partition for p in partitions)

    def poll(self) -> None:
        messages = self.consumer.consume(500, 0.1)
        for message in messages:
            assert message.error() is None, message.error()
            self.read.append((int(message.partition() or 0), bytes(message.value() or b"")))
        if messages:
            self.consumer.commit(asynchronous=False)  # the positions of what it owns: past everything it read

    def close(self) -> None:
        self.consumer.close()  # leaves the group (member epoch -1)


def read_as_group(members: list[GroupMember], values: list[bytes], timeout: float = 60) -> None:
    """Poll every member in turn until, between them, they have read every one of `values`."""
    def everything() -> object:
        for member in members:
            member.poll()
        read = {value for member in members for _, value in member.read}
        return read >= set(values) or not_yet(f"{len(set(values) - read)} of {len(values)} not read yet")

    wait_for_sync(everything, timeout, interval=0, what=f"{len(values)} records read by {len(members)} members")


def share_group_hands_over(bootstrap: str, topic: str, partitions: int, count: int = 60) -> None:
    """A share group (KIP-932) on `topic` (`partitions` partitions, empty), read from its earliest record with
    confluent-kafka's ShareConsumer. The first member acknowledges explicitly, committing each poll's
    acknowledgements: it accepts every other record and releases the rest (again when they come back to it), then
    leaves. The second member then gets exactly the records the first released, each with its delivery count one
    higher, and those produced after; never one the first accepted."""
    group = f"{topic}-share"
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[  # Kafka's default reads from latest
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.incremental_alter_configs([resource])[resource].result(30)
    sent = produce(bootstrap, topic, [f"{topic}-{i}".encode() for i in range(count)], partitions=partitions)
    assert len(sent) == count
    accepted = set(sent[::2])
    delivery_count: dict[bytes, int] = {}  # each record's, when the first member last had it

    first = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"})
    first.subscribe([topic])

    def acknowledged() -> object:
        batch = share_poll(first)
        for message in batch:
            value = bytes(message.value() or b"")
            assert value not in accepted or value not in delivery_count, f"{value!r} delivered after its ACCEPT"
            delivery_count[value] = int(message.delivery_count() or 0)
            first.acknowledge(message, AcknowledgeType.ACCEPT if value in accepted else AcknowledgeType.RELEASE)
        if batch:
            failed = {tp: error for tp, error in first.commit_sync(30).items() if error is not None}
            assert failed == {}, failed
        return len(delivery_count) == count or not_yet(f"{len(delivery_count)} of {count} delivered")

    try:
        wait_for_sync(acknowledged, 90, interval=0, what=f"the first share member acknowledging {count} records")
    finally:
        first.close()  # leaves the group

    more = produce(bootstrap, topic, [f"{topic}-late-{i}".encode() for i in range(count // 2)], partitions=partitions)
    expected = {**{value: n + 1 for value, n in delivery_count.items() if value not in accepted},
                **{value: 1 for value in more}}
    second = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})  # implicit: ACCEPT at the next poll
    second.subscribe([topic])
    got: list[tuple[bytes, int]] = []

    def handed_over() -> object:
        got.extend((bytes(m.value() or b""), int(m.delivery_count() or 0)) for m in share_poll(second))
        return len(got) >= len(expected) or not_yet(f"{len(got)} of {len(expected)} delivered")

    try:
        wait_for_sync(handed_over, 90, interval=0, what="the second share member getting the released records")
    finally:
        second.close()
    assert len(got) == len(expected) and dict(got) == expected


def share_poll(consumer: ShareConsumer) -> list[Message]:
    batch = list(consumer.poll(0.5) or [])
    errors = [m.error() for m in batch if m.error() is not None]
    assert errors == [], errors
    return batch
