"""OffsetFetch · v1-9 · a group's committed offsets, with the committed leader epoch (KIP-320).

Behaviour: a partition without a committed offset answers offset -1. A null topic list (v2+) asks for every
offset of the group. Deleting a topic deletes its offsets, so a re-created topic starts without any (KIP-232;
see `broker/groups/coordinator.py`).
Version notes: v1 has no group-level error, so coordinator errors go on every partition; v2-7 one group with
a top-level error; committed_leader_epoch v5+; require_stable v7+; v8+ batch groups.
Skipped: require_stable never waits, as there are no transactions (nothing is ever pending); member_id and
member_epoch (v9, KIP-848 consumer groups) are not checked for classic groups, as in Kafka.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.messages import offset_fetch as messages

R = messages.RESPONSE


def _topics(request_topics: Any) -> list[tuple[str, list[int]]] | None:
    if request_topics is None:
        return None
    return [(t.name, list(t.partition_indexes)) for t in request_topics]


@handles(messages.API, "1-9")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    coordinator = context.services.group_coordinator
    if context.api_version >= 8:
        response = R.cls()
        for g in request.groups:
            error, offsets = coordinator.fetch_offsets(g.group_id, _topics(g.topics))
            by_topic: dict[str, list[Any]] = {}
            for o in offsets:
                by_topic.setdefault(o.topic, []).append(R.OffsetFetchResponsePartitions(
                    partition_index=o.partition, committed_offset=o.offset, committed_leader_epoch=o.leader_epoch,
                    metadata=o.metadata, error_code=o.error,
                ))
            response.groups.append(R.OffsetFetchResponseGroup(
                group_id=g.group_id, error_code=error,
                topics=[R.OffsetFetchResponseTopics(name=name, partitions=ps) for name, ps in by_topic.items()],
            ))
        return response

    topics = _topics(request.topics)
    error, offsets = coordinator.fetch_offsets(request.group_id, topics)
    by_topic = {}
    if error and context.api_version < 2:
        # v1 has nowhere else to say it: every requested partition carries the group's error.
        for name, partitions in topics or []:
            by_topic[name] = [R.OffsetFetchResponsePartition(partition_index=p, committed_offset=-1, metadata="",
                                                             error_code=error) for p in partitions]
    for o in offsets:
        by_topic.setdefault(o.topic, []).append(R.OffsetFetchResponsePartition(
            partition_index=o.partition, committed_offset=o.offset, committed_leader_epoch=o.leader_epoch,
            metadata=o.metadata, error_code=o.error,
        ))
    return R.cls(
        error_code=error,
        topics=[R.OffsetFetchResponseTopic(name=name, partitions=ps) for name, ps in by_topic.items()],
    )
