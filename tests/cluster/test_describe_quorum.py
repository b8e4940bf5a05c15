"""DescribeQuorum (55) of the metadata log: kafka-python's describe_metadata_quorum on one broker (its embedded
controller answers), and through a broker of a cluster (forwarded to the controller process), whose observers are
the brokers at the metadata offsets they applied."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient

from epoch_broker import testing
from epoch_broker.client.aio import KafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import describe_quorum

Q = describe_quorum.REQUEST


def test_kafka_python_describes_a_single_brokers_quorum(tmp_path: Path) -> None:
    with testing.broker(data_dir=tmp_path) as started:
        started.create_topic("t")
        admin = KafkaAdminClient(bootstrap_servers=started.bootstrap_servers)
        try:
            (topic,) = admin.describe_metadata_quorum()["topics"]
        finally:
            admin.close()
    (partition,) = topic["partitions"]
    assert (topic["topic_name"], partition["partition_index"], partition["error"]) == ("__cluster_metadata", 0, None)
    assert partition["leader_id"] == 0 and partition["leader_epoch"] >= 0 and partition["high_watermark"] > 0
    assert [v["replica_id"] for v in partition["current_voters"]] == [0]


def test_a_broker_forwards_it_to_the_controller_whose_observers_are_the_brokers() -> None:
    with testing.cluster(2) as cluster:
        async def ask(topic: str, index: int) -> Any:
            async with await KafkaClient.connect(cluster.address(1)) as client:
                return await client.request(describe_quorum.API, 2, Q.cls(topics=[Q.TopicData(
                    topic_name=topic, partitions=[Q.PartitionData(partition_index=index)])]))

        def heard_from_both() -> object:
            answer = asyncio.run(ask("__cluster_metadata", 0))
            (partition,) = answer.topics[0].partitions
            return all(o.log_end_offset > 0 for o in partition.observers) and (answer, partition)

        answer, partition = testing.wait_until(heard_from_both, "both brokers heartbeated their metadata offsets")
        assert answer.error_code == ErrorCode.NONE and partition.error_code == ErrorCode.NONE
        assert [v.replica_id for v in partition.current_voters] == [partition.leader_id]
        assert partition.leader_id not in (0, 1)  # the controller process
        assert partition.current_voters[0].log_end_offset == partition.high_watermark > 0
        assert [o.replica_id for o in partition.observers] == [0, 1]
        assert all(o.log_end_offset <= partition.high_watermark for o in partition.observers)
        other = asyncio.run(ask("orders", 0))
        assert other.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
