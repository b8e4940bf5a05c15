"""ACL bindings, filters and SCRAM mechanisms to and from their wire structs (CreateAcls, DescribeAcls,
DeleteAcls, AlterUserScramCredentials): one place, used by the handlers and by the broker's channel, which
forwards these requests to the controller.

A code this broker does not know becomes UNKNOWN (acl.py's enums), which validation then refuses with
INVALID_REQUEST, as Kafka does.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from epoch_broker.broker.security.sasl import ScramCredential
from epoch_broker.protocol.messages import alter_user_scram_credentials, create_acls, delete_acls

SCRAM_MECHANISM_CODES = {"SCRAM-SHA-256": alter_user_scram_credentials.SCRAM_SHA_256,
                         "SCRAM-SHA-512": alter_user_scram_credentials.SCRAM_SHA_512}
SCRAM_MECHANISM_NAMES = {code: name for name, code in SCRAM_MECHANISM_CODES.items()}


def binding_from_creation(creation: Any) -> AclBinding:
    return _binding(creation, creation.resource_pattern_type)


def creation_of(binding: AclBinding) -> Any:
    return create_acls.REQUEST.AclCreation(
        resource_type=binding.resource_type, resource_name=binding.resource_name,
        resource_pattern_type=binding.pattern_type, principal=binding.principal, host=binding.host,
        operation=binding.operation, permission_type=binding.permission_type)


def filter_from_wire(wire: Any) -> AclBindingFilter:
    """DescribeAcls' request and DeleteAcls' filters name their fields alike."""
    return AclBindingFilter(ResourceType(wire.resource_type_filter), wire.resource_name_filter,
                            PatternType(wire.pattern_type_filter), wire.principal_filter, wire.host_filter,
                            AclOperation(wire.operation), AclPermissionType(wire.permission_type))


def filter_to_wire(binding_filter: AclBindingFilter) -> Any:
    return delete_acls.REQUEST.DeleteAclsFilter(
        resource_type_filter=binding_filter.resource_type, resource_name_filter=binding_filter.resource_name,
        pattern_type_filter=binding_filter.pattern_type, principal_filter=binding_filter.principal,
        host_filter=binding_filter.host, operation=binding_filter.operation,
        permission_type=binding_filter.permission_type)


def matching_acl_of(binding: AclBinding) -> Any:
    return delete_acls.RESPONSE.DeleteAclsMatchingAcl(
        error_code=0, error_message=None, resource_type=binding.resource_type, resource_name=binding.resource_name,
        pattern_type=binding.pattern_type, principal=binding.principal, host=binding.host,
        operation=binding.operation, permission_type=binding.permission_type)


def binding_from_matching_acl(matching: Any) -> AclBinding:
    return _binding(matching, matching.pattern_type)


def _binding(wire: Any, pattern_type: int) -> AclBinding:
    """CreateAcls' creations and DeleteAcls' matching ACLs differ only in the pattern type's field name."""
    return AclBinding(ResourceType(wire.resource_type), wire.resource_name, PatternType(pattern_type),
                      wire.principal, wire.host, AclOperation(wire.operation), AclPermissionType(wire.permission_type))


def scram_changes(request: Any) -> tuple[list[tuple[str, str]], list[tuple[str, ScramCredential | str]]]:
    """AlterUserScramCredentials' deletions (user, mechanism) and upsertions (user, credential, or why the
    request's values make none: an unknown mechanism, iterations out of bounds, a short salt)."""
    deletions = [(d.name, SCRAM_MECHANISM_NAMES.get(d.mechanism, "UNKNOWN")) for d in request.deletions]
    upsertions: list[tuple[str, ScramCredential | str]] = []
    for upsertion in request.upsertions:
        mechanism = SCRAM_MECHANISM_NAMES.get(upsertion.mechanism)
        try:
            if mechanism is None:
                raise ValueError(f"unknown SCRAM mechanism code {upsertion.mechanism}")
            if not upsertion.name:
                raise ValueError("a user name cannot be empty")
            credential: ScramCredential | str = ScramCredential.from_salted_password(
                mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations)
        except ValueError as exc:
            credential = str(exc)
        upsertions.append((upsertion.name, credential))
    return deletions, upsertions
