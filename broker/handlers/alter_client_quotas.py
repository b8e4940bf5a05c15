"""AlterClientQuotas · v0-1 · set and remove client quota values per user / client-id / ip entity (KIP-546), stored
by the controller as ClientQuotaRecord.

Behaviour: needs ALTER_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED for every entry otherwise). The
controller decides per entity (broker/controller/quota_control.py): INVALID_REQUEST for an unknown entity type or
key, a bad combination, an empty name, a value not above 0 or fractional where the key is integral, a key or an
entity named twice; validate_only changes nothing. One answer per distinct entity. A broker forwards to the
controller and answers once its own metadata has the change, so its next request is held to the new quota.
Skipped: nothing (ip entities and `controller_mutation_rate` are stored and described, not enforced).
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.controller.quota_control import alterations_of
from epoch_broker.broker.network.dispatch import BROKER, CONTROLLER, RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation
from epoch_broker.broker.services import Services
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import alter_client_quotas as messages

Entry = messages.RESPONSE.EntryData
Entity = messages.RESPONSE.EntityData


def _entity(pairs: Any) -> list[Any]:
    return [Entity(entity_type=entity_type, entity_name=name) for entity_type, name in pairs]


@handles(messages.API, "0-1", roles=(BROKER, CONTROLLER))
async def handle(context: RequestContext[Services], request: Any) -> Any:
    if not context.authorized(AclOperation.ALTER_CONFIGS):
        return messages.RESPONSE.cls(entries=[
            Entry(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, entity=_entity(
                (e.entity_type, e.entity_name) for e in entry.entity),
                error_message=f"{context.principal} may not ALTER_CONFIGS the cluster")
            for entry in request.entries])
    results = await context.services.channel.alter_client_quotas(alterations_of(request), request.validate_only)
    return messages.RESPONSE.cls(entries=[
        Entry(error_code=error, error_message=message, entity=_entity(alteration.entity))
        for alteration, error, message in results])
