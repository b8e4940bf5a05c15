"""SyncGroup · v0-5 · the leader hands out assignments; every member waits for its own.

Behaviour: needs READ on the group (GROUP_AUTHORIZATION_FAILED, no assignment). Then see
`broker/groups/coordinator.py`. Members other than the leader are parked until the leader's SyncGroup arrives and
the group metadata is written to `__consumer_offsets`.
Version notes: v3+ static membership; v5 carries the protocol type and name the member expects
(INCONSISTENT_GROUP_PROTOCOL on a mismatch) and the answer names them.
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.services import BrokerServices, group_coordinator
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import sync_group as messages


@handles(messages.API, "0-5")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    if not context.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return messages.RESPONSE.cls(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    result = await group_coordinator(context.services).sync_group(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id,
        protocol_type=request.protocol_type,
        protocol_name=request.protocol_name,
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
    )
    return messages.RESPONSE.cls(
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
