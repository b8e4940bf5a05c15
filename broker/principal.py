"""Kafka principals as this broker writes them, "Type:name" (Kafka's `KafkaPrincipal` string form), and
`super.users`, a list of them.

Rules:
- A principal is a non-empty type and a non-empty name around the first colon ("User:alice"; the name may hold
  more colons). `principal_problem` says, in one line, why a string is not one (Kafka's wording), or None.
- `parse_super_users`: principals separated by ";", blanks around them and empty entries ignored; a ValueError
  names the first entry that is not a principal.

Below config.py and security/, which both parse principals: config.py checks `super.users` when it is read,
security/acl.py checks the principal of an ACL and holds the super users the authorizer allows.
"""

from __future__ import annotations


def principal_problem(principal: str) -> str | None:
    if ":" not in principal:
        return (
            f"Could not parse principal from `{principal}` "
            "(no colon is present separating the principal type from the principal name)"
        )
    kind, _, name = principal.partition(":")
    if not kind or not name:
        return f"Invalid principal `{principal}`: both the principal type and name must be non-empty"
    return None


def parse_super_users(value: str) -> frozenset[str]:
    """Kafka's `super.users`: principals separated by ";", blanks around them and empty entries ignored.
    Raises ValueError naming the first entry that is not a "Type:name" principal."""
    result: set[str] = set()
    for principal in (entry.strip() for entry in value.split(";")):
        if not principal:
            continue
        if problem := principal_problem(principal):
            raise ValueError(f"super.users: {problem}")
        result.add(principal)
    return frozenset(result)
