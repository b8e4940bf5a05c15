"""ListOffsets · v1-9 · offsets by timestamp: EARLIEST (-2), LATEST (-1), MAX_TIMESTAMP (-3), or a time.

Behaviour: on the leader, after the KIP-320 check of current_leader_epoch (v4+). -2 answers the log start
offset, -1 the high watermark (read_uncommitted and read_committed alike: no transactions; a replica's
request, replica_id >= 0, gets the log end), -3 (v7+) the offset of the record with the largest timestamp, a
timestamp the first offset whose record time is at or after it (none: offset -1). The answer carries the
leader epoch of the returned offset (v4+).
KIP-207: until the high watermark of a newly elected leader reaches the log end it had when elected, clients
get OFFSET_NOT_AVAILABLE (v5+) or LEADER_NOT_AVAILABLE (older); a replica's own request (replica_id >= 0)
is answered, and so is every request for a topic with unclean.leader.election.enable.
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
    error = partition.leader_error(wanted.current_leader_epoch)
    if error == ErrorCode.NONE and replica_id < 0 and not partition.offsets_available:
        error = ErrorCode.OFFSET_NOT_AVAILABLE if version >= 5 else ErrorCode.LEADER_NOT_AVAILABLE
    if error != ErrorCode.NONE:
        answer.error_code = error
        return
    log = partition.log
    timestamp = wanted.timestamp
    if timestamp == LATEST:
        # A replica's own request gets the log end, as Kafka answers it (no isolation level for replicas): the
        # KIP-207 exemption exists so that brokers can compare log lengths, which the high watermark hides.
        answer.offset = log.high_watermark if replica_id < 0 else log.log_end_offset
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
