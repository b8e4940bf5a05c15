"""DescribeQuorum (55) of the metadata log: kafka-python's describe_metadata_quorum on one broker (its embedded
controller answers, and is the voter v2's nodes list), and raw through a broker of a three-broker cluster
(forwarded to the controller process), whose observers are the brokers at the metadata offsets they applied, with
v1's timestamps and v2's nodes; a request for anything but the metadata partition alone is refused per partition."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient

from epoch_broker import testing
from epoch_broker.client.aio import KafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import describe_quorum

Q = describe_quorum.REQUEST
METADATA = ("__cluster_metadata", 0)


def test_kafka_python_describes_a_single_brokers_quorum(tmp_path: Path) -> None:
    with testing.broker(data_dir=tmp_path) as started:
        started.create_topic("t")
        admin = KafkaAdminClient(bootstrap_servers=started.bootstrap_servers)
        try:
            described = admin.describe_metadata_quorum()
        finally:
            admin.close()
    (topic,) = described["topics"]
    (partition,) = topic["partitions"]
    assert (topic["topic_name"], partition["partition_index"], partition["error"]) == ("__cluster_metadata", 0, None)
    assert partition["leader_id"] == 0 and partition["leader_epoch"] >= 0 and partition["high_watermark"] > 0
    assert [v["replica_id"] for v in partition["current_voters"]] == [0]
    (node,) = described["nodes"]
    host, port = started.bootstrap_servers.rsplit(":", 1)
    assert node["node_id"] == 0 and (host, int(port)) in [(e["host"], e["port"]) for e in node["listeners"]]


async def ask(address: str, topics: list[tuple[str, list[int]]], version: int = 2) -> Any:
    async with await KafkaClient.connect(address) as client:
        return await client.request(describe_quorum.API, version, Q.cls(topics=[Q.TopicData(
            topic_name=topic, partitions=[Q.PartitionData(partition_index=p) for p in partitions])
            for topic, partitions in topics]))


def test_a_broker_forwards_it_to_the_controller_whose_observers_are_the_brokers() -> None:
    with testing.cluster(3) as cluster:
        def heard_from_all() -> object:
            answer = asyncio.run(ask(cluster.address(1), [("__cluster_metadata", [0])]))
            (partition,) = answer.topics[0].partitions
            return (len(partition.observers) == 3 and all(o.log_end_offset > 0 for o in partition.observers)
                    and (answer, partition))

        before_ms = int(time.time() * 1000)
        answer, partition = testing.wait_until(heard_from_all, "all brokers heartbeated their metadata offsets")
        assert answer.error_code == ErrorCode.NONE and partition.error_code == ErrorCode.NONE
        (voter,) = partition.current_voters
        assert voter.replica_id == partition.leader_id not in (0, 1, 2)  # the controller process
        assert voter.log_end_offset == partition.high_watermark > 0
        assert voter.last_fetch_timestamp == voter.last_caught_up_timestamp >= before_ms  # the leader: now
        assert [o.replica_id for o in partition.observers] == [0, 1, 2]
        assert all(o.log_end_offset <= partition.high_watermark for o in partition.observers)
        assert all(o.last_fetch_timestamp > 0 and o.replica_directory_id == bytes(16) for o in partition.observers)
        # v2's nodes: the voter's controller listener, where the brokers reach it (the launcher puts it on the port
        # after the controller's PLAINTEXT one)
        (node,) = answer.nodes
        host, port = cluster.controller_address().rsplit(":", 1)
        assert node.node_id == voter.replica_id
        assert [(e.name, e.host, e.port) for e in node.listeners] == [("CONTROLLER", host, int(port) + 1)]
        older = asyncio.run(ask(cluster.address(2), [("__cluster_metadata", [0])], version=0))
        assert older.topics[0].partitions[0].current_voters[0].replica_id == voter.replica_id


def test_anything_but_the_metadata_partition_alone_is_unknown_for_every_partition_asked() -> None:
    with testing.broker() as started:
        for asked in ([("orders", [0])], [("__cluster_metadata", [1])], [("__cluster_metadata", [0, 0])],
                      [("__cluster_metadata", [0]), ("orders", [3])]):
            answer = asyncio.run(ask(started.bootstrap_servers, asked))
            assert [(t.topic_name, p.partition_index, p.error_code) for t in answer.topics for p in t.partitions] == [
                (topic, p, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for topic, partitions in asked for p in partitions]


@pytest.mark.slow
def test_with_controllers_sharing_zookeeper_the_active_one_leads_in_its_controller_epoch() -> None:
    with testing.cluster(1, controllers=2, zookeeper="embedded") as cluster:
        def answered() -> object:
            answer = asyncio.run(ask(cluster.address(0), [("__cluster_metadata", [0])]))
            return answer.error_code == ErrorCode.NONE and answer.topics[0].partitions[0]

        partition = testing.wait_until(answered, "the broker found the active controller")
        assert partition.leader_id in (1000, 1001) and partition.leader_epoch >= 1  # ZooKeeper's controller epoch
        assert [v.replica_id for v in partition.current_voters] == [partition.leader_id]
        standby = 2001 - partition.leader_id
        direct = {node: asyncio.run(ask(cluster.address(node), [("__cluster_metadata", [0])]))
                  for node in (partition.leader_id, standby)}
        assert direct[partition.leader_id].topics[0].partitions[0].leader_epoch == partition.leader_epoch
        assert direct[standby].error_code == ErrorCode.NOT_CONTROLLER
