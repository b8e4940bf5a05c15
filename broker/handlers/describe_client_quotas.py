"""DescribeClientQuotas · v0-1 · the client quotas (KIP-546) whose entities match a filter, from this broker's
metadata (Kafka's ClientQuotasImage.describe).

Behaviour: needs DESCRIBE_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise). Each filter component
names an entity type ("user", "client-id", "ip"; another: UNSUPPORTED_VERSION, as Kafka) at most once and matches
an exact name (match type 0, its match not null), the default entity (1, match null) or any entity having that
type, default included (2, match null); anything else, or "ip" with "user" or "client-id", is INVALID_REQUEST. An
entity matches when it has every component's type as asked; `strict` also leaves out an entity with a type no
component names. No components: every entity (or, strict, none).
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.metadata.client_quotas import CLIENT_ID, IP, USER, QuotaEntity
from epoch_broker.broker.network.dispatch import BROKER, RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation
from epoch_broker.broker.services import Services
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import describe_client_quotas as messages

Response = messages.RESPONSE.cls
Entry = messages.RESPONSE.EntryData
Entity = messages.RESPONSE.EntityData
Value = messages.RESPONSE.ValueData


class FilterError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def parse_filter(components: list[Any]) -> tuple[dict[str, str | None], set[str]]:
    """(type -> exact name or None for the default entity, the types matched by any name) of a filter."""
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for component in components:
        entity_type, match = component.entity_type, component.match
        if not entity_type:
            raise FilterError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if entity_type in exact or entity_type in typed:
            raise FilterError(ErrorCode.INVALID_REQUEST,
                              f"Entity type {entity_type} cannot appear more than once in the filter.")
        if entity_type not in (USER, CLIENT_ID, IP):
            raise FilterError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {entity_type}")
        if component.match_type == messages.MATCH_EXACT:
            if match is None:
                raise FilterError(ErrorCode.INVALID_REQUEST,
                                  "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[entity_type] = match
        elif component.match_type in (messages.MATCH_DEFAULT, messages.MATCH_SPECIFIED):
            if match is not None:
                kind = "DEFAULT" if component.match_type == messages.MATCH_DEFAULT else "SPECIFIED"
                raise FilterError(ErrorCode.INVALID_REQUEST,
                                  f"Request specified MATCH_TYPE_{kind}, but also specified a match string.")
            if component.match_type == messages.MATCH_DEFAULT:
                exact[entity_type] = None
            else:
                typed.add(entity_type)
        else:
            raise FilterError(ErrorCode.INVALID_REQUEST, f"Unknown match type {component.match_type}")
    named = exact.keys() | typed
    if IP in named and (USER in named or CLIENT_ID in named):
        raise FilterError(ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination. IP filter "
                                                     "component should not be used with user or clientId filter "
                                                     "component.")
    return exact, typed


def matches(entity: QuotaEntity, exact: dict[str, str | None], typed: set[str], strict: bool) -> bool:
    names = dict(entity)
    if strict and len(names) != len(exact) + len(typed):
        return False
    return (all(t in names and names[t] == name for t, name in exact.items())
            and all(t in names for t in typed))


@handles(messages.API, "0-1", roles=(BROKER,))
def handle(context: RequestContext[Services], request: Any) -> Any:
    if not context.authorized(AclOperation.DESCRIBE_CONFIGS):
        return Response(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, entries=None,
                        error_message=f"{context.principal} may not DESCRIBE_CONFIGS the cluster")
    try:
        exact, typed = parse_filter(request.components)
    except FilterError as exc:
        return Response(error_code=exc.code, error_message=str(exc), entries=None)
    return Response(error_code=ErrorCode.NONE, error_message=None, entries=[
        Entry(entity=[Entity(entity_type=t, entity_name=name) for t, name in entity],
              values=[Value(key=key, value=value) for key, value in sorted(values.items())])
        for entity, values in context.services.metadata.client_quotas.items()
        if matches(entity, exact, typed, request.strict)])
