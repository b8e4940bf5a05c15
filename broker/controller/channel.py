"""How a broker reaches the controller: `ControllerChannel`, embedded (direct calls) or remote (the wire).

Rules:
- Every method is a coroutine, so the broker's code is the same whether the controller shares its process
  (`EmbeddedChannel`, the default `process.roles=broker,controller`) or runs elsewhere (`RemoteChannel`, in
  broker/controller/remote.py).
- A write (topics, partitions, ISR) returns only once this broker's `MetadataCache` has applied the records it
  produced, so a handler that creates a topic can answer Metadata for it right away.
- Metadata records reach the broker through the `on_records` callback given to `start`, in log order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from epoch_broker.broker.controller.config_control import TopicConfigChange
from epoch_broker.broker.controller.controller import Controller, QuorumState
from epoch_broker.broker.controller.quota_control import QuotaAlteration
from epoch_broker.broker.controller.replication_control import NewTopic, PartitionChangeResult, TopicResult
from epoch_broker.broker.security.acl import AclBinding, AclBindingFilter
from epoch_broker.broker.security.wire import scram_changes
from epoch_broker.protocol.errors import ErrorCode

OnRecords = Callable[[list[Any]], None]
# (topic, partition, replicas, adding replicas, removing replicas) of a reassignment in progress
Reassignment = tuple[str, int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]


class ControllerChannel(Protocol):
    async def start(self, on_records: OnRecords) -> None:
        """Deliver every metadata record so far to `on_records` (and later ones as they are committed)."""

    async def register(self, node_id: int, incarnation_id: bytes, host: str, port: int,
                       rack: str | None, endpoints: dict[str, str] | None = None) -> int:
        """Register this broker (`host`:`port` its inter-broker listener, `endpoints` every advertised listener,
        name -> "host:port"); returns its broker epoch once the registration's records were applied."""

    async def create_topics(self, topics: list[NewTopic], validate_only: bool) -> list[TopicResult]: ...

    async def delete_topics(self, topics: list[tuple[str | None, bytes | None]]
                            ) -> list[tuple[str | None, bytes, ErrorCode]]: ...

    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                                validate_only: bool) -> tuple[ErrorCode, str | None]: ...

    async def alter_topic_configs(self, name: str, changes: Mapping[str, TopicConfigChange],
                                  validate_only: bool) -> tuple[ErrorCode, str | None]:
        """Set (a value) or delete (None) topic configs; returns once this broker's metadata has the change."""

    async def alter_client_metrics_configs(self, name: str, changes: Mapping[str, TopicConfigChange],
                                           validate_only: bool) -> tuple[ErrorCode, str | None]:
        """The same for a client-metrics resource (KIP-714 subscription `name`)."""

    async def alter_group_configs(self, group_id: str, changes: Mapping[str, TopicConfigChange],
                                  validate_only: bool) -> tuple[ErrorCode, str | None]:
        """The same for a group config resource (the group id's configs)."""

    async def create_acls(self, bindings: list[AclBinding]) -> list[tuple[ErrorCode, str | None]]:
        """One result per binding; returns once this broker's metadata has the created ones."""

    async def delete_acls(self, filters: list[AclBindingFilter]
                          ) -> list[tuple[ErrorCode, str | None, list[AclBinding]]]:
        """One result per filter with the bindings it deleted; returns once this broker's metadata has lost them."""

    async def alter_scram_credentials(self, request: Any) -> dict[str, tuple[ErrorCode, str | None]]:
        """AlterUserScramCredentials: per user, NONE or why not; returns once this broker's metadata has them."""

    async def alter_client_quotas(self, alterations: list[QuotaAlteration], validate_only: bool
                                  ) -> list[tuple[QuotaAlteration, ErrorCode, str | None]]:
        """AlterClientQuotas: per distinct entity, NONE or why not; returns once this broker's metadata has them."""

    async def allocate_producer_ids(self, node_id: int, broker_epoch: int) -> tuple[int, int]:
        """(first id, count) of a block of never-used producer ids."""

    async def alter_partition(self, node_id: int, broker_epoch: int, topic_id: bytes, partition: int,
                              leader_epoch: int, partition_epoch: int, new_isr: tuple[int, ...]
                              ) -> PartitionChangeResult: ...

    async def elect_leaders(self, partitions: list[tuple[str, int]] | None, unclean: bool, target_leader: int
                            ) -> list[tuple[str, int, ErrorCode, str | None]]:
        """Force elections (None: every partition); (topic, partition, error, message) for each."""

    async def alter_partition_reassignments(self, wanted: list[tuple[str, int, tuple[int, ...] | None]],
                                            allow_replication_factor_change: bool = True
                                            ) -> list[tuple[str, int, ErrorCode, str | None]]:
        """Start (target replicas) or cancel (None) reassignments, changing the replication factor only if allowed;
        (topic, partition, error, message) each."""

    async def describe_quorum(self) -> QuorumState:
        """The metadata log's quorum, as the active controller sees it."""

    async def list_partition_reassignments(self, wanted: list[tuple[str, int]] | None) -> list[Reassignment]:
        """(topic, partition, replicas, adding, removing) of the reassignments in progress (None: all)."""

    async def unregister_broker(self, node_id: int) -> tuple[ErrorCode, str | None]: ...

    async def shut_down(self, node_id: int, broker_epoch: int) -> None:
        """Clean shutdown: the controller moves this broker's leaderships away before it stops."""

    async def close(self) -> None: ...


