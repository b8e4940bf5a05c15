"""Controllers sharing their metadata in ZooKeeper, on real processes (issue 13): an embedded ZooKeeper (Debian's
package) or a three-node ensemble, three controller processes (one active) and three brokers, as
`epoch-broker cluster --controllers 3 --zookeeper embedded` starts them.

- A SIGKILLed active controller is replaced by a standby, which then elects partition leaders: under an
  idempotent acks=all load, every acknowledged record is read back once, and no broker's Metadata shows a
  leader epoch going backwards (KIP-232) across the failover.
- A zombie controller (SIGSTOPped past its ZooKeeper session) changes nothing once resumed, and steps down.
- A ZooKeeper ensemble that loses its leader keeps the cluster electing.
- Everything restarted from disk (ZooKeeper, controllers, brokers) keeps topics, epochs, ISRs and committed
  offsets; the partition state ZooKeeper's own CLI reads matches `admin status`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from kazoo.client import KazooClient

from epoch_broker.drill import admin, launcher
from epoch_broker.drill.zookeeper import ZooKeeperEnsemble, ZooKeeperServer
from epoch_broker.testing import free_port
from tests.cluster.support import (
    Cluster,
    NumberedProducer,
    check_numbered,
    consume_numbered,
    create_topic,
    leaders_high_watermarks,
    partition_state,
    produce,
    start_cluster,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.cluster(brokers=3, controllers=3, zookeeper="embedded")]

TOPIC = "ha"
PARTITIONS = 3
SESSION_S = int(launcher.ZOOKEEPER_SESSION_TIMEOUT_MS) / 1000


def elected(cluster: Cluster) -> dict[str, int]:
    """{"node_id", "controller_epoch"} as ZooKeeper has them."""
    found = admin.zookeeper_controller(cluster.file)
    assert found is not None
    return found


class EpochWatch:
    """Asks every running broker for Metadata, over and over, and keeps each broker's leader epochs in the
    order it answered them: none may go down (KIP-232), a controller failover included."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.seen: dict[tuple[str, tuple[str, int]], list[int]] = {}
        self.task: asyncio.Task | None = None

    async def _watch(self) -> None:
        while True:
            for address in admin.running_brokers(self.cluster.file):
                with contextlib.suppress(admin.AdminError):
                    answer = await admin.fetch_metadata([address], timeout_s=2)
                    for key, state in answer.partitions.items():
                        self.seen.setdefault((address, key), []).append(state.leader_epoch)
            await asyncio.sleep(0.05)  # paces the watch, which waits for nothing: it records every answer

    def __enter__(self) -> EpochWatch:
        self.task = asyncio.get_running_loop().create_task(self._watch())
        return self

    def __exit__(self, *_: object) -> None:
        assert self.task is not None
        self.task.cancel()

    def check(self) -> None:
        assert self.seen, "no Metadata answered"
        for (address, key), epochs in self.seen.items():
            assert epochs == sorted(epochs), f"{address} answered leader epochs {epochs} for {key}"


async def test_a_standby_replaces_a_killed_controller_then_elects_a_leader_and_no_acked_record_is_lost(
        cluster: Cluster) -> None:
    await create_topic(cluster, TOPIC, partitions=PARTITIONS, configs={"min.insync.replicas": "2"})
    first = elected(cluster)
    assert first["controller_epoch"] == 1
    writer = NumberedProducer(cluster.bootstrap, TOPIC, PARTITIONS).start()
    with EpochWatch(cluster) as watch:
        try:
            await wait_for(lambda: writer.acked_count() >= 200, what="the first acknowledgements", timeout=20)
            cluster.kill(first["node_id"])
            await wait_for(lambda: elected(cluster)["node_id"] not in (-1, first["node_id"]),
                           what="a standby elected", timeout=SESSION_S + 15)
            successor = elected(cluster)
            assert successor["controller_epoch"] == 2
            await wait_for(lambda: f"controller {successor['node_id']} is active: controller epoch 2"
                           in cluster.log_text(successor["node_id"]), what="the successor acting", timeout=10)

            before = (await cluster.metadata())[(TOPIC, 0)]
            cluster.kill(before.leader)  # an election only the new controller can make
            await wait_for(lambda: partition_state(cluster, TOPIC, 0, lambda s: s.leader not in (before.leader, -1)
                                                   and s.leader_epoch > before.leader_epoch),
                           what=f"a new leader of {TOPIC}-0", timeout=20)
            acked = writer.acked_count()
            await wait_for(lambda: writer.acked_count() >= acked + 100, what="acknowledgements after both failovers",
                           timeout=30)
        finally:
            await writer.stop_sending()
        await writer.flush_and_check()
    watch.check()
    ends = await leaders_high_watermarks(cluster, TOPIC, PARTITIONS)
    check_numbered(writer, await asyncio.to_thread(consume_numbered, cluster.bootstrap, TOPIC, ends))


