"""AlterReplicaLogDirs · v1-2 · move replicas of this broker between its log dirs (KIP-113).

Behaviour: needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED for every partition), as Kafka. A
partition named under several dirs is answered once, for the last (Kafka reads the request as a map). Per
partition, in Kafka's order (ReplicaManager.alterReplicaLogDirs): a topic name too long for Kafka's future-log
directory name (`<topic>-<partition>.<32 hex>-future` over 255 characters) INVALID_TOPIC_EXCEPTION; a destination
that is not one of this broker's log dirs (compared as absolute paths) LOG_DIR_NOT_FOUND; a partition the metadata
does not have UNKNOWN_TOPIC_OR_PARTITION; one with no replica here REPLICA_NOT_AVAILABLE (Kafka keeps that code for
this API); a move to the dir the replica already lives in NONE (nothing to do).
Version notes: v0 (the same wire as v1, gone from Kafka 4.0) is not declared: Kafka 4.x's schema has 1-2.
Skipped: moving a replica to another of this broker's log dirs (Kafka's future log and ReplicaAlterLogDirsThread):
answered KAFKA_STORAGE_ERROR with the reason logged, and nothing moves; DescribeLogDirs goes on listing the replica
in its dir, with no future replica.
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
# Kafka's future-log dir name: `<topic>-<partition>.<uuid without dashes>-future`, one path component
FUTURE_DIR_EXTRA = len(".") + 32 + len("-future")
MAX_DIR_NAME = 255


@handles(messages.API, "1-2")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    allowed = context.authorized(AclOperation.ALTER)
    wanted = {(topic.name, index): wanted.path for wanted in request.dirs for topic in wanted.topics
              for index in topic.partitions}
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), path in wanted.items():
        error = _move(context, os.path.abspath(path), topic, index) if allowed \
            else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        by_topic.setdefault(topic, []).append(R.AlterReplicaLogDirPartitionResult(partition_index=index,
                                                                                  error_code=error))
    return R.cls(results=[R.AlterReplicaLogDirTopicResult(topic_name=name, partitions=partitions)
                          for name, partitions in by_topic.items()])


def _move(context: RequestContext[BrokerServices], destination: str, topic: str, index: int) -> ErrorCode:
    broker = context.services
    if len(f"{topic}-{index}") + FUTURE_DIR_EXTRA > MAX_DIR_NAME:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    if destination not in broker.log_manager.log_dirs:
        return ErrorCode.LOG_DIR_NOT_FOUND
    state = broker.metadata.topics_by_name.get(topic)
    if state is None or index not in state.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    current = broker.log_manager.log_dir_of(topic, index)
    if current is None:
        return ErrorCode.REPLICA_NOT_AVAILABLE
    if current == destination:
        return ErrorCode.NONE
    log.warning("AlterReplicaLogDirs from %s: %s-%d lives in %s; moving it to %s is not supported here", context.peer,
                topic, index, current, destination)
    return ErrorCode.KAFKA_STORAGE_ERROR
