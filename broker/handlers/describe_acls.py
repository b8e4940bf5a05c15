"""DescribeAcls · v0-3 · the ACL bindings a filter matches, grouped by resource pattern.

Behaviour: needs DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise); without an authorizer:
SECURITY_DISABLED. The filter is validated (INVALID_REQUEST with the reason). Answered from this process's
metadata (the controller's records, applied here): every broker answers alike.
Version notes: v0 has no pattern type filter (LITERAL); v2+ flexible; v3 allows the USER resource type.
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import BROKER, CONTROLLER, RequestContext, handles
from epoch_broker.broker.security.acl import AclBinding, AclOperation, validate_filter
from epoch_broker.broker.security.authorization import acl_admin_refusal
from epoch_broker.broker.security.wire import filter_from_wire
from epoch_broker.broker.services import Services
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import describe_acls

Response = describe_acls.RESPONSE.cls
Resource = describe_acls.RESPONSE.DescribeAclsResource
Description = describe_acls.RESPONSE.AclDescription


@handles(describe_acls.API, "0-3", roles=(BROKER, CONTROLLER))
def handle(context: RequestContext[Services], request: Any) -> Any:
    refusal = acl_admin_refusal(context, AclOperation.DESCRIBE)
    if refusal is not None:
        return Response(error_code=refusal[0], error_message=refusal[1], resources=[])
    binding_filter = filter_from_wire(request)
    if (problem := validate_filter(binding_filter)) is not None:
        return Response(error_code=ErrorCode.INVALID_REQUEST, error_message=problem, resources=[])
    grouped: dict[tuple[int, str, int], list[AclBinding]] = {}
    for binding in sorted(context.services.metadata.acls, key=_order):
        if binding_filter.matches(binding):
            grouped.setdefault((binding.resource_type, binding.resource_name, binding.pattern_type), []).append(binding)
    return Response(error_code=ErrorCode.NONE, error_message=None, resources=[
        Resource(resource_type=kind, resource_name=name, pattern_type=pattern, acls=[
            Description(principal=b.principal, host=b.host, operation=b.operation, permission_type=b.permission_type)
            for b in bindings])
        for (kind, name, pattern), bindings in grouped.items()])


def _order(binding: AclBinding) -> tuple:
    return (binding.resource_type, binding.resource_name, binding.pattern_type, binding.principal, binding.host,
            binding.operation, binding.permission_type)
