"""ListOffsets · v1-11 · offsets by timestamp: EARLIEST (-2), LATEST (-1), MAX_TIMESTAMP (-3), or a time.

Behaviour: needs DESCRIBE on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions, offset and timestamp
-1), whoever asks. A special timestamp the request's version does not know (Kafka's
ReplicaManager.isListOffsetsTimestampUnsupported: -3 before v7, -4 before v8, -5 before v9, -6 before v11, any
other negative one always) answers UNSUPPORTED_VERSION for its partition. The rest is decided by
`Partition.fetch_offset_for_timestamp`: on the leader, after the KIP-320 check of current_leader_epoch (v4+). -2
answers the log start offset, -1 the high watermark for a consumer (replica_id -1; with isolation_level 1,
read_committed, v2+: the last stable offset) and the log end for anyone else, -3 the offset of the record with the
largest timestamp, a timestamp the first offset whose record time is at or after it (none: offset -1). The answer
carries the leader epoch of the returned offset (v4+).
Kafka's debugging replica id (-2) is answered by followers too (after the epoch check), with their own log.
KIP-207: until the high watermark of a newly elected leader reaches the log end it had when elected,
consumers get OFFSET_NOT_AVAILABLE (v5+) or LEADER_NOT_AVAILABLE (older); replicas (replica_id >= 0) and
debugging requests are answered, and so is every request for a topic with unclean.leader.election.enable.
Version notes: tiered storage's timestamps are answered as a Kafka broker without it answers them: -4 (v8+,
EARLIEST_LOCAL) the log start offset, -5 (v9+, LATEST_TIERED) and -6 (v11+, EARLIEST_PENDING_UPLOAD, KIP-1023)
offset -1 with no error. v10's timeout_ms (KIP-1075) bounds remote-storage lookups: every answer here is local,
so it is not waited on.
Skipped: v0 (several offsets per partition).
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.replica.partition import (
    EARLIEST,
    EARLIEST_LOCAL,
    EARLIEST_PENDING_UPLOAD,
    LATEST,
    LATEST_TIERED,
    MAX_TIMESTAMP,
    Partition,
)
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import list_offsets

Response = list_offsets.RESPONSE.cls
TopicResponse = list_offsets.RESPONSE.ListOffsetsTopicResponse
PartitionResponse = list_offsets.RESPONSE.ListOffsetsPartitionResponse
READ_COMMITTED = 1
# the first version that knows each special timestamp (Kafka's timestampMinSupportedVersion)
TIMESTAMP_MIN_VERSION = {EARLIEST: 1, LATEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
                         EARLIEST_PENDING_UPLOAD: 11}


@handles(list_offsets.API, "1-11")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    replicas = context.services.replica_manager
    describable = authorized_names(context, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                   (topic.name for topic in request.topics))
    topics = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            answer = PartitionResponse(partition_index=wanted.partition_index, timestamp=-1, offset=-1,
                                       leader_epoch=-1)
            partition = replicas.get(topic.name, wanted.partition_index)
            if topic.name not in describable:
                answer.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif wanted.timestamp < 0 and context.api_version < TIMESTAMP_MIN_VERSION.get(wanted.timestamp, 1 << 15):
                answer.error_code = ErrorCode.UNSUPPORTED_VERSION
            elif partition is None:
                answer.error_code = replicas.lookup_error(topic.name, wanted.partition_index)
            else:
                _answer(answer, partition, wanted, request.replica_id, context.api_version,
                        request.isolation_level == READ_COMMITTED)
            partitions.append(answer)
        topics.append(TopicResponse(name=topic.name, partitions=partitions))
    return Response(topics=topics)


def _answer(answer: Any, partition: Partition, wanted: Any, replica_id: int, version: int,
            read_committed: bool) -> None:
    result = partition.fetch_offset_for_timestamp(wanted.timestamp, wanted.current_leader_epoch, replica_id,
                                                  read_committed=read_committed)
    if result.error == ErrorCode.OFFSET_NOT_AVAILABLE and version < 5:
        answer.error_code = ErrorCode.LEADER_NOT_AVAILABLE  # KIP-207's code is v5+
    else:
        answer.error_code = result.error
    if result.error == ErrorCode.NONE:
        answer.offset, answer.timestamp, answer.leader_epoch = result.offset, result.timestamp, result.leader_epoch
