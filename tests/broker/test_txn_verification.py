"""KIP-890 part 1: a transactional produce to a partition not added to the producer's transaction is refused.

First the partition's guard, socket-free (Kafka's VerificationGuard: a verification in flight when a marker of its
producer is written opens nothing); then through a broker's socket: raw Produce requests of a transactional
producer that added one partition of two, at Produce v10 (INVALID_TXN_STATE) and v11+ (TRANSACTION_ABORTABLE),
nothing appended and the last stable offset not held; and brokers that do not verify (the switch off, or claiming
Kafka 3.5), where the stray write is appended as before.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from epoch_broker import testing
from epoch_broker.broker.app import Broker
from epoch_broker.broker.replica.partition import NO_GUARD, Partition, VerificationGuard
from epoch_broker.client.aio import KafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import list_offsets, produce
from epoch_broker.protocol.records import EndTxnMarker, build_batch
from tests.broker.conftest import create_topic
from tests.broker.test_new_versions import begin_transaction
from tests.broker.test_partition import make_partition

PRODUCER_ID, PRODUCER_EPOCH = 4000, 0
ABORT = EndTxnMarker(commit=False, coordinator_epoch=0)


def transactional(*values: bytes, sequence: int = 0, producer_id: int = PRODUCER_ID) -> bytearray:
    return build_batch([(None, value, [], None) for value in values], producer_id=producer_id,
                       producer_epoch=PRODUCER_EPOCH, base_sequence=sequence, is_transactional=True)


def start(partition: Partition, producer_id: int = PRODUCER_ID) -> VerificationGuard:
    verification = partition.maybe_start_transaction_verification(transactional(b"probe", producer_id=producer_id))
    assert verification is not None
    assert (verification.producer_id, verification.producer_epoch) == (producer_id, PRODUCER_EPOCH)
    return verification.guard


# -- the guard (Partition) -----------------------------------------------------------------------------------

def test_a_verified_append_opens_the_transaction_and_later_batches_need_no_guard(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    guard = start(partition)
    assert partition.append_records_to_leader(transactional(b"a"), verification_guard=guard).error == ErrorCode.NONE
    assert partition.maybe_start_transaction_verification(transactional(b"b", sequence=1)) is None  # open here
    second = partition.append_records_to_leader(transactional(b"b", sequence=1), verification_guard=NO_GUARD)
    assert (second.error, second.base_offset) == (ErrorCode.NONE, 1)


def test_a_verification_in_flight_when_an_abort_marker_is_written_appends_nothing(tmp_path: Path) -> None:
    """Kafka's ABA case: verified (the partition was in the transaction), the transaction aborted meanwhile, the
    producer's next transaction adds the partition again: the stale answer must not open it."""
    partition = make_partition(tmp_path)
    guard = start(partition)
    assert partition.append_end_txn_marker(PRODUCER_ID, PRODUCER_EPOCH, ABORT, 0).error == ErrorCode.NONE
    end = partition.log.log_end_offset
    refused = partition.append_records_to_leader(transactional(b"late"), verification_guard=guard)
    assert refused.error == ErrorCode.INVALID_TXN_STATE
    assert partition.log.log_end_offset == end
    assert PRODUCER_ID not in partition.log.producer_state.open_txns  # no transaction opened
    fresh = start(partition)  # the producer's retry verifies again, with a new guard
    assert fresh is not guard
    assert partition.append_records_to_leader(transactional(b"late"), verification_guard=fresh).error == \
        ErrorCode.NONE


@pytest.mark.parametrize(("guard_of", "expected"), [
    ("none", ErrorCode.NONE),  # an append that is not verified (the switch off, a coordinator's own write)
    ("no guard", ErrorCode.INVALID_TXN_STATE),  # a verifying broker's produce that took none
    ("another producer's", ErrorCode.INVALID_TXN_STATE),
    ("a guard left by leadership", ErrorCode.INVALID_TXN_STATE),  # taken before the partition was led elsewhere
    ("its own", ErrorCode.NONE),
])
def test_the_append_of_a_transaction_not_open_here_needs_the_guard_the_partition_holds(
        tmp_path: Path, guard_of: str, expected: ErrorCode) -> None:
    partition = make_partition(tmp_path)
    guard: VerificationGuard | None = {"none": None, "no guard": NO_GUARD}.get(guard_of)
    if guard_of == "another producer's":
        start(partition)
        guard = start(partition, PRODUCER_ID + 1)
    elif guard_of == "a guard left by leadership":
        guard = start(partition)
        partition.update(1, 6, 2, (0, 1, 2), (0, 1, 2), 0.0)
        partition.update(0, 7, 3, (0, 1, 2), (0, 1, 2), 0.0)
    elif guard_of == "its own":
        guard = start(partition)
    result = partition.append_records_to_leader(transactional(b"a"), verification_guard=guard)
    assert result.error == expected
    assert partition.log.log_end_offset == (1 if expected == ErrorCode.NONE else 0)


@pytest.mark.parametrize("records", [
    build_batch([(None, b"plain", [], None)]),  # not transactional
    build_batch([(None, b"idempotent", [], None)], producer_id=PRODUCER_ID, producer_epoch=0, base_sequence=0),
])
def test_batches_outside_transactions_need_no_verification(tmp_path: Path, records: bytearray) -> None:
    partition = make_partition(tmp_path)
    assert partition.maybe_start_transaction_verification(records) is None
    assert partition.append_records_to_leader(records, verification_guard=NO_GUARD).error == ErrorCode.NONE


