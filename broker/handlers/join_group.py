"""JoinGroup · v0-9 · join a group; the answer comes when the join phase completes.

Behaviour: needs READ on the group (GROUP_AUTHORIZATION_FAILED, generation -1, no member id). Then see
`broker/groups/coordinator.py`. MEMBER_ID_REQUIRED only for v4+ (kafkajs breaks on it below); the leader's answer
lists every member with its metadata for the selected protocol; v7+ name the protocol type.
Version notes: v0 has no rebalance timeout (the session timeout stands in); v5+ static membership;
protocol_name is nullable only from v7 (an empty string before).
KIP-814 (v9+): a static leader rejoining a Stable group with unchanged protocols gets the member list with
`skip_assignment` and no rebalance (its members keep their assignment); older versions rebalance, as in Kafka.
Skipped: `reason` (v8+) is not logged per member.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.services import BrokerServices, group_coordinator
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import join_group as messages


def client_host(peer: str) -> str:
    """Kafka's client_host form, "/127.0.0.1", from the connection's "host:port"."""
    return "/" + peer.rpartition(":")[0] if ":" in peer else peer


@handles(messages.API, "0-9")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    if not context.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return messages.RESPONSE.cls(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                     protocol_name=None if context.api_version >= 7 else "")
    result = await group_coordinator(context.services).join_group(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id,
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],  # copied: the frame is reused
        client_id=context.client_id or "",
        client_host=client_host(context.peer),
        require_known_member_id=context.api_version >= 4,
        skip_assignment_supported=context.api_version >= 9,
    )
    protocol_name = result.protocol_name
    if protocol_name is None and context.api_version < 7:
        protocol_name = ""
    return messages.RESPONSE.cls(
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader,
        member_id=result.member_id,
        skip_assignment=result.skip_assignment,
        members=[
            messages.RESPONSE.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=meta)
            for m, i, meta in result.members
        ],
    )
