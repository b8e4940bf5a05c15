"""LeaveGroup · v0-5 · members leave at once instead of waiting for their session to expire.

Behaviour: needs READ on the group (GROUP_AUTHORIZATION_FAILED for the request, no member leaves). The group
rebalances without the leaving members (see `broker/groups/coordinator.py`).
Version notes: v0-2 name one member and its error is the response's error; v3+ batch members, identified by
member id and/or group.instance.id (an empty member id with an instance id leaves that static member), with
one error per member and a group-level error.
Skipped: `reason` (v5) is not recorded.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.services import BrokerServices, group_coordinator
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import leave_group as messages


@handles(messages.API, "0-5")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    if not context.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return messages.RESPONSE.cls(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if context.api_version < 3:
        leaving = [(request.member_id, None)]
    else:
        leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    error, results = group_coordinator(context.services).leave_group(request.group_id, leaving)
    response = messages.RESPONSE.cls(error_code=error)
    if context.api_version < 3:
        if error == 0 and results:
            response.error_code = results[0][2]
        return response
    response.members = [
        messages.RESPONSE.MemberResponse(member_id=m, group_instance_id=i, error_code=e) for m, i, e in results
    ]
    return response
