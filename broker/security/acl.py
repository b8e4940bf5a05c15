"""Kafka's standard ACL authorizer as pure decisions (AclAuthorizer / StandardAuthorizer): no IO, no asyncio.

An ACL is an `AclBinding`: a resource pattern (type, name, LITERAL or PREFIXED) and an entry (principal, host,
operation, ALLOW or DENY). The controller stores bindings as metadata records (`to_dict` / `from_dict`);
a broker keeps an `Authorizer` current with `add` / `remove` and asks it on every request.

Rules of `Authorizer.authorize(principal, host, operation, resource_type, resource_name)`:
- A super user (`super.users`, "User:a;User:b") is always allowed, whatever the ACLs say.
- The ACLs that apply to a resource are those of its type that are LITERAL with its name, LITERAL with the
  wildcard name "*", or PREFIXED with a prefix of its name (a PREFIXED "*" is just the character `*`).
- Of those, an ACL matches the request when its principal is the request's or "User:*" (the one wildcard
  principal: it matches any principal, of any type), and its host is the client's address or "*".
- A matching DENY of the operation or of ALL denies: DENY wins over any ALLOW.
- Otherwise a matching ALLOW of the operation or of ALL allows. An ALLOW also implies: DESCRIBE by READ,
  WRITE, DELETE or ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS. A DENY implies nothing: DENY READ does not deny
  DESCRIBE.
- No ACL applying to the resource at all (whoever it names): `allow.everyone.if.no.acl.found` decides.
  One ACL for someone else is enough for everyone else to be denied.

`AclBindingFilter` is DescribeAcls' and DeleteAcls' filter: None and ANY match anything; the pattern type
MATCH selects every binding that would apply to the named resource (by the rule above); LITERAL and PREFIXED
select exactly; ANY selects either kind with exactly that name. Principal and host compare exactly ("User:*"
in a filter finds the wildcard bindings, not everyone's).

Validation answers one line for INVALID_REQUEST, or None: `validate_binding` for CreateAcls, `validate_filter`
for DescribeAcls / DeleteAcls. A code this broker does not know reads as UNKNOWN (Kafka's `fromCode`), which
both refuse.

Differences from Kafka's meaning:
- A principal needs a non-empty type and name ("User:" is refused; Kafka only asks for the colon), and a host
  must not be empty: neither could ever match a request.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

# principal.py is below config.py, which checks `super.users` too; parse_super_users stays importable from
# here, the authorizer's module (as tests/broker/test_acl.py imports it)
from epoch_broker.broker.principal import parse_super_users as parse_super_users
from epoch_broker.broker.principal import principal_problem

WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"


class _KafkaCode(IntEnum):
    """A Kafka enum whose codes are on the wire: a code we do not know reads as UNKNOWN (code 0), so a newer
    client's value is refused as invalid instead of failing the decode."""

    @classmethod
    def _missing_(cls, value: object) -> Any:
        return cls(0) if isinstance(value, int) else None


class ResourceType(_KafkaCode):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_KafkaCode):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_KafkaCode):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_KafkaCode):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# The operations each resource type has (Kafka's AclEntry.supportedOperations): what an "authorized
# operations" field reports on. ALL is never reported, only what it grants.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}

_IMPLIES_DESCRIBE = frozenset(
    {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
)
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})
_NOT_CONCRETE_OPERATIONS = frozenset({AclOperation.UNKNOWN, AclOperation.ANY})
_NOT_CONCRETE_RESOURCES = frozenset({ResourceType.UNKNOWN, ResourceType.ANY})


def _allowed_by(operation: AclOperation) -> frozenset[AclOperation]:
    """The ALLOW operations that grant `operation`: itself, ALL, and for the two describes what implies them."""
    if operation is AclOperation.DESCRIBE:
        return _IMPLIES_DESCRIBE | {AclOperation.ALL}
    if operation is AclOperation.DESCRIBE_CONFIGS:
        return _IMPLIES_DESCRIBE_CONFIGS | {AclOperation.ALL}
    return frozenset({operation, AclOperation.ALL})


