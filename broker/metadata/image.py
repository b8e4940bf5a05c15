"""The broker's view of cluster metadata, built by applying the controller's records in order.

The controller keeps one of these as its own state, and every broker keeps one to answer Metadata,
DescribeCluster and leader lookups: one `apply` for both, so they cannot disagree on what a record means.

Rules:
- Records arrive in log order; applying is deterministic and never fails for a record the controller wrote.
- Leader and partition epochs only move forward (KIP-232): a change with a lower epoch is ignored.
- `fenced_at` (local bookkeeping, not replicated state: when this process applied a broker's fencing) lets
  Metadata keep naming a just-fenced broker for a moment (`listed_brokers`, see its docstring).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from epoch_broker.broker.metadata.client_quotas import QuotaEntity, quota_entity
from epoch_broker.broker.metadata.records import (
    AccessControlEntryRecord,
    BrokerFenceRecord,
    ClientMetricsConfigRecord,
    ClientQuotaRecord,
    ClusterRecord,
    GroupConfigRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicConfigRecord,
    TopicRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from epoch_broker.broker.security.acl import AclBinding, Authorizer
from epoch_broker.broker.security.sasl import CredentialStore, ScramCredential


@dataclass(slots=True)
class PartitionState:
    topic_id: bytes
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding_replicas: tuple[int, ...] = ()  # a reassignment in progress (KIP-455): replicas still joining
    removing_replicas: tuple[int, ...] = ()  # ... and those that leave once the joining ones are in the ISR

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """Where a reassignment in progress leads (the replicas themselves when none is)."""
        return tuple(r for r in self.replicas if r not in self.removing_replicas)


@dataclass(slots=True)
class TopicState:
    name: str
    topic_id: bytes
    configs: dict[str, str]
    partitions: dict[int, PartitionState] = field(default_factory=dict)


class MetadataCache:
    def __init__(self) -> None:
        self.controller_id = -1
        self.acls = Authorizer()  # the ACL bindings; who is a super user is the process's config
        self.credentials = CredentialStore()  # SCRAM credentials (KIP-554), and the config's users at start
        self._reset()

    def _reset(self) -> None:
        """Every field the records set, empty."""
        self.cluster_id: str | None = None
        self.brokers: dict[int, RegisterBrokerRecord] = {}  # every registered broker, fenced or not
        self.fenced_brokers: set[int] = set()
        self.fenced_at: dict[int, float] = {}  # node id -> time.monotonic() when its fencing was applied here
        self.metadata_offset = -1  # offset of the last record applied (its index in the controller's store)
        self.topics_by_name: dict[str, TopicState] = {}
        self.topics_by_id: dict[bytes, TopicState] = {}
        self.next_producer_id = 0
        self.client_metrics: dict[str, dict[str, str]] = {}  # KIP-714 subscriptions: name -> its configs
        self.group_configs: dict[str, dict[str, str]] = {}  # group config resources: group id -> the keys set
        self.client_quotas: dict[QuotaEntity, dict[str, float]] = {}  # KIP-546: entity -> quota key -> value

    def rebuild(self, records: list[Any]) -> None:
        """This cache as if only `records` had been applied (a controller reverting what it could not commit). The
        ACL and credential objects stay the same ones, emptied and refilled: listeners and handlers hold them; the
        process adds its configured users again."""
        for binding in list(self.acls):
            self.acls.remove(binding)
        self.credentials.clear()
        self._reset()
        for record in records:
            self.apply(record)

    def apply(self, record: object) -> None:
        self.metadata_offset += 1
        match record:
            case PartitionChangeRecord():
                state = self.topics_by_id[record.topic_id].partitions[record.partition]
                if record.leader_epoch < state.leader_epoch or record.partition_epoch < state.partition_epoch:
                    return
                state.leader = record.leader
                state.leader_epoch = record.leader_epoch
                state.partition_epoch = record.partition_epoch
                state.isr = record.isr
                if record.replicas is not None:
                    state.replicas = record.replicas
                    state.adding_replicas, state.removing_replicas = record.adding_replicas, record.removing_replicas
            case PartitionRecord():
                self.topics_by_id[record.topic_id].partitions[record.partition] = PartitionState(
                    record.topic_id,
                    record.partition,
                    record.replicas,
                    record.isr,
                    record.leader,
                    record.leader_epoch,
                    record.partition_epoch,
                )
            case TopicRecord():
                topic = TopicState(record.name, record.topic_id, dict(record.configs))
                self.topics_by_name[record.name] = topic
                self.topics_by_id[record.topic_id] = topic
            case RemoveTopicRecord():
                topic = self.topics_by_id.pop(record.topic_id)
                del self.topics_by_name[topic.name]
            case TopicConfigRecord():
                self.topics_by_id[record.topic_id].configs = dict(record.configs)
            case ClientMetricsConfigRecord():
                if record.configs:
                    self.client_metrics[record.name] = dict(record.configs)
                else:
                    self.client_metrics.pop(record.name, None)
            case GroupConfigRecord():
                if record.configs:
                    self.group_configs[record.group_id] = dict(record.configs)
                else:
                    self.group_configs.pop(record.group_id, None)
            case RegisterBrokerRecord():
                self.brokers[record.node_id] = record
                self.fenced_brokers.discard(record.node_id)
                self.fenced_at.pop(record.node_id, None)
            case UnregisterBrokerRecord():
                registered = self.brokers.get(record.node_id)
                if registered is not None and registered.broker_epoch == record.broker_epoch:
                    del self.brokers[record.node_id]
                    self.fenced_brokers.discard(record.node_id)
                    self.fenced_at.pop(record.node_id, None)
            case BrokerFenceRecord():
                registered = self.brokers.get(record.node_id)
                if registered is not None and registered.broker_epoch == record.broker_epoch:
                    if record.fenced:
                        self.fenced_brokers.add(record.node_id)
                        self.fenced_at[record.node_id] = time.monotonic()
                    else:
                        self.fenced_brokers.discard(record.node_id)
                        self.fenced_at.pop(record.node_id, None)
            case ProducerIdsRecord():
                self.next_producer_id = max(self.next_producer_id, record.next_producer_id)
            case ClusterRecord():
                self.cluster_id = record.cluster_id
            case AccessControlEntryRecord():
                self.acls.add(AclBinding.from_dict(record.binding))
            case RemoveAccessControlEntryRecord():
                self.acls.remove(AclBinding.from_dict(record.binding))
            case UserScramCredentialRecord():
                self.credentials.set_scram(record.name, ScramCredential(
                    record.mechanism, record.salt, record.iterations, record.stored_key, record.server_key))
            case RemoveUserScramCredentialRecord():
                self.credentials.remove_scram(record.name, record.mechanism)
            case ClientQuotaRecord():
                entity = quota_entity(record.entity)
                if record.remove:
                    values = self.client_quotas.get(entity, {})
                    values.pop(record.key, None)
                    if not values:
                        self.client_quotas.pop(entity, None)  # an entity without values is gone, as Kafka's
                else:
                    self.client_quotas.setdefault(entity, {})[record.key] = record.value
            case _:
                raise TypeError(f"unknown metadata record {record!r}")

    @property
    def live_brokers(self) -> dict[int, RegisterBrokerRecord]:
        """Registered and not fenced: the brokers Metadata lists and elections pick from."""
        return {n: b for n, b in self.brokers.items() if n not in self.fenced_brokers}

    def node_endpoints(self, nodes: Iterable[int], listener: str, endpoint_class: Any) -> list[Any]:
        """The NodeEndpoint entries (node_id, host, port, rack) a response class takes for `nodes` that are
        registered, as clients of `listener` reach them: what Produce, Fetch, ShareFetch and ShareAcknowledge
        name beside a leader hint (KIP-951)."""
        wanted = set(nodes)
        return [endpoint_class(node_id=node_id, host=host, port=port, rack=b.rack)
                for node_id, b in self.brokers.items() if node_id in wanted for host, port in [b.endpoint(listener)]]

    def listed_brokers(self, linger_s: float) -> list[RegisterBrokerRecord]:
        """The brokers a Metadata answer names: the live ones, and those fenced here less than `linger_s` ago.

        Why the linger: librdkafka (2.10+) decommissions a broker missing from a Metadata answer; when the same
        answer also moves that broker's partitions to their new leaders (a killed leader is fenced and replaced in
        one step), the decommission drops the move (the partition is left without a leader) and the client waits
        for its 1 s topic scan to ask again: a failover took a second longer. Named a little longer, the broker
        goes away in a later answer, after the partitions moved. The answer's partitions already show the new
        leaders and list the fenced broker as an offline replica; only the address book keeps it a moment.
        """
        now = time.monotonic()
        return [b for n, b in self.brokers.items()
                if n not in self.fenced_brokers or now - self.fenced_at.get(n, now - linger_s) < linger_s]

    def partitions(self) -> Iterator[tuple[TopicState, PartitionState]]:
        """Every partition with its topic, topics in creation order, partitions by index."""
        for topic in self.topics_by_id.values():
            for index in sorted(topic.partitions):
                yield topic, topic.partitions[index]

    def group_config(self, group_id: str, key: str) -> str | None:
        """The value of group config `key` (e.g. `share.auto.offset.reset`) set for the group, as text; None when
        the group has not set it: its default applies (broker/config's `group_config_value`)."""
        configs = self.group_configs.get(group_id)
        return None if configs is None else configs.get(key)

    def partition(self, topic: str, index: int) -> PartitionState | None:
        state = self.topics_by_name.get(topic)
        return None if state is None else state.partitions.get(index)