# No ISR change of the successor's own may happen meanwhile, however loaded the machine: every change is the zombie's.
@pytest.mark.cluster(brokers=3, controllers=3, zookeeper="embedded",
                     overrides={"replica.lag.time.max.ms": 30000, "broker.session.timeout.ms": 6000})
async def test_a_zombie_controller_resumed_after_its_session_expired_changes_nothing_and_steps_down(
        cluster: Cluster) -> None:
    await create_topic(cluster, TOPIC, partitions=PARTITIONS)
    zombie = elected(cluster)["node_id"]
    zombie_address = cluster.file.process(zombie).address
    cluster.pause(zombie)
    try:
        await wait_for(lambda: elected(cluster)["node_id"] not in (-1, zombie), what="another controller elected",
                       timeout=SESSION_S + 15)
        successor = elected(cluster)["node_id"]
        # the new controller makes changes: a leader election, a new topic
        await asyncio.to_thread(cluster.elect, TOPIC, 0, 1)
        await create_topic(cluster, "after", partitions=1)
        zk = KazooClient(hosts=cluster.file.zookeeper.address)
        zk.start(10)
        try:
            epoch_before = zk.get("/controller_epoch")
            states_before = {p: zk.get(f"/brokers/topics/{TOPIC}/partitions/{p}/state") for p in range(PARTITIONS)}
            metadata_before = await cluster.metadata()
        finally:
            zk.stop()
            zk.close()
    finally:
        cluster.resume(zombie)
    # at once, before it can learn anything from ZooKeeper: its lease is over, so it decides nothing
    with pytest.raises(admin.AdminError, match="NOT_CONTROLLER"):
        await admin.elect(zombie_address, TOPIC, 0, 2)
    await wait_for(lambda: re.search(rf"controller {zombie} steps down from controller epoch 1",
                                     cluster.log_text(zombie)), what="the zombie stepping down", timeout=SESSION_S + 10)

    zk = KazooClient(hosts=cluster.file.zookeeper.address)
    zk.start(10)
    try:
        assert zk.get("/controller_epoch") == epoch_before  # same epoch, same version: no election, no write
        assert json.loads(zk.get("/controller")[0])["brokerid"] == successor
        for p in range(PARTITIONS):
            data, stat = zk.get(f"/brokers/topics/{TOPIC}/partitions/{p}/state")
            assert (data, stat.version) == (states_before[p][0], states_before[p][1].version)
            assert json.loads(data)["controller_epoch"] in (1, 2)
    finally:
        zk.stop()
        zk.close()
    after = await cluster.metadata()
    assert {k: (s.leader, s.leader_epoch, s.isr) for k, s in after.items() if k[0] == TOPIC} == {
        k: (s.leader, s.leader_epoch, s.isr) for k, s in metadata_before.items() if k[0] == TOPIC}
    # the zombie follows again: a standby answering NOT_CONTROLLER, and the cluster still elects through the successor
    assert await asyncio.to_thread(cluster.elect, TOPIC, 0, 2) == "elected"
    with pytest.raises(admin.AdminError, match="NOT_CONTROLLER"):
        await admin.elect(zombie_address, TOPIC, 0, 0)


