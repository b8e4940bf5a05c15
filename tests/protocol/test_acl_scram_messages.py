"""ACL (29 DescribeAcls, 30 CreateAcls, 31 DeleteAcls) and SCRAM credential (50, 51) messages.

Round trips at every declared version with realistic values (a prefixed topic ACL, a group ACL, a cluster
ACL; SCRAM upsertions and deletions), bytes built by hand from Kafka 3.9's JSON schemas, and, where
kafka-python is installed, its independent codec reading what we write and writing it back unchanged.
"""

from __future__ import annotations

import hashlib
import importlib
import struct
from collections.abc import Callable
from typing import Any

import pytest

from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import APIS, create_acls, delete_acls
from epoch_broker.protocol.messages import alter_user_scram_credentials as alter_scram
from epoch_broker.protocol.messages import describe_acls as acls
from epoch_broker.protocol.messages import describe_user_scram_credentials as describe_scram
from epoch_broker.protocol.schema import Field, Message

# -- realistic values ---------------------------------------------------------------------------------------

# (resource type, resource name, pattern type, principal, host, operation, permission type)
PREFIXED_TOPIC = (acls.TOPIC_RESOURCE, "orders-", acls.PREFIXED_PATTERN, "User:alice", "*", acls.READ, acls.ALLOW)
GROUP = (acls.GROUP_RESOURCE, "billing-service", acls.LITERAL_PATTERN, "User:alice", "10.0.4.17", acls.READ,
         acls.ALLOW)
CLUSTER = (acls.CLUSTER_RESOURCE, "kafka-cluster", acls.LITERAL_PATTERN, "User:ops", "*", acls.ALTER_CONFIGS,
           acls.DENY)
BINDINGS = (PREFIXED_TOPIC, GROUP, CLUSTER)

SALT_256 = bytes.fromhex("5a1e4c3b2a19080706f5e4d3c2b1a09f8e7d6c5b4a392817")
SALT_512 = bytes.fromhex("0f1e2d3c4b5a69788796a5b4c3d2e1f00112233445566778")
SALTED_256 = hashlib.pbkdf2_hmac("sha256", b"alice-secret", SALT_256, 4096)
SALTED_512 = hashlib.pbkdf2_hmac("sha512", b"alice-secret", SALT_512, 8192)


def pattern(pattern_type: int, version: int) -> int:
    """v0 has no pattern type on the wire: everything there is LITERAL (3), the declared default."""
    return pattern_type if version >= 1 else acls.LITERAL_PATTERN


def describe_acls_request(version: int) -> Any:
    # alice's ACLs on topics starting with "orders-", whatever the host, operation and permission
    return acls.REQUEST.cls(
        resource_type_filter=acls.TOPIC_RESOURCE, resource_name_filter="orders-",
        pattern_type_filter=pattern(acls.PREFIXED_PATTERN, version), principal_filter="User:alice",
        host_filter=None, operation=acls.ANY_OPERATION, permission_type=acls.ANY_PERMISSION,
    )


def describe_acls_match_everything(version: int) -> Any:
    return acls.REQUEST.cls(
        resource_type_filter=acls.ANY_RESOURCE, resource_name_filter=None,
        pattern_type_filter=pattern(acls.ANY_PATTERN, version), principal_filter=None, host_filter=None,
        operation=acls.ANY_OPERATION, permission_type=acls.ANY_PERMISSION,
    )


def describe_acls_response(version: int) -> Any:
    response = acls.RESPONSE
    resources = [
        response.DescribeAclsResource(
            resource_type=kind, resource_name=name, pattern_type=pattern(pattern_type, version),
            acls=[response.AclDescription(principal=principal, host=host, operation=operation,
                                          permission_type=permission)],
        )
        for kind, name, pattern_type, principal, host, operation, permission in BINDINGS
    ]
    return response.cls(throttle_time_ms=0, error_code=0, error_message=None, resources=resources)


def describe_acls_security_disabled(version: int) -> Any:
    return acls.RESPONSE.cls(throttle_time_ms=25, error_code=ErrorCode.SECURITY_DISABLED,
                             error_message="No Authorizer is configured on the broker", resources=[])


