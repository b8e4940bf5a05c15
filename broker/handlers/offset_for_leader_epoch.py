"""OffsetForLeaderEpoch · v0-4 · where a leader epoch ends in this leader's log (KIP-101, KIP-320).

Behaviour: from a follower (replica_id >= 0, v3+) CLUSTER_ACTION on the cluster, else every partition is answered
CLUSTER_AUTHORIZATION_FAILED; from anyone else (KIP-320's consumers: -1, or -2 below v3) DESCRIBE on each topic,
else TOPIC_AUTHORIZATION_FAILED for its partitions. Kafka instead lets CLUSTER_ACTION or DESCRIBE through whatever
the replica_id: here a request posing as a follower must come from a broker (a forger with DESCRIBE is refused as
one). Then, on the leader, after the KIP-320 check of current_leader_epoch (v2+: -1 skips, lower
FENCED_LEADER_EPOCH, higher UNKNOWN_LEADER_EPOCH), the epoch cache's `end_offset_for`: the current epoch ends at
the log end offset; an older one at the start of the next higher epoch, answered with the largest known epoch at or
below the requested one (v1+); an unknown or newer epoch gets -1/-1. librdkafka (v2) and kafka-python (v2-4) use it
to validate their position after a leader change.
Version notes: v3+ carries replica_id: followers send their node id before fetching (truncation, KIP-101),
consumers -2 (or -1); all are answered by the leader only, the same way.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import offset_for_leader_epoch

Response = offset_for_leader_epoch.RESPONSE.cls
TopicResult = offset_for_leader_epoch.RESPONSE.OffsetForLeaderTopicResult
EpochEndOffset = offset_for_leader_epoch.RESPONSE.EpochEndOffset


@handles(offset_for_leader_epoch.API, "0-4")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    replicas = context.services.replica_manager
    names = [topic.topic for topic in request.topics]
    if request.replica_id >= 0:
        # a follower: all or nothing (the brokers' principal is missing CLUSTER_ACTION)
        describable = set(names) if context.authorized(AclOperation.CLUSTER_ACTION) else set()
        refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    else:
        describable = authorized_names(context, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    topics = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            answer = EpochEndOffset(partition=wanted.partition, leader_epoch=-1, end_offset=-1)
            partition = replicas.get(topic.topic, wanted.partition)
            if topic.topic not in describable:
                answer.error_code = refused
            elif partition is None:
                answer.error_code = replicas.lookup_error(topic.topic, wanted.partition)
            else:
                answer.error_code, answer.leader_epoch, answer.end_offset = partition.last_offset_for_leader_epoch(
                    wanted.current_leader_epoch, wanted.leader_epoch)
            partitions.append(answer)
        topics.append(TopicResult(topic=topic.topic, partitions=partitions))
    return Response(topics=topics)