# Precomputed per operation, as authorize runs on every request.
_ALLOWED_BY = {op: _allowed_by(op) for op in AclOperation}
_DENIED_BY = {op: frozenset({op, AclOperation.ALL}) for op in AclOperation}


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL, as CreateAcls makes it and the metadata log keeps it."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def to_dict(self) -> dict[str, Any]:
        """Plain ints and strings, for a JSON metadata record."""
        return {
            "resource_type": int(self.resource_type),
            "resource_name": self.resource_name,
            "pattern_type": int(self.pattern_type),
            "principal": self.principal,
            "host": self.host,
            "operation": int(self.operation),
            "permission_type": int(self.permission_type),
        }

    @classmethod
    def from_dict(cls, body: dict[str, Any]) -> AclBinding:
        return cls(
            resource_type=ResourceType(body["resource_type"]),
            resource_name=body["resource_name"],
            pattern_type=PatternType(body["pattern_type"]),
            principal=body["principal"],
            host=body["host"],
            operation=AclOperation(body["operation"]),
            permission_type=AclPermissionType(body["permission_type"]),
        )


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """DescribeAcls' and DeleteAcls' selection of bindings; the defaults select every binding."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, binding: AclBinding) -> bool:
        return self._matches_pattern(binding) and self._matches_entry(binding)

    def _matches_pattern(self, binding: AclBinding) -> bool:
        if self.resource_type is not ResourceType.ANY and self.resource_type != binding.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != binding.pattern_type:
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type is not PatternType.MATCH:
            # ANY, LITERAL and PREFIXED all compare the name as written in the binding
            return self.resource_name == binding.resource_name
        # MATCH: would this binding apply to a resource of this name?
        return _applies_to(binding, self.resource_name)

    def _matches_entry(self, binding: AclBinding) -> bool:
        if self.principal is not None and self.principal != binding.principal:
            return False
        if self.host is not None and self.host != binding.host:
            return False
        if self.operation is not AclOperation.ANY and self.operation != binding.operation:
            return False
        return self.permission_type is AclPermissionType.ANY or self.permission_type == binding.permission_type


def _applies_to(binding: AclBinding, resource_name: str) -> bool:
    """Whether `binding` is one of the ACLs of a resource named `resource_name` (its type already checked)."""
    if binding.pattern_type is PatternType.PREFIXED:
        return resource_name.startswith(binding.resource_name)
    return binding.resource_name in (resource_name, WILDCARD_RESOURCE)


def validate_binding(binding: AclBinding) -> str | None:
    """Why CreateAcls must refuse `binding` with INVALID_REQUEST, in one line, or None if it may be created."""
    if binding.resource_type in _NOT_CONCRETE_RESOURCES:
        return f"Invalid resourceType {binding.resource_type.name}"
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {binding.pattern_type.name}"
    if binding.operation in _NOT_CONCRETE_OPERATIONS:
        return f"Invalid operation {binding.operation.name}"
    if binding.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {binding.permission_type.name}"
    if not binding.resource_name:
        return "Resource name should not be empty"
    if binding.resource_type is ResourceType.CLUSTER and binding.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if problem := principal_problem(binding.principal):
        return problem
    if not binding.host:
        return 'Host should not be empty: "*" or an address'
    return None


def validate_filter(binding_filter: AclBindingFilter) -> str | None:
    """Why DescribeAcls / DeleteAcls must refuse a filter with INVALID_REQUEST, or None. Only UNKNOWN is refused:
    ANY, MATCH and None are what filters are for."""
    if binding_filter.resource_type is ResourceType.UNKNOWN:
        return "Invalid resourceType UNKNOWN in the filter"
    if binding_filter.pattern_type is PatternType.UNKNOWN:
        return "Invalid patternType UNKNOWN in the filter"
    if binding_filter.operation is AclOperation.UNKNOWN:
        return "Invalid operation UNKNOWN in the filter"
    if binding_filter.permission_type is AclPermissionType.UNKNOWN:
        return "Invalid permissionType UNKNOWN in the filter"
    return None


class _PrefixIndex:
    """The PREFIXED bindings of one resource type, by prefix.

    A lookup probes the dict once for each distinct prefix length not longer than the name (few in practice),
    so its cost does not grow with the number of bindings."""

    __slots__ = ("_by_prefix", "_length_counts", "_lengths")

    def __init__(self) -> None:
        self._by_prefix: dict[str, set[AclBinding]] = {}
        self._length_counts: dict[int, int] = {}  # prefix length -> how many distinct prefixes have it
        self._lengths: list[int] = []  # the keys of _length_counts, sorted

    def __bool__(self) -> bool:
        return bool(self._by_prefix)

    def add(self, binding: AclBinding) -> None:
        prefix = binding.resource_name
        bucket = self._by_prefix.get(prefix)
        if bucket is None:
            bucket = self._by_prefix[prefix] = set()
            length = len(prefix)
            if length not in self._length_counts:
                bisect.insort(self._lengths, length)
            self._length_counts[length] = self._length_counts.get(length, 0) + 1
        bucket.add(binding)

    def discard(self, binding: AclBinding) -> None:
        prefix = binding.resource_name
        bucket = self._by_prefix.get(prefix)
        if bucket is None:
            return
        bucket.discard(binding)
        if bucket:
            return
        del self._by_prefix[prefix]
        length = len(prefix)
        self._length_counts[length] -= 1
        if not self._length_counts[length]:
            del self._length_counts[length]
            self._lengths.remove(length)

    def applying_to(self, resource_name: str) -> Iterator[AclBinding]:
        for length in self._lengths:
            if length > len(resource_name):
                break
            yield from self._by_prefix.get(resource_name[:length], ())


class Authorizer:
    """The ACLs of a cluster and the decisions they make (the rules are at the top of this module).

    Holds only bindings `validate_binding` accepts (`add` raises ValueError otherwise); a binding is held once,
    as Kafka's ACLs are a set."""

    def __init__(
        self,
        bindings: Iterable[AclBinding] = (),
        *,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._bindings: set[AclBinding] = set()
        # LITERAL bindings by (type, name); the wildcard ones are under the name "*"
        self._literal: dict[tuple[ResourceType, str], set[AclBinding]] = {}
        self._prefixed: dict[ResourceType, _PrefixIndex] = {}
        for binding in bindings:
            self.add(binding)

    def __len__(self) -> int:
        return len(self._bindings)

    def __iter__(self) -> Iterator[AclBinding]:
        return iter(self._bindings)

    def __contains__(self, binding: object) -> bool:
        return binding in self._bindings

    def add(self, binding: AclBinding) -> bool:
        """Hold `binding`; False if it was already held."""
        if problem := validate_binding(binding):
            raise ValueError(f"cannot hold an invalid ACL binding: {problem}")
        if binding in self._bindings:
            return False
        self._bindings.add(binding)
        if binding.pattern_type is PatternType.LITERAL:
            self._literal.setdefault((binding.resource_type, binding.resource_name), set()).add(binding)
        else:
            self._prefixed.setdefault(binding.resource_type, _PrefixIndex()).add(binding)
        return True

    def remove(self, binding: AclBinding) -> bool:
        """Drop `binding`; False if it was not held."""
        if binding not in self._bindings:
            return False
        self._bindings.remove(binding)
        if binding.pattern_type is PatternType.LITERAL:
            key = (binding.resource_type, binding.resource_name)
            bucket = self._literal[key]
            bucket.discard(binding)
            if not bucket:
                del self._literal[key]
        else:
            index = self._prefixed[binding.resource_type]
            index.discard(binding)
            if not index:
                del self._prefixed[binding.resource_type]
        return True

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: str,
    ) -> bool:
        """Whether `principal` connected from `host` may do `operation` on the resource."""
        _require_concrete(operation, resource_type)
        if principal in self.super_users:
            return True
        return self._verdict(self._applying(resource_type, resource_name), principal, host, operation)

    def authorized_operations(
        self,
        principal: str,
        host: str,
        resource_type: ResourceType,
        resource_name: str,
        operations: Iterable[AclOperation] | None = None,
    ) -> int:
        """The "authorized operations" bit field of Metadata, DescribeGroups and DescribeCluster: bit `op` set
        for each of `operations` (default: those the resource type has) that `authorize` allows."""
        if operations is None:
            operations = SUPPORTED_OPERATIONS.get(resource_type, ())
        # the ACLs of the resource are found once for all the operations
        applying = tuple(self._applying(resource_type, resource_name))
        is_super_user = principal in self.super_users
        bits = 0
        for operation in operations:
            _require_concrete(operation, resource_type)
            if is_super_user or self._verdict(applying, principal, host, operation):
                bits |= 1 << operation
        return bits

    def _applying(self, resource_type: ResourceType, resource_name: str) -> Iterator[AclBinding]:
        """The ACLs of a resource, whoever they name: literal, wildcard, then prefixed."""
        yield from self._literal.get((resource_type, resource_name), ())
        if resource_name != WILDCARD_RESOURCE:  # else the line above had them already
            yield from self._literal.get((resource_type, WILDCARD_RESOURCE), ())
        index = self._prefixed.get(resource_type)
        if index is not None:
            yield from index.applying_to(resource_name)

    def _verdict(self, applying: Iterable[AclBinding], principal: str, host: str, operation: AclOperation) -> bool:
        allowed_by = _ALLOWED_BY[operation]
        denied_by = _DENIED_BY[operation]
        found_acls = False
        allowed = False
        for binding in applying:
            found_acls = True
            if binding.principal != principal and binding.principal != WILDCARD_PRINCIPAL:
                continue
            if binding.host != host and binding.host != WILDCARD_HOST:
                continue
            if binding.permission_type is AclPermissionType.DENY:
                if binding.operation in denied_by:
                    return False  # DENY wins whatever else matches, so no need to look further
            elif binding.operation in allowed_by:
                allowed = True
        if not found_acls:
            return self.allow_everyone_if_no_acl_found
        return allowed


def _require_concrete(operation: AclOperation, resource_type: ResourceType) -> None:
    # a request is always for one real operation on one real resource: anything else is a bug in the caller
    if operation in _NOT_CONCRETE_OPERATIONS or resource_type in _NOT_CONCRETE_RESOURCES:
        raise ValueError(
            "only a concrete operation on a concrete resource can be authorized, "
            f"not {operation.name} on {resource_type.name}"
        )
