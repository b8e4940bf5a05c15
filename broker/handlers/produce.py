"""Produce · v3-13 · append record batches as leader.

Behaviour: WRITE on each topic (Kafka's KafkaApis): a topic the principal may not write answers
TOPIC_AUTHORIZATION_FAILED for its partitions, before anything else is checked, and the other topics are
appended as usual. acks 0 (no response), 1 (after the local append) or -1 (after the high watermark passes the
batch: the delayed-produce purgatory, immediate on one broker); acks=-1 answers NOT_ENOUGH_REPLICAS and
appends nothing when the ISR is smaller than min.insync.replicas, NOT_ENOUGH_REPLICAS_AFTER_APPEND if it
shrank below it while waiting, NOT_LEADER_OR_FOLLOWER if leadership moved, and REQUEST_TIMED_OUT at
timeout_ms (one deadline for all partitions, waited on together); any other acks value answers
INVALID_REQUIRED_ACKS for every partition and appends nothing. `Partition.append_records_to_leader` decides
the rest: each partition's batches are validated (framing, magic 2 -> else UNSUPPORTED_FOR_MESSAGE_FORMAT,
CRC32C -> CORRUPT_MESSAGE, a codec id Kafka does not define -> UNSUPPORTED_COMPRESSION_TYPE with a WARNING
naming the client, max.message.bytes -> MESSAGE_TOO_LARGE), the idempotent producer's sequence checked (a
duplicate is answered with the original offset; OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH), then
offsets and the leader epoch are stamped into the request's own bytes and written. LogAppendTime topics answer
the append time.
Per-record errors (v8+, KIP-467): a record without a key on a compacted topic, or with a timestamp outside
message.timestamp.before/after.max.ms, is named in record_errors by its index in the batch, with why (the whole
batch is refused, INVALID_RECORD or INVALID_TIMESTAMP, as in Kafka).
Transactions: a request with a transactional_id needs WRITE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every
partition); its transactional batches open the producer's transaction in each partition (the last stable offset
stays at their first offset until the coordinator's marker), and a producer with an open transaction writing
outside it gets INVALID_TXN_STATE.
Version notes: KIP-359 (project extension): the tagged PartitionProduceData.current_leader_epoch (tag 10000,
v9+) is checked like Fetch's when >= 0: lower -> FENCED_LEADER_EPOCH, higher -> UNKNOWN_LEADER_EPOCH, and
nothing is appended. v10+ answers NOT_LEADER_OR_FOLLOWER and the epoch errors with the current leader and
its endpoint (KIP-951). v11 may answer TRANSACTION_ABORTABLE (below) and v12 lets a transaction.version 2
producer add its partitions implicitly (KIP-890): this broker never finalizes transaction.version 2, so v12 is
served as v11. v13 names topics by id (KIP-516), in the request and the answer: an id the metadata does not know
answers UNKNOWN_TOPIC_ID for its partitions, before authorization (as Kafka's KafkaApis: an id discloses no name).
KIP-890 part 1 (transaction.partition.verification.enable, on a broker claiming 3.6 or later): a transactional
batch that would open its producer's transaction in a partition is first verified with the coordinator
(broker/transactions/verification.py, the guard on `Partition`); a partition not added to the transaction answers
INVALID_TXN_STATE (v11+: TRANSACTION_ABORTABLE) and nothing is appended; a coordinator that cannot answer yet
(loading, moved, unreachable, a transaction being prepared) answers NOT_ENOUGH_REPLICAS, which producers retry.
Skipped: KIP-890 part 2 (v12's implicit add, transaction.version 2).
"""

from __future__ import annotations

import asyncio
from typing import Any

from epoch_broker.broker.eager import start_eagerly
from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.replica.partition import NO_GUARD, AppendResult, Partition, VerificationGuard
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import produce

Response = produce.RESPONSE.cls
TopicResponse = produce.RESPONSE.TopicProduceResponse
PartitionResponse = produce.RESPONSE.PartitionProduceResponse
LeaderIdAndEpoch = produce.RESPONSE.LeaderIdAndEpoch
NodeEndpoint = produce.RESPONSE.NodeEndpoint
RecordError = produce.RESPONSE.BatchIndexAndErrorMessage
_RETRIED_AS_NOT_ENOUGH_REPLICAS = frozenset({
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})
_LEADER_HINT_ERRORS = frozenset(
    {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH}
)


