"""broker/security/acl.py: Kafka's ACL authorizer decisions, table-driven: which ACLs apply to a resource, DENY
over ALLOW, the implied operations, super users, allow.everyone.if.no.acl.found, the filters of DescribeAcls and
DeleteAcls, validation, the index kept right by add/remove, and the authorized-operations bit field.

Unless a row says otherwise, the request is alice's, from 10.0.0.1, on the topic "orders".
"""

from __future__ import annotations

import json

import pytest

from epoch_broker.broker.security.acl import (
    SUPPORTED_OPERATIONS,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    Authorizer,
    PatternType,
    ResourceType,
    parse_super_users,
    validate_binding,
    validate_filter,
)

Op = AclOperation
ALLOW = AclPermissionType.ALLOW
DENY = AclPermissionType.DENY
LITERAL = PatternType.LITERAL
PREFIXED = PatternType.PREFIXED
TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
CLUSTER = ResourceType.CLUSTER
ALICE = "User:alice"
HOST = "10.0.0.1"


def acl(
    name: str = "orders",
    operation: AclOperation = Op.READ,
    permission: AclPermissionType = ALLOW,
    *,
    pattern: PatternType = LITERAL,
    principal: str = ALICE,
    host: str = "*",
    resource_type: ResourceType = TOPIC,
) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


def allowed(
    bindings: list[AclBinding],
    operation: AclOperation = Op.READ,
    name: str = "orders",
    *,
    principal: str = ALICE,
    host: str = HOST,
    resource_type: ResourceType = TOPIC,
    allow_everyone: bool = False,
) -> bool:
    authorizer = Authorizer(bindings, allow_everyone_if_no_acl_found=allow_everyone)
    return authorizer.authorize(principal, host, operation, resource_type, name)


@pytest.mark.parametrize(
    ("binding", "resource_name", "expected"),
    [
        (acl("orders"), "orders", True),
        (acl("orders"), "orders-eu", False),
        (acl("orders"), "order", False),
        (acl("*"), "orders", True),
        (acl("*"), "*", True),
        (acl("ord", pattern=PREFIXED), "orders", True),
        (acl("orders", pattern=PREFIXED), "orders", True),
        (acl("orders-", pattern=PREFIXED), "orders", False),
        (acl("rders", pattern=PREFIXED), "orders", False),
        (acl("*", pattern=PREFIXED), "orders", False),
        (acl("*", pattern=PREFIXED), "*orders", True),
        (acl("orders", resource_type=GROUP), "orders", False),
        (acl("*", resource_type=GROUP), "orders", False),
        (acl("o", pattern=PREFIXED, resource_type=GROUP), "orders", False),
    ],
)
def test_an_acl_applies_by_literal_name_literal_wildcard_or_prefix_of_the_same_resource_type(
    binding: AclBinding, resource_name: str, expected: bool
) -> None:
    assert allowed([binding], name=resource_name) is expected


@pytest.mark.parametrize(
    ("bindings", "operation", "expected"),
    [
        ([acl(), acl(permission=DENY)], Op.READ, False),
        ([acl(operation=Op.ALL), acl(permission=DENY)], Op.READ, False),
        ([acl(operation=Op.ALL), acl(permission=DENY)], Op.WRITE, True),
        ([acl(), acl("ord", Op.ALL, DENY, pattern=PREFIXED)], Op.READ, False),
        ([acl(), acl("*", Op.READ, DENY, principal="User:*")], Op.READ, False),
        ([acl(principal="User:*"), acl(permission=DENY)], Op.READ, False),
        ([acl(), acl(permission=DENY, principal="User:bob")], Op.READ, True),
        ([acl(), acl(permission=DENY, host="10.9.9.9")], Op.READ, True),
        ([acl(), acl(permission=DENY, host=HOST)], Op.READ, False),
        ([acl(), acl(operation=Op.WRITE, permission=DENY)], Op.READ, True),
    ],
)
def test_a_matching_deny_wins_over_any_allow(
    bindings: list[AclBinding], operation: AclOperation, expected: bool
) -> None:
    assert allowed(bindings, operation) is expected


