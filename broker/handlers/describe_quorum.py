"""DescribeQuorum · v0-2 · the metadata log's quorum: leader, epoch, high watermark, voters and observers.

Behaviour: for `__cluster_metadata` partition 0 (another topic or partition: UNKNOWN_TOPIC_OR_PARTITION for it, as
Kafka's KafkaRaftManager answers). Needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED at the top).
The active controller answers (Controller.describe_quorum): it leads, in its ZooKeeper controller epoch (0 with the
file store's one controller); the high watermark is its committed metadata offset; the voters are itself, the
observers the registered brokers at the log end their last heartbeat had applied (-1: not heard from since this
controller started). A broker forwards it to the controller, as Kafka's brokers do.
Version notes: v1's timestamps are -1 (not kept); v2's directory ids are zero and its nodes list is empty (the
controller's endpoints are configuration here, not metadata).
Skipped: a multi-voter KRaft quorum (one controller process decides, or one of a ZooKeeper quorum): the standby
controllers of a ZooKeeper quorum are not listed as voters.
"""

from __future__ import annotations

from typing import Any, cast

from epoch_broker.broker.controller.controller import QuorumState
from epoch_broker.broker.metadata.metadata_log import METADATA_TOPIC
from epoch_broker.broker.network.dispatch import BROKER, CONTROLLER, RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation
from epoch_broker.broker.services import ControllerServices, Services
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import describe_quorum as messages

R = messages.RESPONSE


@handles(messages.API, "0-2", roles=(BROKER, CONTROLLER))
async def handle(context: RequestContext[Services], request: Any) -> Any:
    if not context.authorized(AclOperation.DESCRIBE):
        return R.cls(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    quorum = (cast(ControllerServices, context.services).controller.describe_quorum() if context.role == CONTROLLER
              else await context.services.channel.describe_quorum())
    return R.cls(topics=[R.TopicData(topic_name=t.topic_name, partitions=[
        _partition(quorum) if t.topic_name == METADATA_TOPIC and p.partition_index == 0 else
        R.PartitionData(partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        for p in t.partitions]) for t in request.topics])


def _partition(quorum: QuorumState) -> Any:
    return R.PartitionData(
        partition_index=0, leader_id=quorum.leader_id, leader_epoch=quorum.leader_epoch,
        high_watermark=quorum.high_watermark,
        current_voters=[R.ReplicaState(replica_id=node, log_end_offset=end) for node, end in quorum.voters],
        observers=[R.ReplicaState(replica_id=node, log_end_offset=end) for node, end in quorum.observers])
