"""OffsetDelete · v0 · delete a group's committed offsets for some partitions (KIP-496).

Behaviour: needs DELETE on the group (else GROUP_AUTHORIZATION_FAILED, nothing deleted) and READ on each topic
(else TOPIC_AUTHORIZATION_FAILED for its partitions, which keep their offsets). GROUP_ID_NOT_FOUND for a group
unknown here; a partition of a topic a member of the group subscribes to (consumer protocol) answers
GROUP_SUBSCRIBED_TO_TOPIC and keeps its offset; the others are deleted with tombstones in `__consumer_offsets`.
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import BrokerServices, group_coordinator
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import offset_delete as messages

R = messages.RESPONSE


@handles(messages.API, "0")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    if not context.authorized(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return R.cls(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    readable = authorized_names(context, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
    partitions = [(t.name, p.partition_index) for t in request.topics if t.name in readable for p in t.partitions]
    error, errors = await group_coordinator(context.services).delete_offsets(request.group_id, partitions)
    if error:
        return R.cls(error_code=error)
    results = iter(errors)
    return R.cls(topics=[
        R.OffsetDeleteResponseTopic(name=t.name, partitions=[
            R.OffsetDeleteResponsePartition(
                partition_index=p.partition_index,
                error_code=next(results) if t.name in readable else ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            for p in t.partitions
        ])
        for t in request.topics
    ])
