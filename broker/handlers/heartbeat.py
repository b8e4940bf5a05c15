"""Heartbeat · v0-4 · keep a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin.

Behaviour: needs READ on the group (GROUP_AUTHORIZATION_FAILED); then see `broker/groups/coordinator.py`
(UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID).
Version notes: v3+ static membership.
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.services import BrokerServices, group_coordinator
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import heartbeat as messages


@handles(messages.API, "0-4")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    if not context.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return messages.RESPONSE.cls(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = group_coordinator(context.services).heartbeat(
        request.group_id, request.member_id, request.group_instance_id, request.generation_id
    )
    return messages.RESPONSE.cls(error_code=error)