@handles(produce.API, "3-13")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    replicas = context.services.replica_manager
    acks = request.acks
    by_id = context.api_version >= 13
    names = [_name(context.services, topic, by_id) for topic in request.topic_data]
    writable = authorized_names(context, AclOperation.WRITE, ResourceType.TOPIC,
                                (name for name in names if name is not None))
    transaction_refused = request.transactional_id is not None and not context.authorized(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
    client = f"client {context.client_id!r} at {context.peer}"
    results: list[tuple[Any, str | None, list[tuple[int, Any, AppendResult]]]] = []
    # what passed the checks, to append once verified: (its place in `results`, partition, data)
    appends: list[tuple[list[tuple[int, Any, AppendResult]], int, Partition, Any]] = []
    for topic, name in zip(request.topic_data, names, strict=True):
        partition_results: list[tuple[int, Any, AppendResult]] = []
        for data in topic.partition_data:
            # refused: no partition either, so no leader hint discloses the topic
            partition = replicas.get(name, data.index) if name is not None and name in writable else None
            if transaction_refused:
                result = AppendResult(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            elif name is None:
                result = AppendResult(ErrorCode.UNKNOWN_TOPIC_ID)
            elif name not in writable:
                result = AppendResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif acks not in (0, 1, -1):
                result = AppendResult(ErrorCode.INVALID_REQUIRED_ACKS)
            elif partition is None:
                result = AppendResult(replicas.lookup_error(name, data.index))
            elif data.records is None:
                result = AppendResult(ErrorCode.CORRUPT_MESSAGE, message="null records")
            else:
                appends.append((partition_results, len(partition_results), partition, data))
                result = AppendResult()  # replaced by the append's
            partition_results.append((data.index, partition, result))
        results.append((topic, name, partition_results))
    verified: dict[Partition, VerificationGuard | AppendResult] | None = None  # None: appends are not verified
    if replicas.verifies_transactions:
        # without a transactional id nothing is verified: its transactional batches are refused at the append
        verified = {} if request.transactional_id is None else await _verify_transaction(
            context, request.transactional_id, [(partition, data.records) for _, _, partition, data in appends])
    for partition_results, position, partition, data in appends:
        guard = None if verified is None else verified.get(partition, NO_GUARD)
        if isinstance(guard, AppendResult):  # the coordinator's refusal
            result = guard
        else:
            result = partition.append_records_to_leader(data.records, data.current_leader_epoch, acks_all=acks == -1,
                                                        client=client, verification_guard=guard)
        partition_results[position] = (data.index, partition, result)
    if acks == 0:
        return None
    if acks == -1:
        loop = asyncio.get_running_loop()
        waited_from = loop.time()
        await _wait_for_replication(results, max(request.timeout_ms, 0) / 1000)
        context.remote_s = loop.time() - waited_from
    return _response(context, results)


async def _verify_transaction(context: RequestContext[BrokerServices], transactional_id: str,
                              appends: list[tuple[Partition, Any]]
                              ) -> dict[Partition, VerificationGuard | AppendResult]:
    """KIP-890 (Kafka's ReplicaManager.handleProduceAppend): the partitions whose batches would open the producer's
    transaction are verified with its coordinator, all in one question; each gets its guard, or its refusal as the
    producer is answered. A partition not named verified nothing (NO_GUARD at the append)."""
    pending = {partition: verification for partition, records in appends
               if (verification := partition.maybe_start_transaction_verification(records)) is not None}
    if not pending:
        return {}
    producers = {(v.producer_id, v.producer_epoch) for v in pending.values()}
    if len(producers) > 1:  # Kafka refuses the request: one transactional producer per Produce
        return {partition: AppendResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                                        message="Transactional records contained more than one producer ID")
                for partition in pending}
    ((producer_id, producer_epoch),) = producers
    keys = {(partition.topic, partition.index): partition for partition in pending}
    errors = await context.services.transaction_coordinator.verification.verify_transaction(
        transactional_id, producer_id, producer_epoch, keys, generic_error=context.api_version >= 11)
    verified: dict[Partition, VerificationGuard | AppendResult] = {
        partition: verification.guard for partition, verification in pending.items()}
    for key, error in errors.items():
        verified[keys[key]] = _refusal(error)
    return verified


def _refusal(error: ErrorCode) -> AppendResult:
    """A partition the coordinator did not verify, answered as Kafka's postVerificationCallback answers it: a
    retriable coordinator error as NOT_ENOUGH_REPLICAS, which every producer retries without a metadata refresh
    (older ones would not retry the coordinator's own errors on a Produce)."""
    if error == ErrorCode.INVALID_TXN_STATE:
        return AppendResult(error, message="Partition was not added to the transaction")
    if error in _RETRIED_AS_NOT_ENOUGH_REPLICAS:
        return AppendResult(ErrorCode.NOT_ENOUGH_REPLICAS, message="Unable to verify the partition has been added to "
                            f"the transaction. Underlying error: {error.name}")
    return AppendResult(error)


def _name(services: BrokerServices, topic: Any, by_id: bool) -> str | None:
    """The topic's name, or None for an id this broker's metadata does not know (v13+)."""
    if not by_id:
        return topic.name
    state = services.metadata.topics_by_id.get(topic.topic_id)
    return None if state is None else state.name


async def _wait_for_replication(results: list, timeout_s: float) -> None:
    appended = [(partition, result) for _, _, partition_results in results
                for _, partition, result in partition_results if result.error == ErrorCode.NONE]
    # started eagerly: with no follower to wait for (one broker) each is done at once, and the answer goes out
    # without a loop trip; otherwise they wait together
    waits = [start_eagerly(partition.wait_for_replication(result.last_offset, result.leader_epoch, timeout_s))
             for partition, result in appended]
    if not all(wait.done() for wait in waits):
        await asyncio.gather(*waits)
    for (_, result), wait in zip(appended, waits, strict=True):
        result.error = wait.result()


def _response(context: RequestContext[BrokerServices], results: list) -> Any:
    leaders: set[int] = set()
    topics = []
    for topic, name, partition_results in results:
        partitions = []
        for index, partition, result in partition_results:
            response = PartitionResponse(index=index, error_code=result.error, base_offset=result.base_offset,
                                         log_append_time_ms=result.log_append_time,
                                         log_start_offset=result.log_start_offset, error_message=result.message,
                                         record_errors=[RecordError(batch_index=i, batch_index_error_message=why)
                                                        for i, why in result.record_errors])
            if result.error in _LEADER_HINT_ERRORS and partition is not None:
                response.current_leader = LeaderIdAndEpoch(leader_id=partition.leader_id,
                                                           leader_epoch=partition.leader_epoch)
                leaders.add(partition.leader_id)
            partitions.append(response)
        topics.append(TopicResponse(name=name or "", topic_id=topic.topic_id, partition_responses=partitions))
    endpoints = context.services.metadata.node_endpoints(leaders, context.listener, NodeEndpoint)
    return Response(responses=topics, node_endpoints=endpoints)