async def test_a_zookeeper_ensemble_that_loses_a_node_keeps_the_cluster_electing(tmp_path: Path) -> None:
    ensemble = ZooKeeperEnsemble(tmp_path / "zk", [(free_port(), free_port(), free_port()) for _ in range(3)]).start()
    try:
        cluster = start_cluster(tmp_path, 3, controllers=2, zookeeper=f"{ensemble.connect}/kafka")
        try:
            await create_topic(cluster, TOPIC, partitions=PARTITIONS)
            killed = ensemble.leader()
            killed.kill()  # the ZooKeeper leader crashes: the other two elect one and serve on
            await wait_for(lambda: any(m.mode() == "leader" for m in ensemble.members if m.proc),
                           what="a new ZooKeeper leader", timeout=30)
            before = (await cluster.metadata())[(TOPIC, 1)]
            cluster.kill(before.leader)
            await wait_for(lambda: partition_state(cluster, TOPIC, 1, lambda s: s.leader not in (before.leader, -1)
                                                   and s.leader_epoch > before.leader_epoch),
                           what=f"a new leader of {TOPIC}-1", timeout=20)
            await create_topic(cluster, "after", partitions=1, replication_factor=2)
            # every client's connection went with the leader (the followers stop serving until they elect one), but
            # no session did: the active controller confirmed its epoch again rather than stepping down
            assert elected(cluster) == {"node_id": launcher.CONTROLLER_NODE_ID, "controller_epoch": 1}
        except BaseException:
            print(f"process logs of the failed test:\n{cluster.log_tails()}")
            raise
        finally:
            cluster.stop()
    finally:
        ensemble.stop()


async def test_a_cluster_restarted_from_disk_keeps_topics_epochs_isrs_and_committed_offsets(cluster: Cluster) -> None:
    await create_topic(cluster, TOPIC, partitions=PARTITIONS)
    for p in range(PARTITIONS):
        await produce(cluster, (await cluster.metadata())[(TOPIC, p)].leader, TOPIC, b"a", b"b", b"c", partition=p)
    await asyncio.to_thread(_commit, cluster.bootstrap, {p: p + 1 for p in range(PARTITIONS)})
    before = await cluster.metadata()
    epoch_before = elected(cluster)["controller_epoch"]

    plan = launcher.ClusterFile.read(cluster.data_dir)
    launcher.stop_cluster(plan)
    launcher.start_cluster(plan, cluster.data_dir)
    for p in range(PARTITIONS):
        await wait_for(lambda p=p: partition_state(cluster, TOPIC, p, lambda s: s.leader >= 0 and len(s.isr) == 3),
                       what=f"{TOPIC}-{p} led with a full ISR", timeout=30)
    after = await cluster.metadata()
    for key, state in before.items():
        assert after[key].replicas == state.replicas and after[key].leader_epoch >= state.leader_epoch, key
    epoch = elected(cluster)["controller_epoch"]
    assert epoch > epoch_before  # the restarted controllers elected another, from the same count
    assert await asyncio.to_thread(_committed, cluster.bootstrap) == {p: p + 1 for p in range(PARTITIONS)}

    server = ZooKeeperServer(Path(cluster.file.zookeeper.data_dir), cluster.file.zookeeper.port)

    def zookeeper_agrees() -> list[tuple[tuple[int, int, list[int]], dict]]:
        """Each partition as `admin status` shows it against its state znode; empty when they agree. Read at two
        moments, so an ISR change between them (a restarted follower still catching up) is waited out."""
        status = json.loads(cluster.admin("status", "--json").stdout)
        assert status["controller"]["controller_epoch"] == epoch
        differ = []
        for row in (r for r in status["partitions"] if r["topic"] == TOPIC):
            printed = server.cli("get", f"/brokers/topics/{TOPIC}/partitions/{row['partition']}/state")
            state = json.loads(printed.strip().splitlines()[-1])
            shown = (row["leader"], row["leader_epoch"], row["isr"])
            if (state["leader"], state["leader_epoch"], state["isr"]) != shown:
                differ.append((shown, state))
        return differ

    await wait_for(lambda: zookeeper_agrees() == [], what="ZooKeeper's view as admin status shows it", timeout=30)


def _commit(bootstrap: str, offsets: dict[int, int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "restarted", "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def _committed(bootstrap: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "restarted", "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()