@pytest.mark.parametrize(
    ("bindings", "operation", "expected"),
    [
        ([acl(operation=Op.READ)], Op.DESCRIBE, True),
        ([acl(operation=Op.WRITE)], Op.DESCRIBE, True),
        ([acl(operation=Op.DELETE)], Op.DESCRIBE, True),
        ([acl(operation=Op.ALTER)], Op.DESCRIBE, True),
        ([acl(operation=Op.CREATE)], Op.DESCRIBE, False),
        ([acl(operation=Op.ALTER_CONFIGS)], Op.DESCRIBE, False),
        ([acl(operation=Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS, True),
        ([acl(operation=Op.ALTER)], Op.DESCRIBE_CONFIGS, False),
        ([acl(operation=Op.DESCRIBE_CONFIGS)], Op.ALTER_CONFIGS, False),
        ([acl(operation=Op.DESCRIBE)], Op.READ, False),
        ([acl(operation=Op.READ)], Op.WRITE, False),
        # a DENY implies nothing: DENY READ leaves DESCRIBE to the ALLOWs
        ([acl(operation=Op.DESCRIBE), acl(operation=Op.READ, permission=DENY)], Op.DESCRIBE, True),
        ([acl(operation=Op.WRITE), acl(operation=Op.READ, permission=DENY)], Op.DESCRIBE, True),
        (
            [acl(operation=Op.DESCRIBE_CONFIGS), acl(operation=Op.ALTER_CONFIGS, permission=DENY)],
            Op.DESCRIBE_CONFIGS,
            True,
        ),
        ([acl(operation=Op.READ), acl(operation=Op.DESCRIBE, permission=DENY)], Op.DESCRIBE, False),
    ],
)
def test_describe_is_implied_by_an_allow_of_read_write_delete_or_alter_and_describe_configs_by_alter_configs(
    bindings: list[AclBinding], operation: AclOperation, expected: bool
) -> None:
    assert allowed(bindings, operation) is expected


CONCRETE_OPERATIONS = [op for op in AclOperation if op not in (Op.UNKNOWN, Op.ANY)]


@pytest.mark.parametrize("operation", CONCRETE_OPERATIONS, ids=lambda op: op.name)
def test_an_allow_of_all_allows_every_operation_and_a_deny_of_all_denies_every_one(operation: AclOperation) -> None:
    assert allowed([acl(operation=Op.ALL)], operation) is True
    assert allowed([acl(operation=operation), acl(operation=Op.ALL, permission=DENY)], operation) is False


@pytest.mark.parametrize(
    ("principal", "bindings", "allow_everyone", "expected"),
    [
        ("User:root", [], False, True),
        ("User:root", [acl(operation=Op.ALL, permission=DENY, principal="User:*")], False, True),
        ("User:root", [acl(operation=Op.ALL, permission=DENY, principal="User:root", host=HOST)], False, True),
        ("User:admin", [acl(operation=Op.ALL, permission=DENY, principal="User:*")], False, True),
        ("User:rooty", [], False, False),
        ("Group:root", [], False, False),
        ("User:alice", [acl(operation=Op.ALL, permission=DENY, principal="User:*")], True, False),
    ],
)
def test_super_users_are_allowed_whatever_the_acls_say(
    principal: str, bindings: list[AclBinding], allow_everyone: bool, expected: bool
) -> None:
    authorizer = Authorizer(
        bindings,
        super_users=parse_super_users("User:root;User:admin"),
        allow_everyone_if_no_acl_found=allow_everyone,
    )
    assert authorizer.authorize(principal, HOST, Op.ALTER, TOPIC, "orders") is expected


@pytest.mark.parametrize(
    ("bindings", "allow_everyone", "expected"),
    [
        ([], True, True),
        ([], False, False),
        ([acl("payments")], True, True),
        ([acl("orders", resource_type=GROUP)], True, True),
        ([acl("orders-", pattern=PREFIXED)], True, True),
        # any ACL of the resource counts, whoever, wherever and whatever it is for
        ([acl(principal="User:bob")], True, False),
        ([acl(host="10.9.9.9")], True, False),
        ([acl(operation=Op.WRITE)], True, False),
        ([acl("*", principal="User:bob")], True, False),
        ([acl("ord", pattern=PREFIXED, principal="User:bob")], True, False),
        ([acl(principal="User:bob", permission=DENY)], True, False),
        ([acl()], False, True),
    ],
)
def test_allow_everyone_if_no_acl_found_decides_only_when_the_resource_has_no_acl_at_all(
    bindings: list[AclBinding], allow_everyone: bool, expected: bool
) -> None:
    assert allowed(bindings, allow_everyone=allow_everyone) is expected


@pytest.mark.parametrize(
    ("acl_host", "client_host", "expected"),
    [
        ("*", HOST, True),
        (HOST, HOST, True),
        ("10.0.0.2", HOST, False),
        ("10.0.0.1", "10.0.0.10", False),
        ("::1", "::1", True),
    ],
)
def test_an_acl_host_matches_the_client_address_exactly_or_as_the_wildcard(
    acl_host: str, client_host: str, expected: bool
) -> None:
    assert allowed([acl(host=acl_host)], host=client_host) is expected


@pytest.mark.parametrize(
    ("acl_principal", "principal", "expected"),
    [
        ("User:alice", "User:alice", True),
        ("User:alice", "User:bob", False),
        ("User:alice", "user:alice", False),
        ("User:alice", "Group:alice", False),
        ("User:*", "User:alice", True),
        ("User:*", "User:ANONYMOUS", True),
        # "User:*" is Kafka's one wildcard principal and matches principals of any type
        ("User:*", "Group:ops", True),
        ("Group:*", "Group:ops", False),
        ("User:ali*", "User:alice", False),
    ],
)
def test_an_acl_principal_matches_exactly_or_as_the_user_wildcard(
    acl_principal: str, principal: str, expected: bool
) -> None:
    assert allowed([acl(principal=acl_principal)], principal=principal) is expected


def test_authorizing_anything_but_a_concrete_operation_on_a_concrete_resource_is_a_caller_bug() -> None:
    authorizer = Authorizer([acl()])
    with pytest.raises(ValueError, match="concrete"):
        authorizer.authorize(ALICE, HOST, Op.ANY, TOPIC, "orders")
    with pytest.raises(ValueError, match="concrete"):
        authorizer.authorize(ALICE, HOST, Op.READ, ResourceType.ANY, "orders")


FILTERED = {
    "lit-orders": acl("orders"),
    "lit-star": acl("*"),
    "pre-ord": acl("ord", pattern=PREFIXED),
    "pre-orders": acl("orders", pattern=PREFIXED),
    "pre-x": acl("x", pattern=PREFIXED),
    "lit-payments": acl("payments"),
    "group-orders": acl("orders", resource_type=GROUP),
    "bob-deny-write": acl("orders", Op.WRITE, DENY, principal="User:bob", host=HOST),
}


@pytest.mark.parametrize(
    ("binding_filter", "expected"),
    [
        (AclBindingFilter(), set(FILTERED)),
        (AclBindingFilter(resource_type=GROUP), {"group-orders"}),
        (AclBindingFilter(resource_type=ResourceType.UNKNOWN), set()),
        # ANY: either pattern type, the name exactly as written
        (AclBindingFilter(resource_name="orders"), {"lit-orders", "pre-orders", "group-orders", "bob-deny-write"}),
        (AclBindingFilter(TOPIC, "orders"), {"lit-orders", "pre-orders", "bob-deny-write"}),
        (AclBindingFilter(TOPIC, "*"), {"lit-star"}),
        # LITERAL and PREFIXED: exactly that pattern type, the name exactly as written
        (AclBindingFilter(TOPIC, "orders", LITERAL), {"lit-orders", "bob-deny-write"}),
        (AclBindingFilter(TOPIC, "orders", PREFIXED), {"pre-orders"}),
        (AclBindingFilter(TOPIC, "ord", PREFIXED), {"pre-ord"}),
        (AclBindingFilter(TOPIC, "ord", LITERAL), set()),
        (AclBindingFilter(TOPIC, None, PREFIXED), {"pre-ord", "pre-orders", "pre-x"}),
        (AclBindingFilter(TOPIC, None, LITERAL), {"lit-orders", "lit-star", "lit-payments", "bob-deny-write"}),
        # MATCH: every binding that would apply to the named resource
        (
            AclBindingFilter(TOPIC, "orders", PatternType.MATCH),
            {"lit-orders", "lit-star", "pre-ord", "pre-orders", "bob-deny-write"},
        ),
        (AclBindingFilter(TOPIC, "orders-eu", PatternType.MATCH), {"lit-star", "pre-ord", "pre-orders"}),
        (AclBindingFilter(TOPIC, "ord", PatternType.MATCH), {"lit-star", "pre-ord"}),
        (AclBindingFilter(TOPIC, "payments", PatternType.MATCH), {"lit-star", "lit-payments"}),
        (AclBindingFilter(TOPIC, "*", PatternType.MATCH), {"lit-star"}),
        (AclBindingFilter(GROUP, "orders", PatternType.MATCH), {"group-orders"}),
        (AclBindingFilter(resource_type=TOPIC, pattern_type=PatternType.MATCH), set(FILTERED) - {"group-orders"}),
        (AclBindingFilter(TOPIC, "orders", PatternType.UNKNOWN), set()),
        # the entry: principal and host exactly, operation and permission or ANY
        (AclBindingFilter(principal="User:bob"), {"bob-deny-write"}),
        (AclBindingFilter(principal="User:*"), set()),
        (AclBindingFilter(host=HOST), {"bob-deny-write"}),
        (AclBindingFilter(host="*"), set(FILTERED) - {"bob-deny-write"}),
        (AclBindingFilter(operation=Op.WRITE), {"bob-deny-write"}),
        (AclBindingFilter(operation=Op.ALL), set()),
        (AclBindingFilter(permission_type=DENY), {"bob-deny-write"}),
        (
            AclBindingFilter(TOPIC, "orders", PatternType.MATCH, permission_type=ALLOW),
            {"lit-orders", "lit-star", "pre-ord", "pre-orders"},
        ),
    ],
)
def test_a_filter_selects_bindings_as_describe_acls_and_delete_acls_do(
    binding_filter: AclBindingFilter, expected: set[str]
) -> None:
    assert {key for key, binding in FILTERED.items() if binding_filter.matches(binding)} == expected


@pytest.mark.parametrize(
    ("binding", "reason"),
    [
        (acl(), None),
        (acl("kafka-cluster", Op.CLUSTER_ACTION, resource_type=CLUSTER), None),
        (acl("t", pattern=PREFIXED, principal="User:*", host="::1", permission=DENY), None),
        (acl(resource_type=ResourceType.ANY), "Invalid resourceType ANY"),
        (acl(resource_type=ResourceType.UNKNOWN), "Invalid resourceType UNKNOWN"),
        (acl(pattern=PatternType.ANY), "Invalid patternType ANY"),
        (acl(pattern=PatternType.MATCH), "Invalid patternType MATCH"),
        (acl(pattern=PatternType.UNKNOWN), "Invalid patternType UNKNOWN"),
        (acl(operation=Op.ANY), "Invalid operation ANY"),
        (acl(operation=Op.UNKNOWN), "Invalid operation UNKNOWN"),
        (acl(permission=AclPermissionType.ANY), "Invalid permissionType ANY"),
        (acl(permission=AclPermissionType.UNKNOWN), "Invalid permissionType UNKNOWN"),
        (acl(""), "Resource name should not be empty"),
        (acl("", pattern=PREFIXED), "Resource name should not be empty"),
        (
            acl("my-cluster", Op.ALTER, resource_type=CLUSTER),
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ),
        (acl("*", Op.ALTER, resource_type=CLUSTER), "The only valid name for the CLUSTER resource is kafka-cluster"),
        (acl(principal="alice"), "Could not parse principal from `alice`"),
        (acl(principal=""), "Could not parse principal from ``"),
        (acl(principal="User:"), "Invalid principal `User:`"),
        (acl(principal=":alice"), "Invalid principal `:alice`"),
        (acl(host=""), "Host should not be empty"),
    ],
)
def test_validate_binding_names_why_create_acls_refuses_a_binding(binding: AclBinding, reason: str | None) -> None:
    problem = validate_binding(binding)
    if reason is None:
        assert problem is None
    else:
        assert problem is not None and problem.startswith(reason) and "\n" not in problem


@pytest.mark.parametrize(
    ("binding_filter", "reason"),
    [
        (AclBindingFilter(), None),
        (AclBindingFilter(TOPIC, "orders", PatternType.MATCH, "User:*", "*", Op.ALL, DENY), None),
        (AclBindingFilter(resource_type=ResourceType.UNKNOWN), "Invalid resourceType UNKNOWN"),
        (AclBindingFilter(pattern_type=PatternType.UNKNOWN), "Invalid patternType UNKNOWN"),
        (AclBindingFilter(operation=Op.UNKNOWN), "Invalid operation UNKNOWN"),
        (AclBindingFilter(permission_type=AclPermissionType.UNKNOWN), "Invalid permissionType UNKNOWN"),
    ],
)
def test_validate_filter_refuses_only_unknown_codes(binding_filter: AclBindingFilter, reason: str | None) -> None:
    problem = validate_filter(binding_filter)
    assert problem is None if reason is None else problem is not None and problem.startswith(reason)


def test_add_and_remove_keep_the_index_right_and_hold_each_binding_once() -> None:
    authorizer = Authorizer()
    literal, wildcard, prefixed = acl("orders"), acl("*", Op.WRITE), acl("ord", Op.DELETE, pattern=PREFIXED)
    same_length = acl("abc", Op.ALTER, pattern=PREFIXED)  # a second prefix of the same length as "ord"

    def ops() -> set[AclOperation]:
        return {
            op
            for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)
            if authorizer.authorize(ALICE, HOST, op, TOPIC, "orders")
        }

    assert ops() == set()
    assert [authorizer.add(b) for b in (literal, wildcard, prefixed, same_length)] == [True] * 4
    assert authorizer.add(acl("orders")) is False  # an equal binding is the same ACL
    assert (
        len(authorizer) == 4 and literal in authorizer and set(authorizer) == {literal, wildcard, prefixed, same_length}
    )
    assert ops() == {Op.READ, Op.WRITE, Op.DELETE}
    assert authorizer.authorize(ALICE, HOST, Op.ALTER, TOPIC, "abcd") is True

    assert authorizer.remove(same_length) is True
    assert ops() == {Op.READ, Op.WRITE, Op.DELETE}  # "ord" is still found though "abc" of its length is gone
    assert authorizer.authorize(ALICE, HOST, Op.ALTER, TOPIC, "abcd") is False
    assert authorizer.remove(literal) is True
    assert ops() == {Op.WRITE, Op.DELETE}
    assert authorizer.remove(literal) is False
    assert authorizer.remove(prefixed) is True
    assert ops() == {Op.WRITE}
    assert authorizer.remove(wildcard) is True
    assert ops() == set() and len(authorizer) == 0

    authorizer.allow_everyone_if_no_acl_found = True
    assert ops() == {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}  # nothing left behind in the index


def test_many_prefixes_of_many_lengths_are_found_through_the_index() -> None:
    # each prefix of team0..team199 of length 1, 5, 6 or 7, allowed to its own principal "User:<prefix>"
    prefixes = {f"team{i}"[:length] for i in range(200) for length in (1, 5, 6, 7)}
    bindings = [acl(prefix, pattern=PREFIXED, principal=f"User:{prefix}") for prefix in prefixes]
    authorizer = Authorizer(bindings)
    for principal, name, expected in [
        ("User:t", "team123-events", True),
        ("User:team1", "team123-events", True),
        ("User:team12", "team123-events", True),
        ("User:team123", "team123-events", True),
        ("User:team13", "team123-events", False),
        ("User:team123", "team12", False),
        ("User:team12", "team12", True),
    ]:
        assert authorizer.authorize(principal, HOST, Op.READ, TOPIC, name) is expected, (principal, name)
    for binding in bindings:
        assert authorizer.remove(binding) is True
    authorizer.allow_everyone_if_no_acl_found = True
    assert authorizer.authorize("User:nobody", HOST, Op.READ, TOPIC, "team123-events") is True


def test_adding_an_invalid_binding_raises_and_holds_nothing() -> None:
    authorizer = Authorizer()
    with pytest.raises(ValueError, match="Invalid patternType MATCH"):
        authorizer.add(acl(pattern=PatternType.MATCH))
    assert len(authorizer) == 0


def bits(*operations: AclOperation) -> int:
    return sum(1 << op for op in operations)


@pytest.mark.parametrize(
    ("bindings", "principal", "resource_type", "name", "operations", "expected"),
    [
        ([], ALICE, TOPIC, "orders", None, 0),
        ([acl(operation=Op.READ)], ALICE, TOPIC, "orders", None, bits(Op.READ, Op.DESCRIBE)),
        ([acl(operation=Op.ALTER_CONFIGS)], ALICE, TOPIC, "orders", None, bits(Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS)),
        ([acl(operation=Op.ALL)], ALICE, TOPIC, "orders", None, bits(*SUPPORTED_OPERATIONS[TOPIC])),
        (
            [acl(operation=Op.ALL), acl(operation=Op.WRITE, permission=DENY)],
            ALICE,
            TOPIC,
            "orders",
            None,
            bits(*SUPPORTED_OPERATIONS[TOPIC]) & ~bits(Op.WRITE),
        ),
        ([acl(operation=Op.ALL)], "User:bob", TOPIC, "orders", None, 0),
        ([], "User:root", TOPIC, "orders", None, bits(*SUPPORTED_OPERATIONS[TOPIC])),
        ([], "User:root", GROUP, "g", None, bits(Op.READ, Op.DESCRIBE, Op.DELETE)),
        ([acl("g", Op.READ, resource_type=GROUP)], ALICE, GROUP, "g", None, bits(Op.READ, Op.DESCRIBE)),
        (
            [acl("kafka-cluster", Op.ALL, resource_type=CLUSTER)],
            ALICE,
            CLUSTER,
            "kafka-cluster",
            None,
            bits(*SUPPORTED_OPERATIONS[CLUSTER]),
        ),
        ([acl(operation=Op.ALL)], ALICE, TOPIC, "orders", [Op.READ, Op.ALL], bits(Op.READ, Op.ALL)),
        ([acl(operation=Op.READ)], ALICE, TOPIC, "orders", [Op.WRITE, Op.DESCRIBE], bits(Op.DESCRIBE)),
    ],
)
def test_authorized_operations_sets_the_bit_of_each_allowed_operation(
    bindings: list[AclBinding],
    principal: str,
    resource_type: ResourceType,
    name: str,
    operations: list[AclOperation] | None,
    expected: int,
) -> None:
    authorizer = Authorizer(bindings, super_users={"User:root"})
    assert authorizer.authorized_operations(principal, HOST, resource_type, name, operations) == expected


def test_authorized_operations_of_a_topic_read_acl_is_kafkas_bit_field() -> None:
    # READ (3) and DESCRIBE (8): what a Kafka broker answers in Metadata for a consumer's topic
    authorizer = Authorizer([acl(operation=Op.READ)])
    assert authorizer.authorized_operations(ALICE, HOST, TOPIC, "orders") == 0b1_0000_1000


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", frozenset()),
        ("User:a", frozenset({"User:a"})),
        ("User:a;User:b", frozenset({"User:a", "User:b"})),
        (" User:a ; ;User:b;", frozenset({"User:a", "User:b"})),
        ("User:CN=admin,O=example;Group:ops", frozenset({"User:CN=admin,O=example", "Group:ops"})),
        ("User:a;User:a", frozenset({"User:a"})),
    ],
)
def test_super_users_parse_from_kafkas_semicolon_separated_principals(value: str, expected: frozenset[str]) -> None:
    assert parse_super_users(value) == expected


