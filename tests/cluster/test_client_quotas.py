"""Client quotas in a cluster: AlterClientQuotas sent to a broker is forwarded to the controller process, stored in
the metadata log, and every broker describes and enforces it."""

from __future__ import annotations

import asyncio
from typing import Any

from epoch_broker import testing
from epoch_broker.client.aio import KafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import create_topics
from tests.broker.conftest import batch, produce_request
from tests.broker.test_client_quotas import alter, describe, entries

P = (("client-id", "p"),)
QUOTAS = {P: {"producer_byte_rate": 1000.0}}


def test_a_quota_altered_through_a_broker_is_the_cluster_s() -> None:
    with testing.cluster(2) as cluster:
        async def altered(validate_only: bool) -> Any:
            async with await KafkaClient.connect(cluster.address(1)) as client:
                await client.negotiate()
                results = await alter(client, [(P, {"producer_byte_rate": 1000.0})], validate_only=validate_only)
                return results, entries(await describe(client, []))

        assert asyncio.run(altered(True)) == ([(P, ErrorCode.NONE, None)], {})
        # answered once broker 1 has applied it: it describes the quota at once
        assert asyncio.run(altered(False)) == ([(P, ErrorCode.NONE, None)], QUOTAS)

        async def described_on_broker_0() -> bool:
            async with await KafkaClient.connect(cluster.address(0)) as client:
                await client.negotiate()
                return entries(await describe(client, [])) == QUOTAS

        testing.wait_until(lambda: asyncio.run(described_on_broker_0()), "broker 0 describes the quota")

        async def produced_on_broker_0() -> Any:
            async with await KafkaClient.connect(cluster.address(0), client_id="p") as client:
                await client.negotiate()
                created = await client.request(create_topics.API, 7, create_topics.REQUEST.cls(
                    timeout_ms=10_000, topics=[create_topics.REQUEST.CreatableTopic(
                        name="quoted", num_partitions=-1, replication_factor=-1,
                        assignments=[create_topics.REQUEST.CreatableReplicaAssignment(
                            partition_index=0, broker_ids=[0])])]))
                assert created.topics[0].error_code == ErrorCode.NONE, created
                # 12 KB against 1000 B/s: over the 10 s a young rate allows
                return await produce_request(client, "quoted", batch(b"v" * 12_000))

        response = asyncio.run(produced_on_broker_0())
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        assert 1500 <= response.throttle_time_ms <= 2500
