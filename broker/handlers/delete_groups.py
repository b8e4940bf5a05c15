"""DeleteGroups · v0-2 · delete empty groups and all their committed offsets (KIP-229).

Behaviour: needs DELETE on each group (GROUP_AUTHORIZATION_FAILED, not deleted). GROUP_ID_NOT_FOUND for a group
unknown here, NON_EMPTY_GROUP while it has members; otherwise the group and its offsets are tombstoned in
`__consumer_offsets` and forgotten.
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import BrokerServices, group_coordinator
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import delete_groups as messages


@handles(messages.API, "0-2")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    deletable = authorized_names(context, AclOperation.DELETE, ResourceType.GROUP, request.groups_names)
    return messages.RESPONSE.cls(results=[
        messages.RESPONSE.DeletableGroupResult(
            group_id=g, error_code=await group_coordinator(context.services).delete_group(g) if g in deletable
            else ErrorCode.GROUP_AUTHORIZATION_FAILED)
        for g in request.groups_names
    ])
