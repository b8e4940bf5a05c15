"""Durability across failovers on real processes: what an idempotent acks=all producer was told is written
is all there, once, in order, after leaders were SIGKILLed under load (docs/cluster.md: elections, acks=all
with min.insync.replicas; KIP-101 truncation keeps followers from diverging).
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import pytest
import trustme

from epoch_broker.drill import launcher
from tests.cluster.support import (
    Cluster,
    NumberedProducer,
    check_numbered,
    consume_numbered,
    create_topic,
    leaders_high_watermarks,
    partition_state,
    start_cluster,
    wait_for,
)

pytestmark = pytest.mark.slow

TOPIC = "durable"
PARTITIONS = 3
FAILOVERS = 3


@pytest.mark.cluster(brokers=3)
async def test_every_acknowledged_record_survives_three_leader_sigkills_once_and_in_order(cluster: Cluster) -> None:
    """acks=all with min.insync.replicas=2 and an idempotent producer: after three SIGKILL failovers (kill the
    leader, new leader in Metadata, restart, back in the ISR), every acknowledged record is consumed exactly
    once, at the offset it was acknowledged with, in order per partition, with nothing in between."""
    await _survives_leader_sigkills(cluster)


async def test_the_same_holds_with_sasl_ssl_between_the_brokers_and_to_the_controller(tmp_path: Path) -> None:
    """The cluster's own traffic over SASL_SSL (TLS verified against a test CA, host names checked, the
    cluster secret's SCRAM-SHA-512 login): replication, registrations and heartbeats keep every acknowledged
    record through the same failovers."""
    ca = trustme.CA()
    server_pem, ca_pem = tmp_path / "server.pem", tmp_path / "ca.pem"
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(server_pem))
    ca.cert_pem.write_to_path(str(ca_pem))
    cluster = start_cluster(tmp_path, 3, {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL",
        "ssl.keystore.location": server_pem, "ssl.truststore.location": ca_pem})
    try:
        await _survives_leader_sigkills(cluster)
        for node in (launcher.CONTROLLER_NODE_ID, 0, 1, 2):  # every SASL listener saw only the brokers' login
            logins = re.findall(r"authenticated as (\S+) on (\w+)", cluster.log_text(node))
            assert logins and set(logins) <= {("User:epoch-broker", "CONTROLLER"), ("User:epoch-broker", "INTERNAL")}
    except BaseException:
        print(f"process logs of the failed test:\n{cluster.log_tails()}")
        raise
    finally:
        cluster.stop()


async def _survives_leader_sigkills(cluster: Cluster) -> None:
    await create_topic(cluster, TOPIC, partitions=PARTITIONS, configs={"min.insync.replicas": "2"})
    writer = NumberedProducer(cluster.bootstrap, TOPIC, PARTITIONS).start()
    timings: list[tuple[int, int, float, float]] = []  # (partition, killed node, to new leader, to full ISR)
    try:
        await wait_for(lambda: writer.acked_count() >= 200, what="the first acknowledgements", timeout=20)
        for failover in range(FAILOVERS):
            partition = failover % PARTITIONS
            before = (await cluster.metadata())[(TOPIC, partition)]
            cluster.kill(before.leader)
            killed_at = time.monotonic()
            await wait_for(lambda p=partition, old=before: partition_state(
                cluster, TOPIC, p, lambda s: s.leader not in (old.leader, -1) and s.leader_epoch > old.leader_epoch),
                what=f"a new leader of {TOPIC}-{partition}", timeout=15)
            elected_at = time.monotonic()
            cluster.restart(before.leader)
            await wait_for(lambda: _all_isr_full(cluster), what="every ISR back to 3", timeout=20)
            timings.append((partition, before.leader, elected_at - killed_at, time.monotonic() - killed_at))
            acked = writer.acked_count()
            await wait_for(lambda a=acked: writer.acked_count() >= a + 100, what="acknowledgements after the failover",
                           timeout=20)
    finally:
        await writer.stop_sending()
    await writer.flush_and_check()

    ends = await leaders_high_watermarks(cluster, TOPIC, PARTITIONS)
    consumed = await asyncio.to_thread(consume_numbered, cluster.bootstrap, TOPIC, ends)
    check_numbered(writer, consumed)  # all were acknowledged (no failure above): 0..sent-1, once, in order
    print(f"acked {writer.acked_count()} records ({writer.sent}); failovers (partition, killed node, "
          "s to the new leader, s to the full ISR): " + ", ".join(f"({p}, {n}, {e:.2f}, {f:.2f})"
                                                                    for p, n, e, f in timings))


async def _all_isr_full(cluster: Cluster) -> bool:
    partitions = await cluster.metadata()
    return all(len(partitions[(TOPIC, p)].isr) == 3 for p in range(PARTITIONS))
