"""UnregisterBroker · v0 · remove a broker gone for good from the cluster metadata, through the controller.

Behaviour: needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED). BROKER_ID_NOT_REGISTERED for an unknown
id; INVALID_REQUEST for a live (unfenced) broker, which would register again (stop it first); else the registration
is removed and the broker is no longer listed (Controller.unregister_broker). Its replicas stay in their replica
sets until reassigned. A broker forwards to the controller; a controller-only process answers itself.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import BROKER, CONTROLLER, RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation
from epoch_broker.broker.security.authorization import require_cluster_operation
from epoch_broker.broker.services import Services
from epoch_broker.protocol.messages import unregister_broker


@handles(unregister_broker.API, "0", roles=(BROKER, CONTROLLER))
async def handle(context: RequestContext[Services], request: Any) -> Any:
    require_cluster_operation(context, AclOperation.ALTER)
    error, message = await context.services.channel.unregister_broker(request.broker_id)
    return unregister_broker.RESPONSE.cls(error_code=error, error_message=message)