def create_acls_request(version: int) -> Any:
    creation = create_acls.REQUEST.AclCreation
    return create_acls.REQUEST.cls(creations=[
        creation(resource_type=kind, resource_name=name, resource_pattern_type=pattern(pattern_type, version),
                 principal=principal, host=host, operation=operation, permission_type=permission)
        for kind, name, pattern_type, principal, host, operation, permission in BINDINGS
    ])


def create_acls_response(version: int) -> Any:
    result = create_acls.RESPONSE.AclCreationResult
    return create_acls.RESPONSE.cls(throttle_time_ms=0, results=[
        result(error_code=0, error_message=None),
        result(error_code=0, error_message=None),
        result(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message="Cluster authorization failed."),
    ])


def delete_acls_request(version: int) -> Any:
    acl_filter = delete_acls.REQUEST.DeleteAclsFilter
    kind, name, pattern_type, principal, host, operation, permission = PREFIXED_TOPIC
    return delete_acls.REQUEST.cls(filters=[
        # exactly the prefixed topic binding
        acl_filter(resource_type_filter=kind, resource_name_filter=name,
                   pattern_type_filter=pattern(pattern_type, version), principal_filter=principal,
                   host_filter=host, operation=operation, permission_type=permission),
        # everything anyone may do on the group, from any host
        acl_filter(resource_type_filter=acls.GROUP_RESOURCE, resource_name_filter="billing-service",
                   pattern_type_filter=pattern(acls.ANY_PATTERN, version), principal_filter=None,
                   host_filter=None, operation=acls.ANY_OPERATION, permission_type=acls.ANY_PERMISSION),
    ])


def delete_acls_response(version: int) -> Any:
    response = delete_acls.RESPONSE
    matching = [
        response.DeleteAclsMatchingAcl(
            error_code=0, error_message=None, resource_type=kind, resource_name=name,
            pattern_type=pattern(pattern_type, version), principal=principal, host=host, operation=operation,
            permission_type=permission,
        )
        for kind, name, pattern_type, principal, host, operation, permission in BINDINGS
    ]
    return response.cls(throttle_time_ms=0, filter_results=[
        response.DeleteAclsFilterResult(error_code=0, error_message=None, matching_acls=matching[:1]),
        response.DeleteAclsFilterResult(error_code=0, error_message=None, matching_acls=matching[1:2]),
        response.DeleteAclsFilterResult(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                        error_message="Cluster authorization failed.", matching_acls=[]),
    ])


def describe_scram_request(version: int) -> Any:
    user = describe_scram.REQUEST.UserName
    return describe_scram.REQUEST.cls(users=[user(name="alice"), user(name="bob")])


def describe_scram_all_users(version: int) -> Any:
    return describe_scram.REQUEST.cls(users=None)


def describe_scram_response(version: int) -> Any:
    response = describe_scram.RESPONSE
    info = response.CredentialInfo
    return response.cls(throttle_time_ms=0, error_code=0, error_message=None, results=[
        response.DescribeUserScramCredentialsResult(
            user="alice", error_code=0, error_message=None,
            credential_infos=[info(mechanism=alter_scram.SCRAM_SHA_256, iterations=4096),
                              info(mechanism=alter_scram.SCRAM_SHA_512, iterations=8192)],
        ),
        response.DescribeUserScramCredentialsResult(
            user="bob", error_code=ErrorCode.RESOURCE_NOT_FOUND,
            error_message="Attempt to describe a user credential that does not exist", credential_infos=[],
        ),
    ])


def alter_scram_request(version: int) -> Any:
    request = alter_scram.REQUEST
    upsertion = request.ScramCredentialUpsertion
    return request.cls(
        deletions=[request.ScramCredentialDeletion(name="bob", mechanism=alter_scram.SCRAM_SHA_256)],
        upsertions=[
            upsertion(name="alice", mechanism=alter_scram.SCRAM_SHA_256, iterations=4096, salt=SALT_256,
                      salted_password=SALTED_256),
            upsertion(name="alice", mechanism=alter_scram.SCRAM_SHA_512, iterations=8192, salt=SALT_512,
                      salted_password=SALTED_512),
        ],
    )


