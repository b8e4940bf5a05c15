"""DeleteRecords · v0-2 · move a partition's log start offset forward (records below it are gone).

Behaviour: needs DELETE on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions, low watermark -1, before
their existence is looked at). On the leader only (NOT_LEADER_OR_FOLLOWER elsewhere, UNKNOWN_TOPIC_OR_PARTITION if
unknown); offset -1 means the high watermark; an offset above the high watermark is OFFSET_OUT_OF_RANGE. Whole
segments below the new start are deleted; the answer's low_watermark is the new log start offset.
Skipped: timeout_ms (on one broker the change is immediate; followers learn the start offset on fetch).
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import delete_records

Response = delete_records.RESPONSE.cls
TopicResult = delete_records.RESPONSE.DeleteRecordsTopicResult
PartitionResult = delete_records.RESPONSE.DeleteRecordsPartitionResult


@handles(delete_records.API, "0-2")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    replicas = context.services.replica_manager
    deletable = authorized_names(context, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in request.topics))
    topics = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            result = PartitionResult(partition_index=wanted.partition_index, low_watermark=-1)
            partition = replicas.get(topic.name, wanted.partition_index)
            if topic.name not in deletable:
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif partition is None:
                result.error_code = replicas.lookup_error(topic.name, wanted.partition_index)
            else:
                result.error_code, result.low_watermark = partition.delete_records_on_leader(wanted.offset)
            partitions.append(result)
        topics.append(TopicResult(name=topic.name, partitions=partitions))
    context.services.log_manager.checkpoint()  # the new log start offsets survive a crash
    return Response(topics=topics)