def test_a_follower_starts_no_verification(tmp_path: Path) -> None:
    assert make_partition(tmp_path, leader=1).maybe_start_transaction_verification(transactional(b"a")) is None


def test_a_retry_while_verifying_shares_the_guard_in_flight(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    assert start(partition) is start(partition)


# -- through a broker --------------------------------------------------------------------------------------

TXN_ID = "checkout-7"


async def produce_transactional(client: KafkaClient, version: int, partitions: dict[int, bytearray],
                                transactional_id: str | None = TXN_ID) -> dict[int, Any]:
    """One Produce (acks=-1) of `partitions`' batches to topic "orders"; its answer per partition."""
    q = produce.REQUEST
    response = await client.request(produce.API, version, q.cls(
        transactional_id=transactional_id, acks=-1, timeout_ms=5000, topic_data=[q.TopicProduceData(
            name="orders", partition_data=[q.PartitionProduceData(index=index, records=records)
                                           for index, records in partitions.items()])]))
    return {answer.index: answer for answer in response.responses[0].partition_responses}


async def latest(client: KafkaClient, partition: int, read_committed: bool) -> int:
    q = list_offsets.REQUEST
    response = await client.request(list_offsets.API, 7, q.cls(
        replica_id=-1, isolation_level=int(read_committed), topics=[q.ListOffsetsTopic(
            name="orders", partitions=[q.ListOffsetsPartition(partition_index=partition, timestamp=-1)])]))
    return response.topics[0].partitions[0].offset


def batch_of(producer: tuple[int, int], value: bytes, sequence: int = 0) -> bytearray:
    return build_batch([(None, value, [], None)], producer_id=producer[0], producer_epoch=producer[1],
                       base_sequence=sequence, is_transactional=True)


@pytest.mark.parametrize(("version", "refusal"), [
    (9, ErrorCode.INVALID_TXN_STATE), (10, ErrorCode.INVALID_TXN_STATE),
    (11, ErrorCode.TRANSACTION_ABORTABLE), (12, ErrorCode.TRANSACTION_ABORTABLE)])
async def test_a_transactional_write_to_a_partition_not_in_the_transaction_is_refused(
        client: KafkaClient, version: int, refusal: ErrorCode) -> None:
    await create_topic(client, "orders", partitions=2)
    producer = await begin_transaction(client, TXN_ID, "orders", [0])
    answers = await produce_transactional(client, version, {0: batch_of(producer, b"added"),
                                                            1: batch_of(producer, b"stray")})
    assert (answers[0].error_code, answers[0].base_offset) == (ErrorCode.NONE, 0)
    assert answers[1].error_code == refusal
    assert await latest(client, 1, read_committed=False) == 0  # nothing appended
    # and no transaction held open there: a plain record is readable at once under read_committed
    plain = await produce_transactional(client, version, {1: build_batch([(None, b"plain", [], None)])}, None)
    assert plain[1].error_code == ErrorCode.NONE
    assert await latest(client, 1, read_committed=True) == 1
    assert await latest(client, 0, read_committed=True) == 0  # partition 0's transaction is open


async def test_a_transactional_batch_without_its_transactional_id_is_refused(client: KafkaClient) -> None:
    await create_topic(client, "orders", partitions=2)
    producer = await begin_transaction(client, TXN_ID, "orders", [0])
    answers = await produce_transactional(client, 10, {0: batch_of(producer, b"anonymous")}, transactional_id=None)
    assert answers[0].error_code == ErrorCode.INVALID_TXN_STATE


@pytest.mark.parametrize(("producer_delta", "expected"), [
    ((0, 1), ErrorCode.INVALID_PRODUCER_EPOCH),  # the coordinator's PRODUCER_FENCED, as producers expect it here
    ((1, 0), ErrorCode.INVALID_PRODUCER_ID_MAPPING)])
async def test_the_coordinators_refusal_of_another_producer_is_its_answer(
        client: KafkaClient, producer_delta: tuple[int, int], expected: ErrorCode) -> None:
    await create_topic(client, "orders", partitions=2)
    producer_id, epoch = await begin_transaction(client, TXN_ID, "orders", [0])
    other = (producer_id + producer_delta[0], epoch + producer_delta[1])
    answers = await produce_transactional(client, 11, {0: batch_of(other, b"x")})
    assert answers[0].error_code == expected
    assert await latest(client, 0, read_committed=False) == 0


@pytest.fixture(params=[{"transaction.partition.verification.enable": "false"}, {"kafka.version": "3.5"}],
                ids=["verification off", "kafka 3.5"])
async def unverifying_client(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[KafkaClient]:
    async with testing.broker(data_dir=tmp_path, config=request.param) as started:
        server: Broker = started.server
        async with await KafkaClient.connect(f"127.0.0.1:{server.advertised.port}") as connected:
            await connected.negotiate()
            yield connected


async def test_a_broker_that_does_not_verify_appends_the_stray_write_as_before(
        unverifying_client: KafkaClient) -> None:
    await create_topic(unverifying_client, "orders", partitions=2)
    producer = await begin_transaction(unverifying_client, TXN_ID, "orders", [0])
    answers = await produce_transactional(unverifying_client, 9, {1: batch_of(producer, b"stray")})
    assert (answers[1].error_code, answers[1].base_offset) == (ErrorCode.NONE, 0)
    assert await latest(unverifying_client, 1, read_committed=True) == 0  # it opened a transaction there
