"""AlterReplicaLogDirs · v1-2 · move replicas of this broker between its log dirs (KIP-113).

Behaviour: needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED for every partition), as Kafka. Per
partition, in Kafka's order (ReplicaManager.alterReplicaLogDirs): a destination that is not one of this broker's
log dirs LOG_DIR_NOT_FOUND; an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION; a partition with no replica
here NOT_LEADER_OR_FOLLOWER; a move to the dir the replica already lives in NONE (nothing to do).
Skipped: moving a replica to another of this broker's log dirs (Kafka's future log and ReplicaAlterLogDirsThread):
answered KAFKA_STORAGE_ERROR with the reason logged, and nothing moves.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import alter_replica_log_dirs as messages

log = logging.getLogger(__name__)
R = messages.RESPONSE


@handles(messages.API, "1-2")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    allowed = context.authorized(AclOperation.ALTER)
    by_topic: dict[str, list[Any]] = {}
    for wanted in request.dirs:
        for topic in wanted.topics:
            for index in topic.partitions:
                error = _move(context, os.path.abspath(wanted.path), topic.name, index) if allowed \
                    else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                by_topic.setdefault(topic.name, []).append(
                    R.AlterReplicaLogDirPartitionResult(partition_index=index, error_code=error))
    return R.cls(results=[R.AlterReplicaLogDirTopicResult(topic_name=name, partitions=partitions)
                          for name, partitions in by_topic.items()])


def _move(context: RequestContext[BrokerServices], destination: str, topic: str, index: int) -> ErrorCode:
    broker = context.services
    if destination not in broker.log_manager.log_dirs:
        return ErrorCode.LOG_DIR_NOT_FOUND
    state = broker.metadata.topics_by_name.get(topic)
    if state is None or index not in state.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    current = broker.log_manager.log_dir_of(topic, index)
    if current is None:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if current == destination:
        return ErrorCode.NONE
    log.warning("AlterReplicaLogDirs from %s: %s-%d lives in %s; moving it to %s is not supported here", context.peer,
                topic, index, current, destination)
    return ErrorCode.KAFKA_STORAGE_ERROR
