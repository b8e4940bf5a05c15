"""DeleteGroups · v0-2 · delete empty groups and all their committed offsets (KIP-229).

Behaviour: GROUP_ID_NOT_FOUND for a group unknown here, NON_EMPTY_GROUP while it has members; otherwise the
group and its offsets are tombstoned in `__consumer_offsets` and forgotten.
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.messages import delete_groups as messages


@handles(messages.API, "0-2")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    coordinator = context.services.group_coordinator
    return messages.RESPONSE.cls(results=[
        messages.RESPONSE.DeletableGroupResult(group_id=g, error_code=await coordinator.delete_group(g))
        for g in request.groups_names
    ])
