"""Issue 14's attacks, replayed from a client without credentials against a cluster the launcher started (its
secret generated, fault hooks off with `--no-fault-hooks`), with no security configured by the user and with an
authorizer: every request that only brokers may send is refused with an error code, every fault key with
INVALID_CONFIG, and no broker exits or loses an acknowledged record.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from epoch_broker.broker.faults import CATALOGUE, REQUEST_RULE_PREFIX
from epoch_broker.client.aio import KafkaClient
from epoch_broker.drill import admin, launcher
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import (
    allocate_producer_ids,
    alter_partition,
    broker_heartbeat,
    broker_registration,
    fetch,
    offset_for_leader_epoch,
)
from tests.cluster.support import Cluster, create_topic, start_cluster
from tests.helpers import not_yet, wait_for_sync

CONTROLLER = launcher.CONTROLLER_NODE_ID
RECORDS = 300
pytestmark = pytest.mark.slow


SECURED = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
           "allow.everyone.if.no.acl.found": "true"}  # clients may do what no ACL forbids; brokers' APIs stay theirs


@pytest.fixture(scope="module", params=[{}, SECURED], ids=["no-security-configured", "with-an-authorizer"])
def hardened(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """3 brokers started as `epoch-broker cluster --no-fault-hooks` starts them, with the param's overrides."""
    cluster = start_cluster(tmp_path_factory.mktemp("hardened"), 3, {"fault.hooks.enable": "false", **request.param})
    try:
        yield cluster
    finally:
        cluster.stop()


def produce_acknowledged(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    failed: list[Any] = []
    for i in range(RECORDS):
        producer.produce(topic, f"{i}".encode(), on_delivery=lambda err, _m: failed.append(err) if err else None)
    assert producer.flush(60) == 0 and not failed, failed


def read_all(bootstrap: str, topic: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values: list[bytes] = []

    def read() -> object:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
        return len(values) >= RECORDS or not_yet(f"{len(values)} read")

    try:
        wait_for_sync(read, 60, interval=0, what=f"{RECORDS} records of {topic}")
    finally:
        consumer.close()
    return values


def broker_epoch(cluster: Cluster, node: int) -> int:
    """The node's current broker epoch, from its log (Metadata does not carry it): what a forger would guess."""
    return int(re.findall(r"registered with broker epoch (\d+)", cluster.log_text(node))[-1])


async def send(address: str, api: Any, version: int, body: Any) -> Any:
    async with await KafkaClient.connect(address, client_id="forger") as client:
        return await client.request(api, version, body)


async def test_requests_only_brokers_send_are_refused_and_nothing_is_lost(hardened: Cluster) -> None:
    await create_topic(hardened, "precious", partitions=1)
    produce_acknowledged(hardened.bootstrap, "precious")
    before = await hardened.metadata()
    controller = hardened.broker(CONTROLLER).address
    epochs = {node: broker_epoch(hardened, node) for node in (0, 1, 2)}
    refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    registration = broker_registration.REQUEST
    forged = registration.cls(broker_id=1, cluster_id="", incarnation_id=uuid.uuid4().bytes, rack=None,
                              listeners=[registration.Listener(name="PLAINTEXT", host="10.6.6.6", port=6666,
                                                               security_protocol=0)])
    assert (await send(controller, broker_registration.API, 0, forged)).error_code == refused
    heartbeat = broker_heartbeat.REQUEST.cls(broker_id=2, broker_epoch=epochs[2], current_metadata_offset=0,
                                             want_fence=True, want_shut_down=True)
    assert (await send(controller, broker_heartbeat.API, 0, heartbeat)).error_code == refused
    shrink = alter_partition.REQUEST.cls(broker_id=0, broker_epoch=epochs[0], topics=[
        alter_partition.REQUEST.TopicData(topic_id=uuid.uuid4().bytes, partitions=[
            alter_partition.REQUEST.PartitionData(partition_index=0, leader_epoch=before[("precious", 0)].leader_epoch,
                                                  new_isr_with_epochs=[], partition_epoch=0)])])
    assert (await send(controller, alter_partition.API, 3, shrink)).error_code == refused
    ids = allocate_producer_ids.REQUEST.cls(broker_id=0, broker_epoch=epochs[0])
    assert (await send(controller, allocate_producer_ids.API, 0, ids)).error_code == refused
    metadata_log = fetch.REQUEST.cls(replica_state=fetch.REQUEST.ReplicaState(replica_id=0, replica_epoch=epochs[0]),
                                     max_wait_ms=0, min_bytes=1, topics=[])
    assert (await send(controller, fetch.API, 13, metadata_log)).error_code == refused

    leader = before[("precious", 0)].leader
    leader_address = hardened.broker(leader).address
    follower = next(node for node in before[("precious", 0)].replicas if node != leader)
    replica_fetch = fetch.REQUEST.cls(replica_id=follower, max_wait_ms=0, min_bytes=1, topics=[
        fetch.REQUEST.FetchTopic(topic="precious", partitions=[fetch.REQUEST.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    answer = await send(leader_address, fetch.API, 12, replica_fetch)
    assert answer.error_code == refused
    assert all(p.error_code == refused and not p.records for t in answer.responses for p in t.partitions)
    as_replica = offset_for_leader_epoch.REQUEST.cls(replica_id=follower, topics=[
        offset_for_leader_epoch.REQUEST.OffsetForLeaderTopic(topic="precious", partitions=[
            offset_for_leader_epoch.REQUEST.OffsetForLeaderPartition(partition=0, leader_epoch=0)])])
    answer = await send(leader_address, offset_for_leader_epoch.API, 4, as_replica)
    assert [p.error_code for t in answer.topics for p in t.partitions] == [refused]

    for spec in CATALOGUE:  # the hooks are off: every key is refused and nothing happens
        key = spec.key.replace("<api>", "produce") if spec.key.startswith(REQUEST_RULE_PREFIX) else spec.key
        with pytest.raises(admin.AdminError, match="INVALID_CONFIG"):
            await admin.alter_faults(leader_address, leader, {key: "true"})

    for node in [CONTROLLER, 0, 1, 2]:
        assert launcher.is_running(hardened.broker(node)), f"node {node} exited"
    assert await hardened.metadata() == before  # no fencing, no election, no ISR change
    assert {node: broker_epoch(hardened, node) for node in (0, 1, 2)} == epochs  # nobody registered again
    assert read_all(hardened.bootstrap, "precious") == [f"{i}".encode() for i in range(RECORDS)]
    assert "refused: not a broker" in hardened.log_text(CONTROLLER)
