"""AddPartitionsToTxn · v0-3 · partitions join a producer's transaction before it writes to them.

Behaviour: needs WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition) and on
each topic (TOPIC_AUTHORIZATION_FAILED); a partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION. If any
partition fails those checks, the others answer OPERATION_NOT_ATTEMPTED and nothing is added, as in Kafka. Then the
transaction coordinator decides for all (broker/transactions/coordinator.py): NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS (a prepared
transaction still writing its markers: clients retry).
Version notes: v2 may answer PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH instead); v3 flexible.
Skipped: v4+ (KIP-890: brokers verifying that a partition is in a transaction before taking its data).
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import add_partitions_to_txn as messages

TopicResult = messages.RESPONSE.AddPartitionsToTxnTopicResult
PartitionResult = messages.RESPONSE.AddPartitionsToTxnPartitionResult


def producer_fenced_for(version: int, error: ErrorCode, first_version: int) -> ErrorCode:
    """PRODUCER_FENCED as versions before `first_version` know it: INVALID_PRODUCER_EPOCH."""
    return ErrorCode.INVALID_PRODUCER_EPOCH if error == ErrorCode.PRODUCER_FENCED and version < first_version \
        else error


@handles(messages.API, "0-3")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
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
    by_topic: dict[str, Any] = {}
    for (topic, index), error in errors.items():
        result = by_topic.setdefault(topic, TopicResult(name=topic, results_by_partition=[]))
        result.results_by_partition.append(PartitionResult(partition_index=index, partition_error_code=error))
    return messages.RESPONSE.cls(results_by_topic_v3_and_below=list(by_topic.values()))
