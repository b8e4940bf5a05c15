"""DescribeCluster v2 (Kafka 4.0, KIP-1073): a killed broker, once fenced, is left out of the brokers listed, and
listed with is_fenced when the request includes fenced brokers; older versions never list it."""

from __future__ import annotations

import asyncio
from typing import Any

from epoch_broker import testing
from epoch_broker.client.aio import KafkaClient
from epoch_broker.protocol.messages import describe_cluster
from tests.helpers import wait_for


async def brokers(address: str, version: int, include_fenced: bool) -> dict[int, Any]:
    async with await KafkaClient.connect(address) as client:
        answer = await client.request(describe_cluster.API, version, describe_cluster.REQUEST.cls(
            include_fenced_brokers=include_fenced))
    assert answer.error_code == 0
    return {b.broker_id: b for b in answer.brokers}


def test_a_fenced_broker_is_listed_with_is_fenced_only_when_asked_for() -> None:
    with testing.cluster(2) as cluster:
        address = cluster.address(1)

        async def check() -> None:
            both = await brokers(address, 2, include_fenced=True)
            assert sorted(both) == [0, 1] and not any(b.is_fenced for b in both.values())
            cluster.kill(0)
            await wait_for(lambda: _fenced(address), timeout=60)
            assert sorted(await brokers(address, 2, include_fenced=False)) == [1]
            assert sorted(await brokers(address, 1, include_fenced=True)) == [1]  # v1 has no such field
            listed = await brokers(address, 2, include_fenced=True)
            assert [(n, b.is_fenced) for n, b in sorted(listed.items())] == [(0, True), (1, False)]
            assert f"{listed[0].host}:{listed[0].port}" == cluster.address(0)

        asyncio.run(check())


async def _fenced(address: str) -> bool:
    return list(await brokers(address, 2, include_fenced=False)) == [1]
