"""ListGroups · v0-4 · the groups this broker coordinates.

Behaviour: with DESCRIBE on the cluster every group, else only those the principal may DESCRIBE (never an error, as
in Kafka): every live group led here, with its protocol type (empty for simple groups that only commit).
Version notes: v4 filters by state name (case-insensitive) and answers each group's state.
Skipped: nothing (v5's type filter, KIP-848, is not declared).
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import BrokerServices, group_coordinator
from epoch_broker.protocol.messages import list_groups as messages


@handles(messages.API, "0-4")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    groups = group_coordinator(context.services).list_groups(set(request.states_filter))
    visible = authorized_names(context, AclOperation.DESCRIBE, ResourceType.GROUP, (g.group_id for g in groups),
                               or_cluster=AclOperation.DESCRIBE)
    groups = [g for g in groups if g.group_id in visible]
    listed = messages.RESPONSE.ListedGroup
    return messages.RESPONSE.cls(groups=[
        listed(group_id=g.group_id, protocol_type=g.protocol_type or "", group_state=g.state.value) for g in groups
    ])
