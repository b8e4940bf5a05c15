"""Heartbeat · v0-4 · keep a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin.

Behaviour: see `broker/group_coordinator.py` (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID).
Version notes: v3+ static membership.
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from broker.dispatch import RequestContext, handles
from protocol.messages import heartbeat as messages


@handles(messages.API, "0-4")
def handle(context: RequestContext, request: Any) -> Any:
    error = context.broker.group_coordinator.heartbeat(
        request.group_id, request.member_id, request.group_instance_id, request.generation_id
    )
    return messages.RESPONSE.cls(error_code=error)
