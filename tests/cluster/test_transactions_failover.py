"""Transactions across failovers, on real processes: `__transaction_state` is replicated like any topic, so when the
broker coordinating a transactional id is SIGKILLed mid-transaction, the new leader of the id's partition loads the
transaction and the producer commits it there; the markers reach every partition, whoever leads it now. A
`read_committed` consumer reads each committed record exactly once and no aborted one."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from epoch_broker.drill import admin
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import add_partitions_to_txn, end_txn, init_producer_id, produce
from epoch_broker.protocol.records import build_batch
from tests.cluster.support import Cluster, clear_fault, create_topic
from tests.helpers import not_yet, wait_for
from tests.transactions.conftest import read_all, values

pytestmark = pytest.mark.slow

TOPIC = "payments"
PARTITIONS = 3


def transactional_id() -> str:
    """One per test: a producer of an earlier test, still retrying its cluster's ports, must not be this one."""
    return f"payments-writer-{uuid.uuid4().hex[:8]}"


async def transaction_coordinator(cluster: Cluster, node: int, txn_id: str) -> int:
    """The coordinator of `txn_id` as broker `node` knows it (AdminError if it knows none)."""
    return await admin.transaction_coordinator([cluster.broker(node).address], txn_id)


def send(producer: Producer, prefix: str, count: int = 12) -> list[str]:
    sent = [f"{prefix}-{i}" for i in range(count)]
    for i, value in enumerate(sent):
        producer.produce(TOPIC, value=value, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    return sent


async def test_a_transaction_commits_after_its_coordinator_is_sigkilled_and_aborted_records_stay_hidden(
        cluster: Cluster) -> None:
    await create_topic(cluster, TOPIC, partitions=PARTITIONS)
    txn_id = transactional_id()
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id,
                         "linger.ms": 5, "transaction.timeout.ms": 60000})
    await asyncio.to_thread(producer.init_transactions, 60)
    committed: list[str] = []

    producer.begin_transaction()
    committed += send(producer, "before")
    await asyncio.to_thread(producer.commit_transaction, 60)
    producer.begin_transaction()
    send(producer, "aborted")
    await asyncio.to_thread(producer.abort_transaction, 60)

    producer.begin_transaction()
    in_flight = send(producer, "in-flight")
    coordinator = await transaction_coordinator(cluster, 0, txn_id)
    cluster.kill(coordinator)  # mid-transaction: its records are written, its EndTxn not yet sent
    survivor = next(spec.node_id for spec in cluster.file.brokers if spec.node_id != coordinator)
    await asyncio.to_thread(producer.commit_transaction, 60)  # at the new coordinator, which loaded it Ongoing
    committed += in_flight
    assert await transaction_coordinator(cluster, survivor, txn_id) != coordinator

    producer.begin_transaction()
    committed += send(producer, "after")
    await asyncio.to_thread(producer.commit_transaction, 60)
    producer.begin_transaction()
    send(producer, "aborted-after")
    await asyncio.to_thread(producer.abort_transaction, 60)

    read = await asyncio.to_thread(read_all, cluster.bootstrap, TOPIC, PARTITIONS, "read_committed", len(committed))
    assert values(read) == sorted(committed)  # each once: no duplicate, no aborted record
    cluster.restart(coordinator)  # the old coordinator comes back as a follower of everything it led
    cluster.wait_for_isr(TOPIC, 0, 3)
    cluster.wait_for_isr(TOPIC, 1, 3)
    cluster.wait_for_isr(TOPIC, 2, 3)
    read = await asyncio.to_thread(read_all, cluster.bootstrap, TOPIC, PARTITIONS, "read_committed", len(committed))
    assert values(read) == sorted(committed)


async def test_an_abort_right_after_a_commit_whose_markers_are_slow_aborts_instead_of_failing_the_producer(
        cluster: Cluster) -> None:
    """librdkafka registers a new transaction's partitions while the previous commit still writes its markers
    (Kafka answers CONCURRENT_TRANSACTIONS, it retries); aborting between two retries sends EndTxn(abort) for a
    transaction that never began, INVALID_TXN_STATE once the commit completes, fatal to the producer. The
    coordinator holds AddPartitionsToTxn until the previous transaction settles, so the abort finds it begun."""
    await create_topic(cluster, TOPIC, partitions=PARTITIONS)
    for node in range(3):  # every WriteTxnMarkers waits: the commit stays prepared for a while
        await cluster.set_fault(node, "fault.request.write_txn_markers", "delay.ms=400")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": transactional_id(),
                         "linger.ms": 5})
    await asyncio.to_thread(producer.init_transactions, 60)
    committed: list[str] = []
    for round_number in range(3):
        producer.begin_transaction()
        committed += send(producer, f"committed-{round_number}", count=PARTITIONS)
        await asyncio.to_thread(producer.commit_transaction, 60)
        producer.begin_transaction()  # at once, as a consume-transform-produce loop does
        for i in range(PARTITIONS):
            producer.produce(TOPIC, value=f"aborted-{round_number}-{i}", partition=i)
        producer.poll(0.05)  # librdkafka sends AddPartitionsToTxn: still prepared, the commit's markers wait
        await asyncio.to_thread(producer.abort_transaction, 60)  # raised INVALID_TXN_STATE (fatal) before
    read = await asyncio.to_thread(read_all, cluster.bootstrap, TOPIC, PARTITIONS, "read_committed", len(committed))
    assert values(read) == sorted(committed)


