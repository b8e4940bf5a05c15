"""The metadata records the controller writes to its log, and that brokers apply (KRaft's shape).

Every change to cluster metadata is one of these records. The controller appends them to its
`MetadataStore` and applies them to its own state; the broker applies the same records to its
`MetadataCache` and `ReplicaManager`. In one process both sides read the records directly; in a cluster
brokers fetch the same records from the controller (docs/cluster.md), so nothing here knows where it runs.

Rules:
- Records are frozen dataclasses with JSON-friendly fields (ids as hex strings on disk, bytes in memory).
- A record is never rewritten: a change to a partition is a new `PartitionChangeRecord`.
- `to_json` / `from_json` round-trip exactly; `type` names the record in the log.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ClusterRecord:
    """The first record of a metadata log: the cluster's id."""

    cluster_id: str


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    """A broker (re)registered: each registration gets a new, higher broker_epoch.

    `host`:`port` is its inter-broker listener (where replicas fetch); `endpoints` every advertised listener,
    name -> "host:port" (clients are told the endpoint of the listener they came in on)."""

    node_id: int
    broker_epoch: int
    incarnation_id: bytes
    host: str
    port: int
    rack: str | None = None
    endpoints: dict[str, str] = field(default_factory=dict)

    def endpoint(self, listener: str) -> tuple[str, int]:
        """Where a client of `listener` reaches this broker (its registered address when it has no such
        listener, as in a log written before listeners were recorded)."""
        address = self.endpoints.get(listener)
        if address is None:
            return self.host, self.port
        host, _, port = address.rpartition(":")
        return host, int(port)


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRecord:
    """A broker removed from the cluster (UnregisterBroker): gone from the brokers until it registers again."""
    node_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class BrokerFenceRecord:
    """A broker fenced (missed heartbeats, or shut down) or unfenced (heartbeating and caught up again).

    `broker_epoch` is the registration it applies to: a fence of an older registration is ignored."""

    node_id: int
    broker_epoch: int
    fenced: bool


@dataclass(frozen=True, slots=True)
class TopicRecord:
    name: str
    topic_id: bytes
    configs: dict[str, str]


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    """A partition as created; later changes come as PartitionChangeRecord."""

    topic_id: bytes
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    """New leadership, ISR or replica set of a partition; the epochs are the new values (never lower than
    before). `replicas` None keeps the replica set; a reassignment in progress (KIP-455) sets the merged
    replicas with `adding_replicas` and `removing_replicas`, and its completion the target with both empty."""

    topic_id: bytes
    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    topic_id: bytes


@dataclass(frozen=True, slots=True)
class TopicConfigRecord:
    topic_id: bytes
    configs: dict[str, str]


@dataclass(frozen=True, slots=True)
class ClientMetricsConfigRecord:
    """A client-metrics config resource's whole config set (KIP-714 subscription `name`); empty: it is gone."""

    name: str
    configs: dict[str, str]


@dataclass(frozen=True, slots=True)
class GroupConfigRecord:
    """A group config resource's whole config set (Kafka's ConfigRecord of resource type GROUP: the keys set for
    group id `group_id`, broker/config/catalogue.py's GROUP_CONFIGS); empty: the group has none set any more."""

    group_id: str
    configs: dict[str, str]


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    """A block of producer ids handed to a broker: ids below next_producer_id are taken, forever."""

    node_id: int
    next_producer_id: int


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord:
    """An ACL binding created (CreateAcls): broker/security/acl.py's `AclBinding.to_dict()`."""

    binding: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord:
    """An ACL binding deleted (DeleteAcls)."""

    binding: dict[str, Any]


@dataclass(frozen=True, slots=True)
class UserScramCredentialRecord:
    """A user's SCRAM credential set (AlterUserScramCredentials, KIP-554): never the password, only what the
    server side of SCRAM needs."""

    name: str
    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord:
    name: str
    mechanism: str


@dataclass(frozen=True, slots=True)
class ClientQuotaRecord:
    """One quota value of a client quota entity set or removed (AlterClientQuotas, KIP-546), as Kafka's: the
    entity maps each entity type ("user", "client-id", "ip") to a name, None for the type's default entity."""

    entity: dict[str, str | None]
    key: str
    value: float = 0.0
    remove: bool = False


RECORD_TYPES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        ClusterRecord,
        RegisterBrokerRecord,
        UnregisterBrokerRecord,
        BrokerFenceRecord,
        TopicRecord,
        PartitionRecord,
        PartitionChangeRecord,
        RemoveTopicRecord,
        TopicConfigRecord,
        ClientMetricsConfigRecord,
        GroupConfigRecord,
        ProducerIdsRecord,
        AccessControlEntryRecord,
        RemoveAccessControlEntryRecord,
        UserScramCredentialRecord,
        RemoveUserScramCredentialRecord,
        ClientQuotaRecord,
    )
}
_BYTES_FIELDS = {"topic_id", "incarnation_id", "salt", "stored_key", "server_key"}
_TUPLE_FIELDS = {"replicas", "isr", "adding_replicas", "removing_replicas"}


def to_json(record: Any) -> str:
    body: dict[str, Any] = {"type": type(record).__name__}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        body[f.name] = value.hex() if f.name in _BYTES_FIELDS else value
    return json.dumps(body, separators=(",", ":"))


def from_json(line: str) -> Any:
    body = json.loads(line)
    cls = RECORD_TYPES[body.pop("type")]
    for name in _BYTES_FIELDS & body.keys():
        body[name] = bytes.fromhex(body[name])
    for name in _TUPLE_FIELDS & body.keys():
        body[name] = None if body[name] is None else tuple(body[name])
    return cls(**body)
