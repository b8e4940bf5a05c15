"""AlterPartition · v2-3 · (controller) a leader changes a partition's ISR.

Behaviour: per partition, Controller.alter_partition: STALE_BROKER_EPOCH, UNKNOWN_TOPIC_ID,
NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION (partition epoch), INELIGIBLE_REPLICA (a
fenced replica is never added back: KIP-320), or the partition's new state.
Version notes: v2+ only (topic ids); v3 carries broker epochs per ISR member (read for the ids only).
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import CONTROLLER, RequestContext, handles
from epoch_broker.broker.services import ControllerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import alter_partition

Response = alter_partition.RESPONSE.cls
TopicData = alter_partition.RESPONSE.TopicData
PartitionData = alter_partition.RESPONSE.PartitionData


@handles(alter_partition.API, "2-3", roles=(CONTROLLER,), cluster_action=True)
def handle(context: RequestContext[ControllerServices], request: Any) -> Any:
    controller = context.services.controller
    topics = []
    for topic in request.topics:
        known = topic.topic_id in controller.image.topics_by_id
        partitions = []
        for p in topic.partitions:
            new_isr = tuple(b.broker_id for b in p.new_isr_with_epochs) if context.api_version >= 3 else tuple(
                p.new_isr)
            result = controller.alter_partition(request.broker_id, request.broker_epoch, topic.topic_id,
                                                p.partition_index, p.leader_epoch, p.partition_epoch, new_isr)
            error = result.error
            if not known and error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                error = ErrorCode.UNKNOWN_TOPIC_ID
            partitions.append(PartitionData(partition_index=p.partition_index, error_code=error,
                                            leader_id=result.leader, leader_epoch=result.leader_epoch,
                                            isr=list(result.isr), partition_epoch=result.partition_epoch))
        topics.append(TopicData(topic_id=topic.topic_id, partitions=partitions))
    return Response(error_code=ErrorCode.NONE, topics=topics)
