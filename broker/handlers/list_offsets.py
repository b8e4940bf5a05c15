"""ListOffsets · v1-9 · offsets by timestamp: EARLIEST (-2), LATEST (-1), MAX_TIMESTAMP (-3), or a time.

Behaviour: on the leader, after the KIP-320 check of current_leader_epoch (v4+). -2 answers the log start
offset, -1 the high watermark for a consumer (replica_id -1; read_uncommitted and read_committed alike: no
transactions) and the log end for anyone else, -3 (v7+) the offset of the record with the largest timestamp, a
timestamp the first offset whose record time is at or after it (none: offset -1). The answer carries the
leader epoch of the returned offset (v4+). Kafka's debugging replica id (-2) is answered by followers too
(after the epoch check), with their own log.
KIP-207: until the high watermark of a newly elected leader reaches the log end it had when elected,
consumers get OFFSET_NOT_AVAILABLE (v5+) or LEADER_NOT_AVAILABLE (older); replicas (replica_id >= 0) and
debugging requests are answered, and so is every request for a topic with unclean.leader.election.enable.
Skipped: v0 (several offsets per partition), isolation level (no transactions).
"""

from __future__ import annotations

from typing import Any

from broker.dispatch import RequestContext, handles
from broker.partition import Partition
from protocol.errors import ErrorCode
from protocol.messages import list_offsets

Response = list_offsets.RESPONSE.cls
TopicResponse = list_offsets.RESPONSE.ListOffsetsTopicResponse
PartitionResponse = list_offsets.RESPONSE.ListOffsetsPartitionResponse
EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
CONSUMER, DEBUGGING = -1, -2  # replica ids that are not brokers


@handles(list_offsets.API, "1-9")
def handle(context: RequestContext, request: Any) -> Any:
    replicas = context.broker.replica_manager
    topics = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            answer = PartitionResponse(partition_index=wanted.partition_index, timestamp=-1, offset=-1,
                                       leader_epoch=-1)
            partition = replicas.get(topic.name, wanted.partition_index)
            if partition is None:
                answer.error_code = replicas.lookup_error(topic.name, wanted.partition_index)
            else:
                _answer(answer, partition, wanted, request.replica_id, context.api_version)
            partitions.append(answer)
        topics.append(TopicResponse(name=topic.name, partitions=partitions))
    return Response(topics=topics)


def _answer(answer: Any, partition: Partition, wanted: Any, replica_id: int, version: int) -> None:
    if replica_id == DEBUGGING:
        error = partition.check_leader_epoch(wanted.current_leader_epoch)
    else:
        error = partition.leader_error(wanted.current_leader_epoch)
    if error == ErrorCode.NONE and replica_id == CONSUMER and not partition.offsets_available:
        error = ErrorCode.OFFSET_NOT_AVAILABLE if version >= 5 else ErrorCode.LEADER_NOT_AVAILABLE
    if error != ErrorCode.NONE:
        answer.error_code = error
        return
    log = partition.log
    timestamp = wanted.timestamp
    if timestamp == LATEST:
        # Only consumers are bounded by the high watermark, as in Kafka: replicas (and debugging tools) get the
        # log end; the KIP-207 exemption exists so that brokers can compare log lengths, which it would hide.
        answer.offset = log.high_watermark if replica_id == CONSUMER else log.log_end_offset
        answer.leader_epoch = partition.leader_epoch
    elif timestamp == EARLIEST:
        answer.offset = log.log_start_offset
        answer.leader_epoch = log.epoch_for_offset(answer.offset)
    else:
        if timestamp == MAX_TIMESTAMP and version >= 7:
            # The first record carrying the largest timestamp of the log is the answer.
            timestamp = max(segment.max_timestamp for segment in log.segments)
        found = log.offset_for_timestamp(timestamp) if timestamp >= 0 else None
        if found is not None:
            answer.offset, answer.timestamp, answer.leader_epoch = found
