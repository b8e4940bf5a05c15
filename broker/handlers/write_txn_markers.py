"""WriteTxnMarkers · v0-1 · a transaction coordinator's commit or abort markers for partitions led here.

Behaviour: needs CLUSTER_ACTION on the cluster (brokers, and Kafka's admin abortTransaction run by an operator),
else CLUSTER_AUTHORIZATION_FAILED for every partition. Each marker is appended by the partition's leader and
answered once replicated (broker/transactions/markers.py `write_local`): NOT_LEADER_OR_FOLLOWER or
UNKNOWN_TOPIC_OR_PARTITION off its leader, TRANSACTION_COORDINATOR_FENCED for a coordinator epoch older than the
last marker's, INVALID_PRODUCER_EPOCH for an older producer epoch. A marker on `__consumer_offsets` completes the
producer's pending transactional offsets in the group coordinator.
Version notes: v1 is v0, flexible.
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation
from epoch_broker.broker.services import BrokerServices
from epoch_broker.broker.transactions.markers import write_local
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import write_txn_markers as messages
from epoch_broker.protocol.records import EndTxnMarker

Response = messages.RESPONSE


@handles(messages.API, "0-1")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    allowed = context.authorized(AclOperation.CLUSTER_ACTION)
    results = []
    for wanted in request.markers:
        keys = [(topic.name, index) for topic in wanted.topics for index in topic.partition_indexes]
        if allowed:
            errors = await write_local(context.services, wanted.producer_id, wanted.producer_epoch,
                                       EndTxnMarker(wanted.transaction_result, wanted.coordinator_epoch), keys)
        else:
            errors = dict.fromkeys(keys, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        by_topic: dict[str, Any] = {}
        for (topic, index), error in errors.items():
            result = by_topic.setdefault(topic, Response.WritableTxnMarkerTopicResult(name=topic, partitions=[]))
            result.partitions.append(Response.WritableTxnMarkerPartitionResult(partition_index=index,
                                                                               error_code=error))
        results.append(Response.WritableTxnMarkerResult(producer_id=wanted.producer_id,
                                                        topics=list(by_topic.values())))
    return Response.cls(markers=results)
