"""OffsetCommit · v2-10 · store a group's consumed positions, with the leader epoch (KIP-320).

Behaviour: needs READ on the group (else GROUP_AUTHORIZATION_FAILED for every partition, nothing committed) and
READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions, the others committed). A member commits
within its generation (Stable, or PreparingRebalance before it rejoins); a group without members takes "simple"
commits with generation -1. Offsets are appended to `__consumer_offsets` before the answer. Unknown partitions get
UNKNOWN_TOPIC_OR_PARTITION, metadata over 4096 bytes OFFSET_METADATA_TOO_LARGE.
A KIP-848 consumer group's member commits with its member epoch in generation_id_or_member_epoch and v9+
(STALE_MEMBER_EPOCH for another epoch, UNSUPPORTED_VERSION below v9); epoch -1 only while the group is empty.
Version notes: committed_leader_epoch v6+ (-1 before); group_instance_id v7+; v10 (Kafka 4.2) names topics by id,
answered by id: an id this broker's metadata does not know gets UNKNOWN_TOPIC_ID for its partitions, as Kafka.
Skipped: retention_time_ms (v2-4): every offset follows offsets.retention.minutes, as in Kafka 2.1+.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import BrokerServices, group_coordinator
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import offset_commit as messages


@handles(messages.API, "2-10")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    unknown_ids = name_topics_by_id(context, request) if context.api_version >= 10 else []
    response = await _commit(context, request)
    R = messages.RESPONSE
    for asked, answered in zip(request.topics, response.topics, strict=True):
        answered.topic_id = asked.topic_id
    response.topics += [R.OffsetCommitResponseTopic(topic_id=t.topic_id, partitions=[
        R.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_ID)
        for p in t.partitions]) for t in unknown_ids]
    return response


def name_topics_by_id(context: RequestContext[BrokerServices], request: Any) -> list[Any]:
    """Give each topic of a request naming topics by id (v10+) its name from the metadata; the topics whose id is
    unknown are taken out of the request and returned."""
    known, unknown = [], []
    for topic in request.topics:
        state = context.services.metadata.topics_by_id.get(topic.topic_id)
        if state is None:
            unknown.append(topic)
        else:
            topic.name = state.name
            known.append(topic)
    request.topics = known
    return unknown


async def _commit(context: RequestContext[BrokerServices], request: Any) -> Any:
    if not context.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _response(request, lambda topic: ErrorCode.GROUP_AUTHORIZATION_FAILED)
    readable, offsets = readable_offsets(context, request)
    errors = iter(await group_coordinator(context.services).commit_offsets(
        request.group_id,
        request.generation_id_or_member_epoch,
        request.member_id,
        request.group_instance_id,
        offsets,
        context.api_version,
    ) if offsets else ())
    return _response(request, lambda topic: next(errors) if topic in readable
                     else ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def readable_offsets(context: RequestContext[BrokerServices], request: Any) -> tuple[set[str], list[Any]]:
    """The topics of the request the principal may READ, and the offsets of their partitions to commit (OffsetCommit
    and TxnOffsetCommit name them alike)."""
    from epoch_broker.broker.groups.coordinator import OffsetToCommit  # imported on first group use, not at start

    readable = authorized_names(context, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
    return readable, [
        OffsetToCommit(t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
        for t in request.topics if t.name in readable
        for p in t.partitions
    ]


def per_partition(request: Any, topic_type: Callable[..., Any], partition_type: Callable[..., Any],
                  error_of: Callable[[str], ErrorCode]) -> list[Any]:
    """One answer per partition of the request, in its order; `error_of(topic)` is called once per partition."""
    return [topic_type(name=t.name, partitions=[partition_type(partition_index=p.partition_index,
                                                               error_code=error_of(t.name)) for p in t.partitions])
            for t in request.topics]


def _response(request: Any, error_of: Callable[[str], ErrorCode]) -> Any:
    R = messages.RESPONSE
    return R.cls(topics=per_partition(request, R.OffsetCommitResponseTopic, R.OffsetCommitResponsePartition, error_of))
