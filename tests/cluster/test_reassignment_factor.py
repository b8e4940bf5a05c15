"""AlterPartitionReassignments v1 (Kafka 4.1): with allow_replication_factor_change false, a target of another size
than the partition's replicas is INVALID_REPLICATION_FACTOR and nothing moves; one of the same size starts. Sent to
a broker, which forwards it to the controller with the flag."""

from __future__ import annotations

import asyncio
from typing import Any

from epoch_broker import testing
from epoch_broker.client.aio import KafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import alter_partition_reassignments

R = alter_partition_reassignments.REQUEST


async def reassign(address: str, replicas: list[int], allow: bool, version: int = 1) -> Any:
    async with await KafkaClient.connect(address) as client:
        return await client.request(alter_partition_reassignments.API, version, R.cls(
            allow_replication_factor_change=allow, topics=[R.ReassignableTopic(name="t", partitions=[
                R.ReassignablePartition(partition_index=0, replicas=replicas)])]))


def test_a_change_of_replication_factor_is_refused_unless_allowed() -> None:
    with testing.cluster(3) as cluster:
        cluster.create_topic("t", replication_factor=2)
        before = cluster.state("t", 0)
        assert before is not None
        replicas = list(before.replicas)
        spare = ({0, 1, 2} - set(replicas)).pop()

        async def check() -> None:
            answer = await reassign(cluster.address(spare), [*replicas, spare], allow=False)
            (partition,) = answer.responses[0].partitions
            assert (answer.error_code, partition.error_code) == (ErrorCode.NONE, ErrorCode.INVALID_REPLICATION_FACTOR)
            assert answer.allow_replication_factor_change is False
            assert "from 2 to 3" in partition.error_message
            answer = await reassign(cluster.address(spare), [replicas[0], spare], allow=False)
            assert answer.responses[0].partitions[0].error_code == ErrorCode.NONE
            testing.wait_until(lambda: getattr(cluster.state("t", 0), "replicas", None) == (replicas[0], spare),
                               "the partition moved to the same number of replicas")

        asyncio.run(check())