class EmbeddedChannel:
    """The controller in this process: calls go straight to it; its subscribers run before a call returns."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller

    async def start(self, on_records: OnRecords) -> None:
        on_records(list(self.controller.records))
        self.controller.subscribers.append(on_records)

    async def register(self, node_id: int, incarnation_id: bytes, host: str, port: int,
                       rack: str | None, endpoints: dict[str, str] | None = None) -> int:
        return self.controller.register_broker(node_id, incarnation_id, host, port, rack, endpoints)

    async def create_topics(self, topics: list[NewTopic], validate_only: bool) -> list[TopicResult]:
        return self.controller.create_topics(topics, validate_only)

    async def delete_topics(self, topics: list[tuple[str | None, bytes | None]]
                            ) -> list[tuple[str | None, bytes, ErrorCode]]:
        return self.controller.delete_topics(topics)

    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                                validate_only: bool) -> tuple[ErrorCode, str | None]:
        return self.controller.create_partitions(name, count, assignments, validate_only)

    async def alter_topic_configs(self, name: str, changes: Mapping[str, TopicConfigChange],
                                  validate_only: bool) -> tuple[ErrorCode, str | None]:
        return self.controller.alter_topic_configs(name, changes, validate_only)

    async def alter_client_metrics_configs(self, name: str, changes: Mapping[str, TopicConfigChange],
                                           validate_only: bool) -> tuple[ErrorCode, str | None]:
        return self.controller.alter_client_metrics_configs(name, changes, validate_only)

    async def alter_group_configs(self, group_id: str, changes: Mapping[str, TopicConfigChange],
                                  validate_only: bool) -> tuple[ErrorCode, str | None]:
        return self.controller.alter_group_configs(group_id, changes, validate_only)

    async def create_acls(self, bindings: list[AclBinding]) -> list[tuple[ErrorCode, str | None]]:
        return self.controller.create_acls(bindings)

    async def delete_acls(self, filters: list[AclBindingFilter]
                          ) -> list[tuple[ErrorCode, str | None, list[AclBinding]]]:
        return self.controller.delete_acls(filters)

    async def alter_scram_credentials(self, request: Any) -> dict[str, tuple[ErrorCode, str | None]]:
        return self.controller.alter_scram_credentials(*scram_changes(request))

    async def alter_client_quotas(self, alterations: list[QuotaAlteration], validate_only: bool
                                  ) -> list[tuple[QuotaAlteration, ErrorCode, str | None]]:
        return self.controller.alter_client_quotas(alterations, validate_only)

    async def allocate_producer_ids(self, node_id: int, broker_epoch: int) -> tuple[int, int]:
        return self.controller.allocate_producer_ids(node_id)

    async def alter_partition(self, node_id: int, broker_epoch: int, topic_id: bytes, partition: int,
                              leader_epoch: int, partition_epoch: int, new_isr: tuple[int, ...]
                              ) -> PartitionChangeResult:
        return self.controller.alter_partition(node_id, broker_epoch, topic_id, partition, leader_epoch,
                                               partition_epoch, new_isr)

    async def elect_leaders(self, partitions: list[tuple[str, int]] | None, unclean: bool, target_leader: int
                            ) -> list[tuple[str, int, ErrorCode, str | None]]:
        return self.controller.elect_leaders(partitions, unclean, target_leader)

    async def alter_partition_reassignments(self, wanted: list[tuple[str, int, tuple[int, ...] | None]],
                                            allow_replication_factor_change: bool = True
                                            ) -> list[tuple[str, int, ErrorCode, str | None]]:
        return self.controller.alter_partition_reassignments(wanted, allow_replication_factor_change)

    async def describe_quorum(self) -> QuorumState:
        return self.controller.describe_quorum()

    async def list_partition_reassignments(self, wanted: list[tuple[str, int]] | None) -> list[Reassignment]:
        return self.controller.list_partition_reassignments(wanted)

    async def unregister_broker(self, node_id: int) -> tuple[ErrorCode, str | None]:
        return self.controller.unregister_broker(node_id)

    async def shut_down(self, node_id: int, broker_epoch: int) -> None:
        """Nothing to do: the controller stops with this broker, and a restart re-registers it (KIP-101's
        epoch bump) rather than electing another replica, since nothing could have led meanwhile."""

    async def close(self) -> None:
        self.controller.close()