def alter_scram_response(version: int) -> Any:
    result = alter_scram.RESPONSE.AlterUserScramCredentialsResult
    return alter_scram.RESPONSE.cls(throttle_time_ms=0, results=[
        result(user="alice", error_code=0, error_message=None),
        result(user="bob", error_code=ErrorCode.RESOURCE_NOT_FOUND,
               error_message="Attempt to delete a user credential that does not exist"),
    ])


SAMPLES: list[tuple[str, Message, Callable[[int], Any]]] = [
    ("describe-acls-request-prefixed-topic", acls.REQUEST, describe_acls_request),
    ("describe-acls-request-match-everything", acls.REQUEST, describe_acls_match_everything),
    ("describe-acls-response-three-bindings", acls.RESPONSE, describe_acls_response),
    ("describe-acls-response-security-disabled", acls.RESPONSE, describe_acls_security_disabled),
    ("create-acls-request", create_acls.REQUEST, create_acls_request),
    ("create-acls-response", create_acls.RESPONSE, create_acls_response),
    ("delete-acls-request", delete_acls.REQUEST, delete_acls_request),
    ("delete-acls-response", delete_acls.RESPONSE, delete_acls_response),
    ("describe-scram-request-two-users", describe_scram.REQUEST, describe_scram_request),
    ("describe-scram-request-all-users", describe_scram.REQUEST, describe_scram_all_users),
    ("describe-scram-response", describe_scram.RESPONSE, describe_scram_response),
    ("alter-scram-request", alter_scram.REQUEST, alter_scram_request),
    ("alter-scram-response", alter_scram.RESPONSE, alter_scram_response),
]


def every_version(samples: list[tuple[str, Message, Callable[[int], Any]]] | None = None) -> list[Any]:
    """(message, build, version) for every declared version of each sample (this module's SAMPLES by default)."""
    return [
        pytest.param(message, build, version, id=f"{name}-v{version}")
        for name, message, build in (SAMPLES if samples is None else samples)
        for version in range(message.versions.low, message.versions.high + 1)
    ]


# -- declarations -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "name", "versions", "flexible"),
    [(29, "DescribeAcls", (0, 3), 2), (30, "CreateAcls", (0, 3), 2), (31, "DeleteAcls", (0, 3), 2),
     (50, "DescribeUserScramCredentials", (0, 0), 0), (51, "AlterUserScramCredentials", (0, 0), 0)],
)
def test_each_api_is_registered_under_its_key_with_kafka_39_versions(
    key: int, name: str, versions: tuple[int, int], flexible: int
) -> None:
    api = APIS[key]
    assert api.name == name
    assert (api.versions.low, api.versions.high) == versions
    for version in range(versions[0], versions[1] + 1):
        is_flexible = version >= flexible
        assert (version in api.request.flexible, version in api.response.flexible) == (is_flexible, is_flexible)
        assert api.request_header_version(version) == (2 if is_flexible else 1)
        assert api.response_header_version(version) == (1 if is_flexible else 0)


def test_pattern_types_default_to_literal_as_in_kafka() -> None:
    assert acls.REQUEST.cls().pattern_type_filter == acls.LITERAL_PATTERN == 3
    assert acls.RESPONSE.DescribeAclsResource().pattern_type == 3
    assert create_acls.REQUEST.AclCreation().resource_pattern_type == 3
    assert delete_acls.REQUEST.DeleteAclsFilter().pattern_type_filter == 3
    assert delete_acls.RESPONSE.DeleteAclsMatchingAcl().pattern_type == 3


# -- round trips --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("message", "build", "version"), every_version())
def test_realistic_messages_round_trip_at_every_version(
    message: Message, build: Callable[[int], Any], version: int
) -> None:
    assert_round_trip(message, build(version), version)


def assert_round_trip(message: Message, original: Any, version: int) -> None:
    """Encoded and decoded again, `original` is unchanged, and so are its bytes."""
    encoded = message.encode(original, version)
    decoded, end = message.decode_from(encoded, version)
    assert end == len(encoded)
    assert decoded == original
    assert decoded.to_dict() == original.to_dict()
    assert message.encode(decoded, version) == encoded


