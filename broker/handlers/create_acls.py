"""CreateAcls · v0-3 · add ACL bindings, stored by the controller so that every broker agrees and they survive
restarts.

Behaviour: needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED for every creation otherwise). Without an
authorizer configured: SECURITY_DISABLED, as Kafka answers. Each creation is validated (acl.py's
validate_binding: INVALID_REQUEST with the reason); an existing binding is a success. A broker forwards to the
controller and answers once its own metadata has the bindings, so a DescribeAcls sent next sees them.
Version notes: v0 has no pattern type (always LITERAL); v2+ flexible; v3 allows the USER resource type.
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import BROKER, CONTROLLER, RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation
from epoch_broker.broker.security.authorization import acl_admin_refusal
from epoch_broker.broker.security.wire import binding_from_creation
from epoch_broker.broker.services import Services
from epoch_broker.protocol.messages import create_acls

Result = create_acls.RESPONSE.AclCreationResult


@handles(create_acls.API, "0-3", roles=(BROKER, CONTROLLER))
async def handle(context: RequestContext[Services], request: Any) -> Any:
    refusal = acl_admin_refusal(context, AclOperation.ALTER)
    if refusal is not None:
        return create_acls.RESPONSE.cls(results=[Result(error_code=refusal[0], error_message=refusal[1])
                                                 for _ in request.creations])
    results = await context.services.channel.create_acls([binding_from_creation(c) for c in request.creations])
    return create_acls.RESPONSE.cls(results=[Result(error_code=error, error_message=message)
                                             for error, message in results])

