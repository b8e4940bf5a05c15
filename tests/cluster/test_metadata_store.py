"""The controller's store contract, run against every backend: the file store and ZooKeeper (a real ZooKeeper
server from Debian's package, started here on a free loopback port). Then what only a replicated store has:
one elected controller, a zombie controller (its session expired, another elected) that appends nothing, and a
three-node ZooKeeper ensemble that loses its leader and serves on; and Kafka's znodes, read with ZooKeeper's CLI.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from epoch_broker.broker.config import ConfigError, build_config
from epoch_broker.broker.controller.controller import Controller
from epoch_broker.broker.controller.replication_control import NewTopic
from epoch_broker.broker.controller.store import MetadataStore, NotController
from epoch_broker.broker.controller.store.file import FileMetadataStore
from epoch_broker.broker.controller.store.zookeeper import CONTROLLER, CONTROLLER_EPOCH, ZooKeeperMetadataStore
from epoch_broker.broker.metadata.records import (
    BrokerFenceRecord,
    ClusterRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from epoch_broker.broker.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from epoch_broker.drill.zookeeper import ZooKeeperEnsemble, ZooKeeperServer
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.testing import free_port, wait_until
from tests.helpers import REPO

OpenStore = Callable[[], MetadataStore]


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"), free_port()).start()
    yield server
    server.stop()


def zookeeper_store(connect: str, node_id: int = 0, elect: bool = True) -> ZooKeeperMetadataStore:
    store = ZooKeeperMetadataStore(connect, session_timeout_ms=4000)
    if elect:
        store.elect(node_id)
    return store


@pytest.fixture(params=["file", "zookeeper"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenStore]:
    """Opens the same store again each call (a directory, or a chroot of its own), ready to append."""
    opened: list[MetadataStore] = []
    if request.param == "file":
        def make() -> MetadataStore:
            return FileMetadataStore(str(tmp_path / "controller"))
    else:
        connect = f"{request.getfixturevalue('zookeeper').connect}/test-{uuid.uuid4().hex}"

        def make() -> MetadataStore:
            return zookeeper_store(connect)

    def opening() -> MetadataStore:
        store = make()
        opened.append(store)
        return store

    yield opening
    for store in opened:
        store.close()


def topic(name: str, partitions: int) -> list[Any]:
    topic_id = uuid.uuid4().bytes
    return [TopicRecord(name, topic_id, {"retention.ms": "1000"}),
            *(PartitionRecord(topic_id, p, (0, 1, 2), (0, 1, 2), p % 3) for p in range(partitions))]


def test_a_new_store_is_empty(open_store: OpenStore) -> None:
    assert open_store().load() == []


def test_appends_come_back_in_order_after_a_reopen(open_store: OpenStore) -> None:
    store = open_store()
    created = topic("t", 3)
    appended = [[ClusterRecord("cluster")], created, [PartitionChangeRecord(created[0].topic_id, 0, 1, 1, 1, (1, 2))]]
    for records in appended:
        store.append(records)
    store.close()
    assert open_store().load() == [record for records in appended for record in records]


def test_a_large_append_lands_whole(open_store: OpenStore) -> None:
    store = open_store()
    store.append([ClusterRecord("cluster")])
    # about 1.7 MB of records, more than one znode or one request can hold; the topic's view takes several
    big = topic("big", 2_000) + [ClusterRecord("c" * 150) for _ in range(8_000)]
    store.append(big)
    store.close()
    assert open_store().load() == [ClusterRecord("cluster"), *big]


# --- what only a replicated store has ---------------------------------------------------------------------------

def test_only_one_controller_is_elected_while_its_session_lives(zookeeper: ZooKeeperServer) -> None:
    connect = f"{zookeeper.connect}/test-{uuid.uuid4().hex}"
    first, second = zookeeper_store(connect, node_id=1000), zookeeper_store(connect, node_id=1001, elect=False)
    try:
        assert first.epoch == 1
        with pytest.raises(NotController, match="controller 1000 is elected"):
            second.elect(1001)
        with pytest.raises(NotController):
            second.append([ClusterRecord("not mine")])
        first.append([ClusterRecord("cluster")])
        assert second.load() == [ClusterRecord("cluster")]
    finally:
        first.close()
        second.close()
    successor = zookeeper_store(connect, node_id=1001)  # the first one's session closed: its claim is gone
    try:
        assert (successor.epoch, successor.controller_id()) == (2, 1001)
    finally:
        successor.close()


def test_a_zombie_controller_appends_nothing_once_another_is_elected(zookeeper: ZooKeeperServer) -> None:
    connect = f"{zookeeper.connect}/test-{uuid.uuid4().hex}"
    root = connect.partition("/")[2]
    zombie = zookeeper_store(connect, node_id=1000)
    successor = zookeeper_store(connect, node_id=1001, elect=False)
    inspector = KazooClient(hosts=zookeeper.connect)
    inspector.start(10)
    try:
        zombie.append([ClusterRecord("cluster")])
        # its session expires (as when it is paused past the session timeout): ZooKeeper drops its claim
        session = KazooClient(hosts=zookeeper.connect, client_id=zombie.client.client_id)
        session.start(10)
        session.stop()
        session.close()
        wait_until(lambda: inspector.exists(f"/{root}{CONTROLLER}") is None, "the zombie's claim gone")
        assert successor.elect(1001) == [ClusterRecord("cluster")] and successor.epoch == 2
        successor.append([ClusterRecord("after the failover")])
        with pytest.raises(NotController, match="controller epoch 1"):  # its session expired, or the epoch moved
            zombie.append([ClusterRecord("from the zombie")])
        with pytest.raises(NotController):  # and stays fenced on its next session
            zombie.append([ClusterRecord("from the zombie, again")])
        assert successor.load() == [ClusterRecord("cluster"), ClusterRecord("after the failover")]
        epoch, stat = inspector.get(f"/{root}{CONTROLLER_EPOCH}")
        assert (epoch, stat.version) == (b"2", 1)
    finally:
        inspector.stop()
        inspector.close()
        zombie.close()
        successor.close()


def test_an_ensemble_that_loses_its_leader_keeps_the_log_and_elects_controllers(tmp_path: Path) -> None:
    ensemble = ZooKeeperEnsemble(tmp_path, [(free_port(), free_port(), free_port()) for _ in range(3)]).start()
    connect = f"{ensemble.connect}/cluster"
    controller = zookeeper_store(connect, node_id=1000)
    try:
        controller.append([ClusterRecord("cluster")])
        ensemble.leader().kill()  # the ZooKeeper leader crashes: the other two elect one and serve on
        wait_until(lambda: any(member.mode() == "leader" for member in ensemble.members if member.proc),
                   "a new ZooKeeper leader")
        controller.append(topic("t", 3))  # same session, same claim: still the controller
        controller.close()
        successor = zookeeper_store(connect, node_id=1001)
        try:
            assert successor.epoch == 2
            successor.append([ClusterRecord("after")])
            assert [type(r).__name__ for r in successor.load()] == [
                "ClusterRecord", "TopicRecord", "PartitionRecord", "PartitionRecord", "PartitionRecord",
                "ClusterRecord"]
        finally:
            successor.close()
    finally:
        controller.close()
        ensemble.stop()


def test_kafkas_znodes_follow_the_log_and_read_with_zookeepers_own_cli(zookeeper: ZooKeeperServer) -> None:
    chroot = f"/test-{uuid.uuid4().hex}"
    controller = zookeeper_store(zookeeper.connect + chroot, node_id=1000)
    created = topic("orders", 2)
    topic_id = created[0].topic_id
    try:
        controller.append([ClusterRecord("cluster"),
                           *(RegisterBrokerRecord(n, 10 + n, bytes(16), "127.0.0.1", 9092 + n, None,
                                                  {"PLAINTEXT": f"127.0.0.1:{9092 + n}"}) for n in range(3))])
        controller.append(created)
        controller.append([PartitionChangeRecord(topic_id, 1, 2, 1, 1, (2, 0)), BrokerFenceRecord(1, 11, True)])

        state = json.loads(zookeeper.cli("get", f"{chroot}/brokers/topics/orders/partitions/1/state"
                                         ).strip().splitlines()[-1])
        assert state == {"controller_epoch": 1, "leader": 2, "version": 1, "leader_epoch": 1, "isr": [2, 0]}
        assignment = json.loads(zookeeper.cli("get", f"{chroot}/brokers/topics/orders").strip().splitlines()[-1])
        assert assignment["partitions"] == {"0": [0, 1, 2], "1": [0, 1, 2]} and assignment["version"] == 3
        listed = zookeeper.cli("ls", f"{chroot}/brokers/ids").strip().splitlines()[-1]
        assert listed == "[0, 2]"  # broker 1 is fenced: gone, as when a Kafka broker's session ends
        controller.append([RemoveTopicRecord(topic_id)])
        assert zookeeper.cli("ls", f"{chroot}/brokers/topics").strip().splitlines()[-1] == "[]"
        controller.append(topic("payments", 1))
    finally:
        controller.close()
    # a successor writes the whole view again in its session, in its epoch
    successor = zookeeper_store(zookeeper.connect + chroot, node_id=1001)
    try:
        successor.append([PartitionChangeRecord(successor.image.topics_by_name["payments"].topic_id, 0, 1, 1, 1,
                                                (1, 2))])
        view = successor.client
        state = json.loads(view.get(f"{chroot}/brokers/topics/payments/partitions/0/state")[0])
        assert (state["controller_epoch"], state["leader"], state["leader_epoch"]) == (2, 1, 1)
        assert sorted(view.get_children(f"{chroot}/brokers/ids")) == ["0", "2"]
        assert json.loads(view.get(f"{chroot}/brokers/ids/2")[0])["broker_epoch"] == 12
    finally:
        successor.close()


# --- the controller process's settings -------------------------------------------------------------------------

def test_zookeeper_settings_parse_and_a_broker_may_not_keep_the_store(tmp_path: Path) -> None:
    config = build_config([("process.roles", "controller"), ("controller.listener.names", "CONTROLLER"),
                           ("listener.security.protocol.map", "CONTROLLER:PLAINTEXT"),
                           ("listeners", "CONTROLLER://127.0.0.1:0"), ("zookeeper.connect", "127.0.0.1:2181/kafka"),
                           ("zookeeper.session.timeout.ms", "6000")])
    assert (config.zookeeper_connect, config.zookeeper_session_timeout_ms) == ("127.0.0.1:2181/kafka", 6000)
    voters = build_config([("controller.quorum.voters", "1000@127.0.0.1:9193, 1001@127.0.0.1:9195")])
    assert voters.controller_address == "127.0.0.1:9193,127.0.0.1:9195"
    with pytest.raises(ConfigError, match=r"controller\.quorum\.voters"):
        build_config([("controller.quorum.voters", "127.0.0.1:9193")])
    with pytest.raises(ConfigError, match="only a controller process"):
        build_config([("zookeeper.connect", "127.0.0.1:2181")])


def test_a_controller_whose_zookeeper_does_not_answer_exits_2_naming_it(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    settings = ("process.roles=controller", "node.id=1000", "controller.listener.names=CONTROLLER",
                "listener.security.protocol.map=CONTROLLER:PLAINTEXT", f"listeners=CONTROLLER://127.0.0.1:{free_port()}",
                f"log.dirs={tmp_path / 'data'}", f"zookeeper.connect=127.0.0.1:{port}",
                "zookeeper.connection.timeout.ms=1000")
    result = subprocess.run(
        [sys.executable, "-m", "epoch_broker", "serve", *[arg for item in settings for arg in ("--override", item)]],
        capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(REPO)}, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"epoch-broker: zookeeper.connect: no ZooKeeper answered at 127.0.0.1:{port} within 1000 ms "
        "(zookeeper.connection.timeout.ms)")


def test_a_deferred_commit_is_applied_at_once_and_reverted_whole_if_it_never_lands(tmp_path: Path) -> None:
    """A replicated store's controller (quorum.py) decides on records not yet durable; losing its election with
    them in flight puts its state back to the committed log's, ACLs and credentials included."""
    controller = Controller(build_config([("cluster.id", "c")]), FileMetadataStore(str(tmp_path)))
    seen: list[Any] = []
    controller.subscribers.append(seen.extend)
    controller.start()
    controller.deferred = True
    controller.register_broker(0, bytes(16), "127.0.0.1", 9092)
    [created] = controller.create_topics([NewTopic("t", 1, 1)])
    assert created.error_code == ErrorCode.NONE and "t" in controller.image.topics_by_name
    controller.create_acls([AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:a", "*",
                                       AclOperation.READ, AclPermissionType.ALLOW)])
    assert len(controller.uncommitted()) == 4 and seen == [ClusterRecord("c")]  # nobody saw them
    controller.revert()
    assert controller.uncommitted() == [] and controller.records == [ClusterRecord("c")]
    assert controller.image.topics_by_name == {} and controller.image.brokers == {} and len(controller.image.acls) == 0
    assert controller.image.metadata_offset == 0