@pytest.mark.parametrize("version", [1, 2, 3])
def test_a_prefixed_pattern_survives_from_v1_on(version: int) -> None:
    decoded = create_acls.REQUEST.decode(create_acls.REQUEST.encode(create_acls_request(version), version), version)
    assert [c.resource_pattern_type for c in decoded.creations] == [acls.PREFIXED_PATTERN, 3, 3]
    assert decoded.creations[0].resource_name == "orders-"


def test_a_prefixed_pattern_is_not_on_the_wire_at_v0_and_decodes_as_literal() -> None:
    # Kafka refuses to send a non-literal pattern at v0; a codec alone cannot tell, so a handler must check.
    request = describe_acls_request(1)
    assert request.pattern_type_filter == acls.PREFIXED_PATTERN
    encoded = acls.REQUEST.encode(request, 0)
    assert len(encoded) == len(acls.REQUEST.encode(request, 1)) - 1
    assert acls.REQUEST.decode(encoded, 0).pattern_type_filter == acls.LITERAL_PATTERN


def test_scram_upsertions_keep_salt_iterations_and_salted_password_exactly() -> None:
    decoded = alter_scram.REQUEST.decode(alter_scram.REQUEST.encode(alter_scram_request(0), 0), 0)
    (deletion,) = decoded.deletions
    assert (deletion.name, deletion.mechanism) == ("bob", alter_scram.SCRAM_SHA_256)
    sha256, sha512 = decoded.upsertions
    assert (sha256.name, sha256.mechanism, sha256.iterations) == ("alice", 1, 4096)
    assert (sha256.salt, sha256.salted_password) == (SALT_256, SALTED_256)
    assert (sha512.mechanism, sha512.iterations, len(sha512.salted_password)) == (2, 8192, 64)
    assert (sha512.salt, sha512.salted_password) == (SALT_512, SALTED_512)


def test_a_null_user_list_and_an_empty_one_differ_on_the_wire() -> None:
    request = describe_scram.REQUEST
    assert request.encode(request.cls(users=None), 0) == b"\x00\x00"  # null array, no tags: every user
    assert request.encode(request.cls(users=[]), 0) == b"\x01\x00"  # empty array: also every user, per Kafka
    assert request.decode(b"\x00\x00", 0).users is None
    assert request.decode(b"\x01\x00", 0).users == []
    assert request.cls().users == []  # Kafka's default for the field is an empty list, not null


# -- bytes built by hand from the spec ----------------------------------------------------------------------


def int8(value: int) -> bytes:
    return struct.pack(">b", value)


def int16(value: int) -> bytes:
    return struct.pack(">h", value)


def int32(value: int) -> bytes:
    return struct.pack(">i", value)


def classic_string(text: str | None) -> bytes:
    if text is None:
        return int16(-1)
    data = text.encode()
    return int16(len(data)) + data


def compact(data: bytes | None) -> bytes:
    """Compact string or bytes (all lengths here stay below 127, so the varint is one byte)."""
    if data is None:
        return b"\x00"
    assert len(data) < 127
    return bytes([len(data) + 1]) + data


def compact_string(text: str | None) -> bytes:
    return compact(None if text is None else text.encode())


NO_TAGS = b"\x00"


def test_describe_acls_v1_request_matches_bytes_built_by_hand_from_the_spec() -> None:
    # ResourceTypeFilter int8, ResourceNameFilter string?, PatternTypeFilter int8 (v1+), PrincipalFilter
    # string?, HostFilter string?, Operation int8, PermissionType int8: no tags before v2.
    body = (
        b"\x02"  # TOPIC
        + b"\x00\x07orders-"
        + b"\x04"  # PREFIXED
        + b"\x00\x0aUser:alice"
        + b"\xff\xff"  # host filter: null, any host
        + b"\x01"  # ANY operation
        + b"\x01"  # ANY permission
    )
    assert body.hex() == "0200076f72646572732d04000a557365723a616c696365ffff0101"
    assert acls.REQUEST.encode(describe_acls_request(1), 1) == body
    decoded = acls.REQUEST.decode(body, 1)
    assert decoded == describe_acls_request(1)
    assert (decoded.resource_name_filter, decoded.pattern_type_filter, decoded.host_filter) == ("orders-", 4, None)


