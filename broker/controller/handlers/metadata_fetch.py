"""Fetch · v13-16 · (controller) brokers pull the metadata log: `__cluster_metadata` partition 0, by topic id.

Behaviour: committed records from fetch_offset to the end, as one batch (broker/metadata/metadata_log.py),
high watermark = the controller's committed offset (a ZooKeeper quorum's records in flight are not served);
with nothing new, waits up to max_wait_ms for a commit (long poll, no polling). Any other topic:
UNKNOWN_TOPIC_ID; a fetch offset past the end: OFFSET_OUT_OF_RANGE.
Version notes: v13+ only, since partitions are named by topic id.
Skipped: max_bytes (metadata logs here are small: a whole range goes in one answer, so a commit is never
split and a broker applies registrations and their epoch bumps together).
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.metadata import metadata_log
from epoch_broker.broker.network.dispatch import CONTROLLER, RequestContext, handles
from epoch_broker.broker.services import ControllerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import fetch

Response = fetch.RESPONSE.cls
TopicResponse = fetch.RESPONSE.FetchableTopicResponse
PartitionData = fetch.RESPONSE.PartitionData


@handles(fetch.API, "13-16", roles=(CONTROLLER,), cluster_action=True)
async def handle(context: RequestContext[ControllerServices], request: Any) -> Any:
    server = context.services
    controller = server.controller
    wanted = [(t.topic_id, p) for t in request.topics for p in t.partitions]
    if any(topic_id == metadata_log.METADATA_TOPIC_ID and p.partition == 0 for topic_id, p in wanted):
        offset = next(p.fetch_offset for t, p in wanted if t == metadata_log.METADATA_TOPIC_ID)
        await server.wait_for_records(offset, request.max_wait_ms / 1000)
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            answer = PartitionData(partition_index=p.partition, records=b"")
            if topic.topic_id != metadata_log.METADATA_TOPIC_ID or p.partition != 0:
                answer.error_code = ErrorCode.UNKNOWN_TOPIC_ID
            elif not 0 <= p.fetch_offset <= (end := controller.committed_offset):
                answer.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
            else:
                answer.high_watermark = answer.last_stable_offset = end
                answer.log_start_offset = 0
                if p.fetch_offset < end:
                    answer.records = metadata_log.encode(controller.records[p.fetch_offset:end], p.fetch_offset)
            partitions.append(answer)
        topics.append(TopicResponse(topic_id=topic.topic_id, partitions=partitions))
    return Response(responses=topics)
