"""OffsetFetch · v1-10 · a group's committed offsets, with the committed leader epoch (KIP-320).

Behaviour: needs DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED, nothing read) and on each topic: a topic
named that the principal may not describe answers TOPIC_AUTHORIZATION_FAILED for its partitions (offset -1), and
asking for every offset of the group leaves such topics out. A partition without a committed offset answers offset
-1. A null topic list (v2+) asks for every offset of the group. Deleting a topic deletes its offsets, so a
re-created topic starts without any (KIP-232; see `broker/groups/coordinator.py`). An offset committed in a
transaction not yet ended is not shown (the last committed one is); with require_stable, its partition answers
UNSTABLE_OFFSET_COMMIT instead (the client retries), as Kafka does.
Version notes: v1 has no group-level error, so coordinator errors go on every partition; v2-7 one group with
a top-level error; committed_leader_epoch v5+; require_stable v7+; v8+ batch groups.
v9's member_id and member_epoch are checked for a KIP-848 consumer group (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH);
a null member id with epoch -1 (an admin client) reads freely; classic groups do not check them, as in Kafka.
v10 (Kafka 4.2) names topics by id both ways: an id this broker's metadata does not know answers UNKNOWN_TOPIC_ID for
the partitions asked for, and a group's offsets of a topic no longer known by name are left out (no id to give).
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.handlers.offset_commit import name_topics_by_id
from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import BrokerServices, group_coordinator
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import offset_fetch as messages

R = messages.RESPONSE


def _topics(request_topics: Any) -> list[tuple[str, list[int]]] | None:
    if request_topics is None:
        return None
    return [(t.name, list(t.partition_indexes)) for t in request_topics]


def _fetch(context: RequestContext[BrokerServices], group_id: str, topics: list[tuple[str, list[int]]] | None,
           require_stable: bool, member_id: str | None = None, member_epoch: int = -1) -> tuple[ErrorCode, list[Any]]:
    """The group's error and its offsets (coordinator.FetchedOffset) the principal may see."""
    from epoch_broker.broker.groups.coordinator import FetchedOffset  # imported on first group use, not at start

    if not context.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    coordinator = group_coordinator(context.services)
    if topics is None:
        error, offsets = coordinator.fetch_offsets(group_id, None, require_stable, member_id, member_epoch)
        describable = authorized_names(context, AclOperation.DESCRIBE, ResourceType.TOPIC, (o.topic for o in offsets))
        return error, [o for o in offsets if o.topic in describable]
    describable = authorized_names(context, AclOperation.DESCRIBE, ResourceType.TOPIC, (name for name, _ in topics))
    error, offsets = coordinator.fetch_offsets(group_id, [t for t in topics if t[0] in describable], require_stable,
                                               member_id, member_epoch)
    if error:
        return error, offsets
    return error, offsets + [FetchedOffset(name, p, -1, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                             for name, partitions in topics if name not in describable for p in partitions]


@handles(messages.API, "1-10")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    if context.api_version >= 8:
        by_id = context.api_version >= 10
        metadata = context.services.metadata
        response = R.cls()
        for g in request.groups:
            unknown_ids = name_topics_by_id(context, g) if by_id and g.topics is not None else []
            error, offsets = _fetch(context, g.group_id, _topics(g.topics), request.require_stable,
                                    g.member_id if context.api_version >= 9 else None,
                                    g.member_epoch if context.api_version >= 9 else -1)
            by_topic: dict[str, list[Any]] = {}
            for o in offsets:
                by_topic.setdefault(o.topic, []).append(R.OffsetFetchResponsePartitions(
                    partition_index=o.partition, committed_offset=o.offset, committed_leader_epoch=o.leader_epoch,
                    metadata=o.metadata, error_code=o.error,
                ))
            answered = [R.OffsetFetchResponseTopics(name=name, partitions=ps) for name, ps in by_topic.items()]
            if by_id:
                answered = [t for t in answered if t.name in metadata.topics_by_name]
                for topic in answered:
                    topic.topic_id = metadata.topics_by_name[topic.name].topic_id
                answered += [R.OffsetFetchResponseTopics(topic_id=t.topic_id, partitions=[
                    R.OffsetFetchResponsePartitions(partition_index=p, committed_offset=-1, metadata="",
                                                    error_code=ErrorCode.UNKNOWN_TOPIC_ID)
                    for p in t.partition_indexes]) for t in unknown_ids]
            response.groups.append(R.OffsetFetchResponseGroup(group_id=g.group_id, error_code=error,
                                                              topics=answered))
        return response

    topics = _topics(request.topics)
    error, offsets = _fetch(context, request.group_id, topics, request.require_stable)
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

