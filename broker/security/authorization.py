"""Whether a request's principal may do what it asks: the process's config around acl.py's decisions.

Rules:
- When the cluster has a secret, CLUSTER_ACTION (what only brokers send) is its brokers' principal
  (User:epoch-broker, logged in with the secret) and the super users', whatever the authorizer or
  `allow.everyone.if.no.acl.found` would say.
- No `authorizer.class.name`: every other request is allowed (Kafka's default).
- With the standard authorizer: `super.users` are always allowed; the rest is the ACLs' decision (acl.py),
  `allow.everyone.if.no.acl.found` deciding where no ACL applies.
- What only brokers do (the controller's APIs, replica fetches) is CLUSTER_ACTION on the cluster, as in
  Kafka: put the brokers' principal in `super.users` or allow it CLUSTER_ACTION.
- The host an ACL names is the client's IP address, as the connection sees it.
- Handlers ask through the helpers at the end (Kafka's AuthHelper): the names of a request allowed an operation,
  a cluster operation required, "authorized operations" bit fields, config resources, and KIP-679's "allowed on
  some resource of a type". docs/security.md lists what each API checks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from epoch_broker.broker.config import BROKER_PRINCIPAL, BrokerConfig
from epoch_broker.broker.principal import parse_super_users
from epoch_broker.broker.security.acl import (
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclOperation,
    AclPermissionType,
    Authorizer,
    PatternType,
    ResourceType,
)
from epoch_broker.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from epoch_broker.broker.network.dispatch import RequestContext

CLUSTER = "kafka-cluster"


def configure(config: BrokerConfig, acls: Authorizer) -> None:
    """Give the metadata's ACL index the process's super users (the brokers' own principal among them, with a
    cluster secret) and its no-ACL default."""
    acls.super_users = parse_super_users(config.super_users) | (
        {BROKER_PRINCIPAL} if config.cluster_secret else set())
    acls.allow_everyone_if_no_acl_found = config.allow_everyone_if_no_acl_found


def authorized(config: BrokerConfig, acls: Authorizer, principal: str, peer: str, operation: AclOperation,
               resource_type: ResourceType, name: str) -> bool:
    if config.cluster_secret and operation is AclOperation.CLUSTER_ACTION:
        # what only brokers send: the brokers' login (or a super user), never `allow.everyone.if.no.acl.found`
        return principal in acls.super_users
    if not config.authorizer_class_name:
        return True
    return acls.authorize(principal, peer.rpartition(":")[0] or peer, operation, resource_type, name)


# -- what the handlers ask (Kafka's AuthHelper), from a request's context ---------------------------------------

# The "authorized operations" fields' schema default: not asked for.
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
# Config resource types (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs) -> the ACL resource checked and
# the error a refusal answers (Kafka's ConfigHelper and ControllerApis.authorizeAlterResource); a broker resource
# is checked on the cluster, whatever broker it names.
_CONFIG_RESOURCES: dict[int, tuple[ResourceType, ErrorCode]] = {
    2: (ResourceType.TOPIC, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    4: (ResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    16: (ResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),  # client metrics (KIP-714), as Kafka's
    32: (ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED),
}


def _host(peer: str) -> str:
    return peer.rpartition(":")[0] or peer


def authorized_names(context: RequestContext[Any], operation: AclOperation, resource_type: ResourceType,
                     names: Iterable[str], *, or_cluster: AclOperation | None = None) -> set[str]:
    """Which of `names` the request may do `operation` on (Kafka's filterByAuthorized): each distinct name is
    asked once, however many partitions of it the request names. `or_cluster`: an operation on the cluster that
    allows every name (Kafka's CREATE for creating topics, DELETE for deleting them, DESCRIBE for listing
    groups)."""
    distinct = set(names)
    if or_cluster is not None and context.authorized(or_cluster):
        return distinct
    return {name for name in distinct if context.authorized(operation, resource_type, name)}


def require_cluster_operation(context: RequestContext[Any], operation: AclOperation) -> None:
    """Kafka's authorizeClusterOperation: a KafkaError the dispatcher answers CLUSTER_AUTHORIZATION_FAILED in
    every error field of the response, when the request may not do `operation` on the cluster."""
    if not context.authorized(operation):
        raise KafkaError(f"{context.principal} may not {operation.name} the cluster",
                         ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


def authorized_operations(context: RequestContext[Any], resource_type: ResourceType, name: str) -> int:
    """The "authorized operations" bit field of a resource (Kafka's AuthHelper.authorizedOperations): every
    operation of the resource type when no authorizer is configured."""
    if not context.services.config.authorizer_class_name:
        return sum(1 << operation for operation in SUPPORTED_OPERATIONS[resource_type])
    return context.services.metadata.acls.authorized_operations(context.principal, _host(context.peer),
                                                                resource_type, name)


def cluster_authorized_operations(context: RequestContext[Any], requested: bool) -> int:
    """Metadata's (v8-10) and DescribeCluster's field: omitted unless requested, 0 without DESCRIBE on the
    cluster (the request is still answered: Kafka refuses neither API for it)."""
    if not requested:
        return AUTHORIZED_OPERATIONS_OMITTED
    if not context.authorized(AclOperation.DESCRIBE):
        return 0
    return authorized_operations(context, ResourceType.CLUSTER, CLUSTER)


def config_resource_refusal(context: RequestContext[Any], operation: AclOperation, resource_type: int,
                            resource_name: str) -> ErrorCode | None:
    """The error answering a config resource the request may not DESCRIBE_CONFIGS / ALTER_CONFIGS, or None if
    it may (or is of a type not listed: the handler refuses those itself)."""
    found = _CONFIG_RESOURCES.get(resource_type)
    if found is None:
        return None
    acl_type, error = found
    name = CLUSTER if acl_type is ResourceType.CLUSTER else resource_name
    return None if context.authorized(operation, acl_type, name) else error


def authorized_by_resource_type(context: RequestContext[Any], operation: AclOperation,
                                resource_type: ResourceType) -> bool:
    """Whether the request may do `operation` on at least one resource of the type (Kafka's default
    Authorizer.authorizeByResourceType, which StandardAuthorizer keeps; KIP-679's idempotent producer with WRITE
    on some topic). Decided as Kafka does:
    - allowed on a made-up name ("hardcode"): a super user, or no ACL there and allow.everyone.if.no.acl.found;
    - else, over the ALLOW and DENY ACLs of the type naming the principal (or User:*), the host (or *) and the
      operation (or ALL; no implied operations): a wildcard DENY denies, a wildcard ALLOW allows; otherwise
      allowed when some ALLOW is not dominated by a DENY: not a literal DENY of the same name (for a literal
      ALLOW), nor a PREFIXED DENY of any prefix of its name."""
    if not context.services.config.authorizer_class_name or context.authorized(operation, resource_type, "hardcode"):
        return True
    host = _host(context.peer)
    deny: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
    allow: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
    wildcard_allow = False
    for binding in context.services.metadata.acls:
        if (binding.resource_type != resource_type
                or binding.host not in (host, WILDCARD_HOST)
                or binding.principal not in (context.principal, WILDCARD_PRINCIPAL)
                or binding.operation not in (operation, AclOperation.ALL)):
            continue
        wildcard = binding.pattern_type is PatternType.LITERAL and binding.resource_name == WILDCARD_RESOURCE
        if binding.permission_type is AclPermissionType.DENY:
            if wildcard:
                return False
            deny[binding.pattern_type].add(binding.resource_name)
        elif wildcard:
            wildcard_allow = True
        else:
            allow[binding.pattern_type].add(binding.resource_name)
    if wildcard_allow:
        return True
    for pattern_type, names in allow.items():
        for name in names:
            if pattern_type is PatternType.LITERAL and name in deny[PatternType.LITERAL]:
                continue
            if not any(name[:end] in deny[PatternType.PREFIXED] for end in range(1, len(name) + 1)):
                return True
    return False


def acl_admin_refusal(context: RequestContext[Any], operation: AclOperation) -> tuple[ErrorCode, str] | None:
    """Why an ACL API (CreateAcls, DeleteAcls: ALTER; DescribeAcls: DESCRIBE on the cluster) is refused: no
    authorizer (SECURITY_DISABLED, as Kafka answers), or the operation not allowed; None when it may go on."""
    if not context.services.config.authorizer_class_name:
        return ErrorCode.SECURITY_DISABLED, "no authorizer is configured (authorizer.class.name)"
    if not context.authorized(operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, f"{context.principal} may not {operation.name} the cluster"
    return None
