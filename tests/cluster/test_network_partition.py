"""fault.network.partition and fault.network.delay, the product's own network faults (no tc/netem here): cut or
slowed inside the brokers' connection layer, per pair of peers, both ways or one way, between brokers, to the
controller, and to a client."""

from __future__ import annotations

import time

import pytest

from epoch_broker.broker.faults import NETWORK_DELAY, NETWORK_PARTITION
from epoch_broker.client.aio import ConnectionClosed
from epoch_broker.drill.admin import AdminError, alter_faults
from epoch_broker.protocol.messages import metadata
from tests.cluster.support import Cluster, clear_fault, create_topic, produce_offset, wait_state

pytestmark = pytest.mark.slow


@pytest.mark.cluster(brokers=3)
async def test_a_follower_cut_off_from_its_leader_leaves_the_isr_and_returns_once_healed(cluster: Cluster) -> None:
    await create_topic(cluster, "cut", assignments=[[0, 1, 2]])
    # one way is enough: broker 1 no longer fetches from broker 0 (its replica fetcher's link is down)
    assert await cluster.set_fault(1, NETWORK_PARTITION, "0") == "applied"
    assert await produce_offset(cluster, 0, "cut", b"a") == 0  # acks=all completes once 1 is out of the ISR
    await wait_state(cluster, "cut", lambda s: s.isr == (0, 2), what="ISR without broker 1", timeout=15)
    await clear_fault(cluster, 1, NETWORK_PARTITION)
    await wait_state(cluster, "cut", lambda s: set(s.isr) == {0, 1, 2}, what="broker 1 back in the ISR", timeout=15)


@pytest.mark.cluster(brokers=3)
async def test_the_leader_side_of_a_partition_closes_the_followers_fetches(cluster: Cluster) -> None:
    await create_topic(cluster, "served", assignments=[[0, 1, 2]])
    assert await cluster.set_fault(0, NETWORK_PARTITION, "2") == "applied"  # the leader refuses broker 2
    # (an idle follower that has everything is not out of sync, as in Kafka: a write makes it fall behind)
    assert await produce_offset(cluster, 0, "served", b"x", acks=1) == 0
    await wait_state(cluster, "served", lambda s: s.isr == (0, 1), what="ISR without broker 2", timeout=15)
    status = cluster.admin("status", "--json")
    assert '"fault.network.partition": "2"' in status.stdout


@pytest.mark.cluster(brokers=3)
async def test_a_broker_cut_off_from_the_controller_is_fenced_and_its_leaderships_move(cluster: Cluster) -> None:
    await create_topic(cluster, "fenced", assignments=[[0, 1, 2]])
    assert await cluster.set_fault(0, NETWORK_PARTITION, "controller") == "applied"
    state = await wait_state(cluster, "fenced", lambda s: s.leader != 0 and 0 not in s.isr, node=1,
                             what="leadership moved off broker 0", timeout=15)
    assert state.leader == 1
    assert "kind=fence broker=0" in cluster.log_text(1000)
    await clear_fault(cluster, 0, NETWORK_PARTITION)
    await wait_state(cluster, "fenced", lambda s: 0 in s.isr, node=1, what="broker 0 back", timeout=20)


@pytest.mark.cluster(brokers=1)
async def test_a_client_cut_off_by_client_id_sees_its_connection_closed(cluster: Cluster) -> None:
    assert await cluster.set_fault(0, NETWORK_PARTITION, "client:epoch-broker-client") == "applied"
    with pytest.raises(ConnectionClosed):  # its first request (ApiVersions) gets the connection closed
        async with cluster.client(0):
            pass
    # another client (the admin tool's client.id) is served, and lifts the cut
    await clear_fault(cluster, 0, NETWORK_PARTITION)
    async with cluster.client(0) as client:
        assert (await client.request(metadata.API, 12, metadata.REQUEST.cls(topics=None))).brokers
    with pytest.raises(AdminError, match="not a peer"):
        await alter_faults(cluster.broker(0).address, 0, {NETWORK_PARTITION: "nobody"})


@pytest.mark.cluster(brokers=1)
async def test_a_delayed_link_makes_every_request_from_that_peer_wait(cluster: Cluster) -> None:
    assert await cluster.set_fault(0, NETWORK_DELAY, "client:epoch-broker-client=400") == "applied"
    async with cluster.client(0) as client:
        started = time.monotonic()
        await client.request(metadata.API, 12, metadata.REQUEST.cls(topics=None))
        assert time.monotonic() - started >= 0.4  # a lower bound: the link's delay, whatever the machine's load
    assert '"fault.network.delay": "client:epoch-broker-client=400"' in cluster.admin("status", "--json").stdout
    with pytest.raises(AdminError, match="not peer=milliseconds"):
        await alter_faults(cluster.broker(0).address, 0, {NETWORK_DELAY: "1=soon"})
