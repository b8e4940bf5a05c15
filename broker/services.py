"""What a handler may reach: the services of the process it runs in, typed (Tansu's per-API services).

`RequestContext.services` is one of these. Handlers served by both process roles (topics, elections, cluster
description, ApiVersions, fault hooks) see `Services`; broker-only handlers `BrokerServices` (app.Broker);
controller-only handlers `ControllerServices` (controller/server.ControllerServer). Only names are imported
for typing: this module is a leaf, so every handler can import it without a cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from epoch_broker.broker.client_metrics import ClientMetricsManager
    from epoch_broker.broker.config import BrokerConfig
    from epoch_broker.broker.controller.channel import ControllerChannel
    from epoch_broker.broker.controller.controller import Controller
    from epoch_broker.broker.faults import BrokerFaults
    from epoch_broker.broker.groups.coordinator import GroupCoordinator
    from epoch_broker.broker.metadata.image import MetadataCache
    from epoch_broker.broker.metrics import ProcessMetrics
    from epoch_broker.broker.replica.replica_manager import ReplicaManager
    from epoch_broker.broker.transactions.coordinator import TransactionCoordinator
    from epoch_broker.storage.log_manager import LogManager


class Services(Protocol):
    """What every process offers its handlers."""

    config: BrokerConfig
    node_id: int
    metadata: MetadataCache
    faults: BrokerFaults
    metrics: ProcessMetrics | None  # None unless `metrics.listener` is set

    @property
    def cluster_id(self) -> str: ...

    @property
    def channel(self) -> ControllerChannel:
        """Topic changes, elections, producer ids: the controller, in this process or over the wire."""


class BrokerServices(Services, Protocol):
    client_metrics: ClientMetricsManager  # KIP-714: subscriptions evaluated, pushes checked and kept

    @property
    def replica_manager(self) -> ReplicaManager: ...

    @property
    def log_manager(self) -> LogManager: ...

    @property
    def group_coordinator(self) -> GroupCoordinator | None:
        """Made on first use (it creates `__consumer_offsets`)."""

    @property
    def group_coordinator_if_started(self) -> GroupCoordinator | None:
        """The group coordinator if a group API or the start made it (looking does not create it)."""

    @property
    def transaction_coordinator(self) -> TransactionCoordinator:
        """Made on first use (it creates `__transaction_state` when first asked for a coordinator)."""

    async def next_producer_id(self) -> int: ...


class ControllerServices(Services, Protocol):
    controller: Controller

    @property
    def acting(self) -> bool:
        """Whether this controller decides now (a standby of a ZooKeeper quorum does not)."""

    async def until_committed(self) -> bool:
        """Wait until the records decided so far are durable; False if leadership was lost first."""

    def note_heartbeat_connection(self, peer: str, node_id: int) -> None: ...

    async def wait_for_records(self, offset: int, timeout_s: float) -> None: ...


def group_coordinator(services: BrokerServices) -> GroupCoordinator:
    """`services.group_coordinator` for the group APIs' handlers (made on first use, as there). None only in a build
    without broker/groups: the request fails, logged and its connection closed, as calling a method of None did."""
    coordinator = services.group_coordinator
    if coordinator is None:
        raise RuntimeError("no group coordinator in this build: group APIs are not served")
    return coordinator
