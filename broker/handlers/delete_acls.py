"""DeleteAcls · v0-3 · remove the ACL bindings each filter matches, through the controller.

Behaviour: needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED for every filter otherwise); without an
authorizer: SECURITY_DISABLED. Each filter is validated (INVALID_REQUEST with the reason) and answered with the
bindings it matched, which are deleted (acl.py's AclBindingFilter: ANY, MATCH, LITERAL, PREFIXED). A broker
answers once its own metadata has lost them.
Version notes: v0 has no pattern type filter (LITERAL); v2+ flexible; v3 allows the USER resource type.
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import BROKER, CONTROLLER, RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation
from epoch_broker.broker.security.authorization import acl_admin_refusal
from epoch_broker.broker.security.wire import filter_from_wire, matching_acl_of
from epoch_broker.broker.services import Services
from epoch_broker.protocol.messages import delete_acls

Result = delete_acls.RESPONSE.DeleteAclsFilterResult


@handles(delete_acls.API, "0-3", roles=(BROKER, CONTROLLER))
async def handle(context: RequestContext[Services], request: Any) -> Any:
    refusal = acl_admin_refusal(context, AclOperation.ALTER)
    if refusal is not None:
        return delete_acls.RESPONSE.cls(filter_results=[
            Result(error_code=refusal[0], error_message=refusal[1], matching_acls=[]) for _ in request.filters])
    results = await context.services.channel.delete_acls([filter_from_wire(f) for f in request.filters])
    return delete_acls.RESPONSE.cls(filter_results=[
        Result(error_code=error, error_message=message, matching_acls=[matching_acl_of(b) for b in matched])
        for error, message, matched in results])
