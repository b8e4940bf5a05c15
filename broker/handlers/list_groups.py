"""ListGroups · v0-5 · the groups this broker coordinates.

Behaviour: with DESCRIBE on the cluster every group, else only those the principal may DESCRIBE (never an error, as
in Kafka): every live group led here, with its protocol type (empty for simple groups that only commit).
Version notes: v4 filters by state name (case-insensitive) and answers each group's state. v5 (KIP-848) filters by
group type ("classic", "consumer"; case-insensitive, as Kafka's Group.GroupType.parse: an unknown name matches no
group) and answers each group's type.
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import BrokerServices, group_coordinator
from epoch_broker.protocol.messages import list_groups as messages


@handles(messages.API, "0-5")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    groups = group_coordinator(context.services).list_groups(set(request.states_filter))
    types = {t.strip().lower() for t in request.types_filter}
    if types:
        groups = [g for g in groups if g.type in types]
    visible = authorized_names(context, AclOperation.DESCRIBE, ResourceType.GROUP, (g.group_id for g in groups),
                               or_cluster=AclOperation.DESCRIBE)
    groups = [g for g in groups if g.group_id in visible]
    listed = messages.RESPONSE.ListedGroup
    return messages.RESPONSE.cls(groups=[
        listed(group_id=g.group_id, protocol_type=g.protocol_type or "", group_state=g.state_name,
               group_type=g.type)
        for g in groups
    ])
