"""Client quotas (Kafka's ClientQuotaControlManager, KIP-546): AlterClientQuotas as ClientQuotaRecord, one record
per value set or removed. The image's `client_quotas` holds them; broker/network/quotas.py enforces them.

Rules (Kafka's, INVALID_REQUEST for each refusal, per entity):
- An entity is a non-empty set of entity types, each once: "user" and "client-id" (either or both), or "ip" alone;
  any other type is refused. A name is a string, or None for the type's default entity; an empty name is refused,
  and an "ip" name must be an IP address (Kafka also takes a resolvable host name: no lookups here).
- The keys are those of the entity's types (broker/metadata/client_quotas.py); a value set must be above 0,
  and a whole number for an integral key (a LONG or INT one, within its range). A key named twice in one entity
  fails it. Removing a value that is not there writes nothing; setting the value it already has writes nothing.
- An entity named twice in one request fails (INVALID_REQUEST) and changes nothing; each other entity changes or
  fails on its own, the changes in one commit; `validate_only` decides the same and writes nothing.
- One answer per distinct entity, in the order the request first names them.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from epoch_broker.broker.controller.controller_result import ControllerResult
from epoch_broker.broker.metadata.client_quotas import (
    CLIENT_ID,
    IP,
    IP_QUOTAS,
    USER,
    USER_AND_CLIENT_QUOTAS,
    QuotaEntity,
    quota_entity,
)
from epoch_broker.broker.metadata.image import MetadataCache
from epoch_broker.broker.metadata.records import ClientQuotaRecord
from epoch_broker.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class QuotaAlteration:
    """One entry of AlterClientQuotas: the entity as the request names it ((type, name) pairs) and its operations,
    (key, value) with None to remove the value."""

    entity: tuple[tuple[str, str | None], ...]
    ops: tuple[tuple[str, float | None], ...]


def alterations_of(request: Any) -> list[QuotaAlteration]:
    """The AlterClientQuotas request's entries."""
    return [QuotaAlteration(tuple((e.entity_type, e.entity_name) for e in entry.entity),
                            tuple((op.key, None if op.remove else op.value) for op in entry.ops))
            for entry in request.entries]


def _entity_problem(entity: tuple[tuple[str, str | None], ...]) -> str | None:
    if not entity:
        return "Invalid empty client quota entity"
    types = [entity_type for entity_type, _ in entity]
    for entity_type, name in entity:
        if types.count(entity_type) > 1:
            return f"Invalid client quota entity, duplicate entity entry {entity_type}"
        if entity_type not in (USER, CLIENT_ID, IP):
            return f"Unhandled client quota entity type: {entity_type}"
        if name == "":
            return f"Empty {entity_type} not supported"
    if IP in types:
        if len(types) > 1:
            return "Invalid quota entity combination, IP entity should not be combined with User or ClientId"
        name = entity[0][1]
        try:
            if name is not None:
                ipaddress.ip_address(name)
        except ValueError:
            return f"{name} is not a valid IP"
    return None


def _value_problem(keys: dict[str, tuple[float, bool]], key: str, value: float) -> str | None:
    if key not in keys:
        return f"Invalid configuration key {key}"
    if value <= 0.0:
        return f"Quota {key} must be greater than 0"
    largest, integral = keys[key]
    if value > largest:
        return f"Proposed value for {key} is too large"
    if integral and abs(value % 1.0) > 1e-6:
        return f"{key} cannot be a fractional value."
    return None


class ClientQuotaControlManager:
    def __init__(self, image: MetadataCache) -> None:
        self.image = image

    def alter_client_quotas(self, alterations: list[QuotaAlteration], validate_only: bool
                            ) -> ControllerResult[list[tuple[QuotaAlteration, ErrorCode, str | None]]]:
        """Per distinct entity (its first alteration), NONE or why not."""
        seen: dict[QuotaEntity, int] = {}
        for alteration in alterations:
            key = quota_entity(dict(alteration.entity))
            seen[key] = seen.get(key, 0) + 1
        answers: list[tuple[QuotaAlteration, ErrorCode, str | None]] = []
        records: list[ClientQuotaRecord] = []
        answered: set[QuotaEntity] = set()
        for alteration in alterations:
            entity = quota_entity(dict(alteration.entity))
            if entity in answered:
                continue
            answered.add(entity)
            if seen[entity] > 1:
                problem: str | None = f"Ignoring duplicate entity {dict(alteration.entity)}"
            else:
                problem, changes = self._changes(alteration)
            if problem is not None:
                answers.append((alteration, ErrorCode.INVALID_REQUEST, problem))
                continue
            records.extend(changes)
            answers.append((alteration, ErrorCode.NONE, None))
        if validate_only or not records:
            return ControllerResult([], answers)
        return ControllerResult(list(records), answers, (f"altered {len(records)} client quota values",))

    def _changes(self, alteration: QuotaAlteration) -> tuple[str | None, list[ClientQuotaRecord]]:
        """The records one entity's operations make, or why it fails."""
        if (problem := _entity_problem(alteration.entity)) is not None:
            return problem, []
        entity = dict(alteration.entity)
        keys = IP_QUOTAS if IP in entity else USER_AND_CLIENT_QUOTAS
        named = [key for key, _ in alteration.ops]
        current = self.image.client_quotas.get(quota_entity(entity), {})
        records = []
        for key, value in alteration.ops:
            if named.count(key) > 1:
                return f"Duplicate quota key {key} not updating quota for this entity {entity}", []
            if value is None:
                if key in current:
                    records.append(ClientQuotaRecord(dict(entity), key, remove=True))
                continue
            if (problem := _value_problem(keys, key, value)) is not None:
                return problem, []
            if current.get(key) != value:
                records.append(ClientQuotaRecord(dict(entity), key, value))
        return None, records