def test_describe_acls_v0_request_has_no_pattern_byte() -> None:
    body = b"\x02" + classic_string("orders-") + classic_string("User:alice") + classic_string(None) + b"\x01\x01"
    assert acls.REQUEST.encode(describe_acls_request(0), 0) == body
    assert acls.REQUEST.decode(body, 0) == describe_acls_request(0)


def test_describe_acls_v2_request_uses_compact_strings_and_ends_with_a_tag_section() -> None:
    body = (
        b"\x01" + compact_string(None) + b"\x01" + compact_string(None) + compact_string(None) + b"\x01\x01"
        + NO_TAGS
    )
    assert body == bytes.fromhex("01000100000101" + "00")
    assert acls.REQUEST.encode(describe_acls_match_everything(2), 2) == body
    assert acls.REQUEST.decode(body, 2) == describe_acls_match_everything(2)


def test_describe_acls_v3_response_matches_bytes_built_by_hand() -> None:
    def resource(kind: int, name: str, pattern_type: int, principal: str, host: str, operation: int,
                 permission: int) -> bytes:
        acl = compact_string(principal) + compact_string(host) + int8(operation) + int8(permission) + NO_TAGS
        return int8(kind) + compact_string(name) + int8(pattern_type) + b"\x02" + acl + NO_TAGS

    body = (
        int32(0) + int16(0) + compact_string(None)
        + b"\x04" + b"".join(resource(*binding) for binding in BINDINGS)  # three resources: count + 1
        + NO_TAGS
    )
    assert acls.RESPONSE.encode(describe_acls_response(3), 3) == body
    assert acls.RESPONSE.decode(body, 3) == describe_acls_response(3)


def test_create_acls_v1_request_matches_bytes_built_by_hand() -> None:
    def creation(kind: int, name: str, pattern_type: int, principal: str, host: str, operation: int,
                 permission: int) -> bytes:
        return (int8(kind) + classic_string(name) + int8(pattern_type) + classic_string(principal)
                + classic_string(host) + int8(operation) + int8(permission))

    body = int32(3) + b"".join(creation(*binding) for binding in BINDINGS)
    assert body.startswith(bytes.fromhex("00000003" "02" "00076f72646572732d" "04"))
    assert create_acls.REQUEST.encode(create_acls_request(1), 1) == body
    assert create_acls.REQUEST.decode(body, 1) == create_acls_request(1)


def test_delete_acls_v1_response_matches_bytes_built_by_hand() -> None:
    kind, name, pattern_type, principal, host, operation, permission = PREFIXED_TOPIC
    matching = (int16(0) + classic_string(None) + int8(kind) + classic_string(name) + int8(pattern_type)
                + classic_string(principal) + classic_string(host) + int8(operation) + int8(permission))
    group = GROUP
    matching_group = (int16(0) + classic_string(None) + int8(group[0]) + classic_string(group[1]) + int8(group[2])
                      + classic_string(group[3]) + classic_string(group[4]) + int8(group[5]) + int8(group[6]))
    body = (
        int32(0) + int32(3)
        + int16(0) + classic_string(None) + int32(1) + matching
        + int16(0) + classic_string(None) + int32(1) + matching_group
        + int16(31) + classic_string("Cluster authorization failed.") + int32(0)
    )
    assert delete_acls.RESPONSE.encode(delete_acls_response(1), 1) == body
    assert delete_acls.RESPONSE.decode(body, 1) == delete_acls_response(1)


def test_alter_user_scram_credentials_request_matches_bytes_built_by_hand() -> None:
    def upsertion(mechanism: int, iterations: int, salt: bytes, salted: bytes) -> bytes:
        return compact_string("alice") + int8(mechanism) + int32(iterations) + compact(salt) + compact(salted) + NO_TAGS

    body = (
        b"\x02" + compact_string("bob") + int8(1) + NO_TAGS  # one deletion
        + b"\x03" + upsertion(1, 4096, SALT_256, SALTED_256) + upsertion(2, 8192, SALT_512, SALTED_512)
        + NO_TAGS
    )
    assert body[:8] == bytes.fromhex("0204626f62010003")
    assert alter_scram.REQUEST.encode(alter_scram_request(0), 0) == body
    assert alter_scram.REQUEST.decode(body, 0) == alter_scram_request(0)