@pytest.mark.parametrize("value", ["alice", "User:a;bob", "User:a;:b", "User:"])
def test_super_users_with_an_entry_that_is_not_a_principal_are_refused(value: str) -> None:
    with pytest.raises(ValueError, match=r"super\.users"):
        parse_super_users(value)


def test_a_binding_round_trips_through_json_as_plain_ints_and_strings() -> None:
    binding = acl("ord", Op.IDEMPOTENT_WRITE, DENY, pattern=PREFIXED, principal="User:*", host="::1")
    body = binding.to_dict()
    assert body == {
        "resource_type": 2,
        "resource_name": "ord",
        "pattern_type": 4,
        "principal": "User:*",
        "host": "::1",
        "operation": 12,
        "permission_type": 2,
    }
    assert all(type(value) in (int, str) for value in body.values())
    again = AclBinding.from_dict(json.loads(json.dumps(body)))
    assert again == binding and again.operation is Op.IDEMPOTENT_WRITE


@pytest.mark.parametrize(
    ("enum", "code", "member"),
    [
        (ResourceType, 7, ResourceType.USER),
        (ResourceType, 8, ResourceType.UNKNOWN),
        (PatternType, 4, PatternType.PREFIXED),
        (PatternType, 99, PatternType.UNKNOWN),
        (AclOperation, 14, Op.DESCRIBE_TOKENS),
        (AclOperation, 15, Op.UNKNOWN),
        (AclPermissionType, 3, ALLOW),
        (AclPermissionType, -1, AclPermissionType.UNKNOWN),
    ],
)
def test_a_code_this_broker_does_not_know_reads_as_unknown_as_kafkas_from_code_does(
    enum: type, code: int, member: object
) -> None:
    assert enum(code) is member
