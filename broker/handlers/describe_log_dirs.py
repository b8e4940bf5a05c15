"""DescribeLogDirs · v0-4 · the log dirs of this broker and the size of each partition's log in them.

Behaviour: needs DESCRIBE on the cluster: else v3+ answers CLUSTER_AUTHORIZATION_FAILED, older versions no dirs
(Kafka's answer). Each log dir with the partitions it holds, filtered by `topics` (null: every partition), each
with its size in bytes (every segment) and offset lag (the high watermark above the log end: 0 on a leader);
v4 adds the file system's total and usable bytes. An unreadable dir answers KAFKA_STORAGE_ERROR for itself.
Skipped: future logs (intra-broker moves between dirs, KIP-113): `is_future_key` is always false.
"""

from __future__ import annotations

import os
from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import describe_log_dirs as messages

Response = messages.RESPONSE


@handles(messages.API, "0-4")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    if not context.authorized(AclOperation.DESCRIBE):
        return Response.cls(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[])
    wanted = None if request.topics is None else {(t.topic, p) for t in request.topics for p in t.partitions}
    log_manager = context.services.log_manager
    return Response.cls(results=[_describe(log_dir, log_manager.logs_in(log_dir), wanted)
                                 for log_dir in log_manager.log_dirs])


def _describe(log_dir: str, logs: list, wanted: set[tuple[str, int]] | None) -> Any:
    try:
        stats = os.statvfs(log_dir)
    except OSError:
        return Response.DescribeLogDirsResult(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=log_dir, topics=[])
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), log in sorted(logs, key=lambda item: item[0]):
        if wanted is None or (topic, index) in wanted:
            by_topic.setdefault(topic, []).append(Response.DescribeLogDirsPartition(
                partition_index=index, partition_size=log.size,
                offset_lag=max(0, log.high_watermark - log.log_end_offset), is_future_key=False))
    return Response.DescribeLogDirsResult(
        log_dir=log_dir, total_bytes=stats.f_blocks * stats.f_frsize, usable_bytes=stats.f_bavail * stats.f_frsize,
        topics=[Response.DescribeLogDirsTopic(name=name, partitions=partitions)
                for name, partitions in by_topic.items()])
