"""AddPartitionsToTxn · v0-5 · partitions join a producer's transaction before it writes to them.

Behaviour (v0-3, from producers): needs WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for
every partition) and on each topic (TOPIC_AUTHORIZATION_FAILED); a partition that does not exist is
UNKNOWN_TOPIC_OR_PARTITION. If any partition fails those checks, the others answer OPERATION_NOT_ATTEMPTED and
nothing is added, as in Kafka. Then the transaction coordinator decides for all (broker/transactions/coordinator.py):
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS
(a prepared transaction still writing its markers: clients retry).
Behaviour (v4+, KIP-890, from brokers: a partition leader asking the coordinator): needs CLUSTER_ACTION on the
cluster, else only the top-level error_code answers CLUSTER_AUTHORIZATION_FAILED (Kafka's error response for
v4+); topics are not authorized one by one. Several transactions per request, each answered on its own: unknown
partitions as above, then with verify_only the coordinator says whether each partition is already in the
transaction (TRANSACTION_ABORTABLE if not) and adds nothing, else it adds them as for v0-3.
Version notes: v2 may answer PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH instead); v3 flexible;
v4 batched (VerifyOnly, the top-level error code); v5 may answer TRANSACTION_ABORTABLE (KIP-890), which a v4
requester (a Kafka 3.6 or 3.7 broker) does not know: it gets INVALID_TXN_STATE, the error of its release.
This broker sends v4+ itself, verify-only, from its produce path (broker/transactions/verification.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import add_partitions_to_txn as messages

Response = messages.RESPONSE.cls
TransactionResult = messages.RESPONSE.AddPartitionsToTxnResult
TopicResult = messages.RESPONSE.AddPartitionsToTxnTopicResult
PartitionResult = messages.RESPONSE.AddPartitionsToTxnPartitionResult


def producer_fenced_for(version: int, error: ErrorCode, first_version: int) -> ErrorCode:
    """PRODUCER_FENCED as versions before `first_version` know it: INVALID_PRODUCER_EPOCH."""
    return ErrorCode.INVALID_PRODUCER_EPOCH if error == ErrorCode.PRODUCER_FENCED and version < first_version \
        else error


@handles(messages.API, "0-5")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    if context.api_version >= 4:
        return await _handle_batched(context, request)
    services = context.services
    wanted = [(topic.name, index) for topic in request.v3_and_below_topics for index in topic.partitions]
    errors: dict[tuple[str, int], ErrorCode] = {}
    if not context.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                              request.v3_and_below_transactional_id):
        errors = dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    else:
        writable = authorized_names(context, AclOperation.WRITE, ResourceType.TOPIC, {t for t, _ in wanted})
        for topic, index in wanted:
            if topic not in writable:
                errors[(topic, index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif services.metadata.partition(topic, index) is None:
                errors[(topic, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if errors:
            errors = {key: errors.get(key, ErrorCode.OPERATION_NOT_ATTEMPTED) for key in wanted}
        else:
            error = await services.transaction_coordinator.add_partitions(
                request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch, set(wanted))
            errors = dict.fromkeys(wanted, producer_fenced_for(context.api_version, error, 2))
    return Response(results_by_topic_v3_and_below=_topic_results(errors))


async def _handle_batched(context: RequestContext[BrokerServices], request: Any) -> Any:
    """v4+: a broker's request, one result per transaction."""
    if not context.authorized(AclOperation.CLUSTER_ACTION):
        return Response(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    results = await asyncio.gather(*(_transaction(context, transaction) for transaction in request.transactions))
    return Response(results_by_transaction=list(results))


async def _transaction(context: RequestContext[BrokerServices], transaction: Any) -> Any:
    services = context.services
    coordinator = services.transaction_coordinator
    wanted = [(topic.name, index) for topic in transaction.topics for index in topic.partitions]
    errors = {key: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for key in wanted if services.metadata.partition(*key) is None}
    if errors:
        errors = {key: errors.get(key, ErrorCode.OPERATION_NOT_ATTEMPTED) for key in wanted}
    elif transaction.verify_only:
        errors = coordinator.verify_partitions(transaction.transactional_id, transaction.producer_id,
                                               transaction.producer_epoch, set(wanted))
    else:
        error = await coordinator.add_partitions(transaction.transactional_id, transaction.producer_id,
                                                 transaction.producer_epoch, set(wanted))
        errors = dict.fromkeys(wanted, error)
    if context.api_version < 5:  # TRANSACTION_ABORTABLE is v5+
        errors = {key: ErrorCode.INVALID_TXN_STATE if error == ErrorCode.TRANSACTION_ABORTABLE else error
                  for key, error in errors.items()}
    return TransactionResult(transactional_id=transaction.transactional_id, topic_results=_topic_results(errors))


def _topic_results(errors: dict[tuple[str, int], ErrorCode]) -> list[Any]:
    by_topic: dict[str, Any] = {}
    for (topic, index), error in errors.items():
        result = by_topic.setdefault(topic, TopicResult(name=topic, results_by_partition=[]))
        result.results_by_partition.append(PartitionResult(partition_index=index, partition_error_code=error))
    return list(by_topic.values())