async def test_a_prepared_commit_is_completed_by_the_next_coordinator_when_the_first_dies_before_its_markers(
        cluster: Cluster) -> None:
    """EndTxn is answered once PrepareCommit is durable; the markers follow. With one partition's leader refusing
    WriteTxnMarkers, the commit stays prepared there (its last stable offset holds read_committed readers back);
    the coordinator is SIGKILLed; its successor finds PrepareCommit in `__transaction_state` and finishes it,
    though nobody asks it anything about transactions: the producer speaks only to the first coordinator."""
    await create_topic(cluster, TOPIC, partitions=PARTITIONS)
    # node 0 alone is asked where ids live (which starts its coordinator); the id chosen is coordinated there
    coordinator = 0
    txn_id = transactional_id()
    while await transaction_coordinator(cluster, 0, txn_id) != coordinator:
        txn_id = transactional_id()
    leaders = {p: cluster.leader(TOPIC, p) for p in range(PARTITIONS)}
    blocked_partition = next(p for p in range(PARTITIONS) if leaders[p] != coordinator)
    blocked = leaders[blocked_partition]
    async with cluster.client(coordinator) as client:

        async def initialised() -> object:  # the coordinator may still be loading the id's partition: retry
            init = await client.request(init_producer_id.API, 1, init_producer_id.REQUEST.cls(
                transactional_id=txn_id, transaction_timeout_ms=60000))
            return init if init.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else not_yet(init)

        init = await wait_for(initialised, 30, what=f"InitProducerId for {txn_id} answered, the coordinator loaded")
        assert init.error_code == ErrorCode.NONE, init
        added = await client.request(add_partitions_to_txn.API, 3, add_partitions_to_txn.REQUEST.cls(
            v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=init.producer_id,
            v3_and_below_producer_epoch=init.producer_epoch, v3_and_below_topics=[
                add_partitions_to_txn.REQUEST.AddPartitionsToTxnTopic(name=TOPIC, partitions=list(leaders))]))
        assert all(result.partition_error_code == ErrorCode.NONE
                   for topic in added.results_by_topic_v3_and_below for result in topic.results_by_partition), added
        committed = []
        for partition, leader in leaders.items():
            sent = [f"prepared-{partition}-{i}" for i in range(4)]
            await produce_transactional(cluster, leader, txn_id, init, partition, sent)
            committed += sent
        await cluster.set_fault(blocked, "fault.request.write_txn_markers", "error=NOT_LEADER_OR_FOLLOWER")
        ended = await client.request(end_txn.API, 3, end_txn.REQUEST.cls(
            transactional_id=txn_id, producer_id=init.producer_id, producer_epoch=init.producer_epoch,
            committed=True))
        assert ended.error_code == ErrorCode.NONE, ended
    reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "lso-watch",
                       "isolation.level": "read_committed"})
    try:
        partition = TopicPartition(TOPIC, blocked_partition)
        stable = await asyncio.to_thread(reader.get_watermark_offsets, partition, 10)
        assert stable == (0, 0), "the blocked partition's records are not stable before their marker"
        cluster.kill(coordinator)
        await clear_fault(cluster, blocked, "fault.request.write_txn_markers")
        read = await asyncio.to_thread(read_all, cluster.bootstrap, TOPIC, PARTITIONS, "read_committed",
                                       len(committed))
        assert values(read) == sorted(committed)
        high = await asyncio.to_thread(reader.get_watermark_offsets, partition, 10)
        assert high[1] == len(committed) // PARTITIONS + 1  # the records and the commit marker
    finally:
        reader.close()


async def produce_transactional(cluster: Cluster, node: int, txn_id: str, producer: Any, partition: int,
                                sent: list[str]) -> None:
    records = build_batch([(None, value.encode(), [], None) for value in sent], producer_id=producer.producer_id,
                          producer_epoch=producer.producer_epoch, base_sequence=0, is_transactional=True)
    async with cluster.client(node) as client:
        answer = await client.request(produce.API, 9, produce.REQUEST.cls(
            transactional_id=txn_id, acks=-1, timeout_ms=10000, topic_data=[produce.REQUEST.TopicProduceData(
                name=TOPIC, partition_data=[produce.REQUEST.PartitionProduceData(index=partition, records=records)])]))
    result = answer.responses[0].partition_responses[0]
    assert result.error_code == ErrorCode.NONE, result
