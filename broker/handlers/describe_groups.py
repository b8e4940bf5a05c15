"""DescribeGroups · v0-6 · state, protocol and members of groups.

Behaviour: needs DESCRIBE on each group (else GROUP_AUTHORIZATION_FAILED with an empty state and no members). As
Kafka's GroupMetadata.summary: a Stable group names its protocol and shows each member's metadata and assignment;
in other states the protocol is empty and members are listed without them. A group unknown here, or of another
type (a KIP-848 consumer group), is described as Dead with no members: with no error (v0-5), or with
GROUP_ID_NOT_FOUND and why (v6, KIP-1043).
Version notes: v3+ authorized_operations when asked for: the operations the principal may do on the group
(every one with no authorizer); INT32_MIN otherwise, and for a refused or failed group.
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_operations
from epoch_broker.broker.services import BrokerServices, group_coordinator
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import describe_groups as messages

R = messages.RESPONSE


@handles(messages.API, "0-6")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    # imported on first group use, not at start
    from epoch_broker.broker.groups.classic_group import ClassicGroupState
    from epoch_broker.broker.groups.group_metadata_manager import GroupIdNotFound

    response = R.cls()
    for group_id in request.groups:
        if not context.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            response.groups.append(R.DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id))
            continue
        described = R.DescribedGroup(group_id=group_id, group_state=ClassicGroupState.DEAD.value)
        try:
            error, group = group_coordinator(context.services).describe_group(group_id)
        except GroupIdNotFound as exc:
            error, group = ErrorCode.NONE, None
            if context.api_version >= 6:
                error, described.error_message = ErrorCode.GROUP_ID_NOT_FOUND, str(exc)
        described.error_code = error
        if group is not None:
            stable = group.state is ClassicGroupState.STABLE
            described.group_state = group.state.value
            described.protocol_type = group.protocol_type or ""
            described.protocol_data = (group.protocol_name or "") if stable else ""
            described.members = [
                R.DescribedGroupMember(
                    member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata(group.protocol_name) if stable else b"",
                    member_assignment=m.assignment if stable else b"",
                )
                for m in group.members.values()
            ]
        if request.include_authorized_operations and error == ErrorCode.NONE:
            described.authorized_operations = authorized_operations(context, ResourceType.GROUP, group_id)
        response.groups.append(described)
    return response
