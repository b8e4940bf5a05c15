"""KIP-890 part 1 across brokers, on real processes: the leader of a partition is not the coordinator of the
producer's transactional id, so it verifies over the wire (AddPartitionsToTxn v5 verify_only); the partition that was
added takes the write, a stray one is refused and keeps nothing."""

from __future__ import annotations

import uuid
from typing import Any

from epoch_broker.drill import admin
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import add_partitions_to_txn, init_producer_id, produce
from epoch_broker.protocol.records import build_batch
from tests.cluster.support import Cluster, create_topic, list_offset
from tests.helpers import not_yet, wait_for

TOPIC = "orders"


async def test_a_leader_verifies_with_a_coordinator_on_another_broker_and_refuses_a_stray_write(
        cluster: Cluster) -> None:
    txn_id = f"checkout-{uuid.uuid4().hex[:8]}"

    async def coordinator_found() -> Any:  # the first FindCoordinator creates __transaction_state
        try:
            return (await admin.transaction_coordinator([cluster.broker(0).address], txn_id),)  # node 0 is falsy
        except admin.AdminError as exc:
            return not_yet(exc)

    (coordinator,) = await wait_for(coordinator_found, 30, what=f"the coordinator of {txn_id}")
    leader = (coordinator + 1) % 3
    await create_topic(cluster, TOPIC, assignments=[[leader], [leader]])
    async with cluster.client(coordinator) as client:

        async def initialised() -> Any:  # the coordinator may still be loading the id's partition
            init = await client.request(init_producer_id.API, 1, init_producer_id.REQUEST.cls(
                transactional_id=txn_id, transaction_timeout_ms=60000))
            return init if init.error_code == ErrorCode.NONE else not_yet(init)

        init = await wait_for(initialised, 30, what=f"InitProducerId for {txn_id}")
        q = add_partitions_to_txn.REQUEST
        added = await client.request(add_partitions_to_txn.API, 3, q.cls(
            v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=init.producer_id,
            v3_and_below_producer_epoch=init.producer_epoch,
            v3_and_below_topics=[q.AddPartitionsToTxnTopic(name=TOPIC, partitions=[0])]))
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0, added

    def records(value: bytes) -> bytearray:
        return build_batch([(None, value, [], None)], producer_id=init.producer_id,
                           producer_epoch=init.producer_epoch, base_sequence=0, is_transactional=True)

    async with cluster.client(leader) as client:
        q = produce.REQUEST
        response = await client.request(produce.API, 10, q.cls(
            transactional_id=txn_id, acks=-1, timeout_ms=10000, topic_data=[q.TopicProduceData(
                name=TOPIC, partition_data=[q.PartitionProduceData(index=0, records=records(b"added")),
                                            q.PartitionProduceData(index=1, records=records(b"stray"))])]))
        answers = {p.index: p.error_code for p in response.responses[0].partition_responses}
        assert answers == {0: ErrorCode.NONE, 1: ErrorCode.INVALID_TXN_STATE}
        assert (await list_offset(client, TOPIC, 7, partition=1)).offset == 0
