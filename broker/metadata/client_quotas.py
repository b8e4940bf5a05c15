"""Client quota entities and keys (Kafka's ClientQuotaEntity and QuotaConfig, KIP-546): what AlterClientQuotas
stores (broker/controller/quota_control.py), the image holds and the broker enforces (broker/network/quotas.py).

Rules:
- An entity is its (entity type, name) pairs sorted by type; a name None is the type's default entity.
- A key is valid for the entity types it belongs to, with the largest value it takes and whether it is integral
  (Kafka's LONG and INT keys, against its DOUBLE ones).
"""

from __future__ import annotations

USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"  # stored and described; not enforced here
CONNECTION_CREATION_RATE = "connection_creation_rate"  # (ip entities) stored and described; not enforced here

# key -> (the largest value it takes, whether it must be whole)
USER_AND_CLIENT_QUOTAS: dict[str, tuple[float, bool]] = {
    PRODUCER_BYTE_RATE: (2.0**63 - 1, True),
    CONSUMER_BYTE_RATE: (2.0**63 - 1, True),
    REQUEST_PERCENTAGE: (float("inf"), False),
    CONTROLLER_MUTATION_RATE: (float("inf"), False),
}
IP_QUOTAS: dict[str, tuple[float, bool]] = {CONNECTION_CREATION_RATE: (2.0**31 - 1, True)}

QuotaEntity = tuple[tuple[str, str | None], ...]


def quota_entity(entity: dict[str, str | None]) -> QuotaEntity:
    return tuple(sorted(entity.items()))