def test_describe_user_scram_credentials_response_matches_bytes_built_by_hand() -> None:
    alice = (compact_string("alice") + int16(0) + compact_string(None)
             + b"\x03" + int8(1) + int32(4096) + NO_TAGS + int8(2) + int32(8192) + NO_TAGS + NO_TAGS)
    not_found = "Attempt to describe a user credential that does not exist"
    bob = compact_string("bob") + int16(91) + compact_string(not_found) + b"\x01" + NO_TAGS
    body = int32(0) + int16(0) + compact_string(None) + b"\x03" + alice + bob + NO_TAGS
    assert describe_scram.RESPONSE.encode(describe_scram_response(0), 0) == body
    assert describe_scram.RESPONSE.decode(body, 0) == describe_scram_response(0)


def test_alter_user_scram_credentials_response_keeps_unknown_tags() -> None:
    body = (int32(0) + b"\x02" + compact_string("alice") + int16(0) + compact_string(None) + NO_TAGS
            + b"\x01" + b"\x07\x02ok")  # one unknown tag (7) on the message
    response = alter_scram.RESPONSE.decode(body, 0)
    assert response.results[0].user == "alice"
    assert alter_scram.RESPONSE.encode(response, 0) == body


# -- kafka-python's codec, an independent implementation of the same JSON -----------------------------------

KAFKA_PYTHON_MODULES = {29: "acl", 30: "acl", 31: "acl", 50: "users", 51: "users"}


def on_the_wire(fields: list[Field], obj: Any, version: int) -> dict[str, Any]:
    """Our object as a dict of the fields present at `version` only, as kafka-python's to_dict gives it."""
    out = {}
    for field in fields:
        if version not in field.versions:
            continue
        value = getattr(obj, field.name)
        if field.is_struct and value is not None:
            nested = field.fields or []
            value = ([on_the_wire(nested, item, version) for item in value] if field.is_array
                     else on_the_wire(nested, value, version))
        out[field.name] = value
    return out


def kafka_python_class(message: Message) -> Any:
    pytest.importorskip("kafka.protocol.admin.acl")
    module = importlib.import_module(f"kafka.protocol.admin.{KAFKA_PYTHON_MODULES[message.api_key or 0]}")
    return getattr(module, message.name)


@pytest.mark.parametrize(("message", "build", "version"), every_version())
def test_kafka_python_reads_what_we_write_and_writes_the_same_bytes(
    message: Message, build: Callable[[int], Any], version: int
) -> None:
    original = build(version)
    encoded = message.encode(original, version)
    theirs = kafka_python_class(message).decode(encoded, version=version)
    assert theirs.to_dict(json=False) == on_the_wire(message.fields, original, version)
    assert bytes(theirs.encode()) == encoded


def test_the_acl_and_mechanism_codes_agree_with_kafka_python() -> None:
    acl = pytest.importorskip("kafka.protocol.admin.acl")
    admin = pytest.importorskip("kafka.admin")
    assert (acl.ACLResourceType.TOPIC, acl.ACLResourceType.GROUP, acl.ACLResourceType.CLUSTER) == (
        acls.TOPIC_RESOURCE, acls.GROUP_RESOURCE, acls.CLUSTER_RESOURCE)
    assert (acl.ACLResourcePatternType.LITERAL, acl.ACLResourcePatternType.PREFIXED) == (
        acls.LITERAL_PATTERN, acls.PREFIXED_PATTERN)
    assert [acl.ACLOperation[name] for name in ("READ", "ALTER_CONFIGS", "DESCRIBE_TOKENS")] == [
        acls.READ, acls.ALTER_CONFIGS, acls.DESCRIBE_TOKENS]
    assert (acl.ACLPermissionType.DENY, acl.ACLPermissionType.ALLOW) == (acls.DENY, acls.ALLOW)
    assert (admin.ScramMechanism.SCRAM_SHA_256, admin.ScramMechanism.SCRAM_SHA_512) == (
        alter_scram.SCRAM_SHA_256, alter_scram.SCRAM_SHA_512)
