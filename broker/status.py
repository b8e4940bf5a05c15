"""The process's HTTP listener (`metrics.listener`): `/metrics`, the status page `/`, and its data `/api/status`.

Rules:
- Served by aiohttp on the process's own event loop: a scrape or a status read runs between two requests'
  steps, so it reads the state the loop owns, consistent, without locks or a thread (broker/metrics.py).
- `/metrics` is the Prometheus text format 0.0.4 (`ProcessMetrics.exposition`). `/api/status` is JSON (its
  shape is documented in docs/observability.md and drawn by status_page.html, one file with no outside asset).
- A broker's status lists every broker and partition of its metadata; a partition with a replica here also
  gets what that replica holds (log start and end, high watermark, size, its leader-epoch-checkpoint), and the
  client instances pushing telemetry here (KIP-714) are listed. A controller-only process has no logs, no groups
  and no client instances: its partitions carry the metadata alone.
- Only GET and HEAD; anything else is aiohttp's 405. The listener binds before the process says it is ready;
  a port in use is a start-up error (exit 2), like a Kafka listener's.
- At most MAX_CONNECTIONS at once (a new one past it is closed at once), each closed after KEEPALIVE_S idle:
  a flood on this port cannot take the file descriptors the logs and Kafka clients need.
"""

from __future__ import annotations

import asyncio
import base64
import importlib.metadata
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from epoch_broker.broker.client_metrics import kafka_uuid_text
from epoch_broker.broker.config import BrokerConfig, StartupError, topic_config
from epoch_broker.broker.groups.consumer_group import ConsumerGroup
from epoch_broker.broker.groups.share_group import ShareGroup
from epoch_broker.broker.metrics import ProcessMetrics, consumer_lag

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from epoch_broker.broker.controller.controller import Controller
    from epoch_broker.broker.faults import BrokerFaults
    from epoch_broker.broker.metadata.image import MetadataCache
    from epoch_broker.broker.services import BrokerServices

log = logging.getLogger(__name__)

PAGE = Path(__file__).with_name("status_page.html")
MAX_CONNECTIONS = 32  # a few scrapers and browsers; the rest are refused
KEEPALIVE_S = 15.0
VERSION = importlib.metadata.version("epoch-broker")


class StatusServer:
    def __init__(self, metrics: ProcessMetrics, status: Callable[[], dict[str, Any]]) -> None:
        self.metrics = metrics
        self.status = status
        self.page = PAGE.read_bytes()
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._listening: asyncio.Server | None = None

    async def start(self, listener: str) -> str:
        """Listen on `listener` (http://host:port); returns the URL with the bound port."""
        host, _, port = listener.removeprefix("http://").rpartition(":")
        app = web.Application()
        app.router.add_get("/", self._page)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/api/status", self._status)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, keepalive_timeout=KEEPALIVE_S)
        await self._runner.setup()
        http = self._runner.server
        assert http is not None

        open_connections: set[_Counted] = set()

        def connection() -> asyncio.BaseProtocol:
            # counted when made, not when aiohttp registers it: a burst of accepts cannot slip past the cap
            return _Counted(http(), open_connections) if len(open_connections) < MAX_CONNECTIONS else _Refused()

        try:
            self._listening = await asyncio.get_running_loop().create_server(connection, host, int(port),
                                                                             reuse_address=True)
        except OSError as exc:
            await self.stop()
            raise StartupError(f"metrics.listener {listener}: {exc.strerror or exc}") from exc
        self.url = f"http://{host}:{self._listening.sockets[0].getsockname()[1]}"
        log.info("metrics on %s/metrics, status page on %s/", self.url, self.url)
        return self.url

    async def stop(self) -> None:
        if self._listening is not None:
            self._listening.close()
            self._listening = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _page(self, _request: web.Request) -> web.Response:
        return web.Response(body=self.page, content_type="text/html", charset="utf-8")

    async def _metrics(self, _request: web.Request) -> web.Response:
        # the text format every Prometheus reads (0.0.4), not 1.0.0, which only newer ones ask for
        return web.Response(body=self.metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4})

    async def _status(self, _request: web.Request) -> web.Response:
        return web.json_response(self.status())


class _Refused(asyncio.Protocol):
    """A connection past MAX_CONNECTIONS: closed as soon as it is made."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.close()


class _Counted(asyncio.Protocol):
    """aiohttp's protocol for one connection, in `open_connections` from its making to its loss."""

    def __init__(self, inner: asyncio.Protocol, open_connections: set[_Counted]) -> None:
        self.inner = inner
        self.open_connections = open_connections
        open_connections.add(self)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.open_connections.discard(self)
        self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


# -- /api/status ------------------------------------------------------------------------------------------


def broker_status(broker: BrokerServices, controller: Controller | None) -> dict[str, Any]:
    """The status of a broker process (with its embedded controller, if any)."""
    replicas = broker.replica_manager
    hosted = {(partition.topic, partition.index): partition for partition in replicas.partitions.values()}
    status = _common(broker.config, broker.metadata, controller, broker.faults)
    for topic in status["topics"]:
        for entry in topic["partitions"]:
            partition = hosted.get((topic["name"], entry["partition"]))
            if partition is None:
                continue
            partition_log = partition.log
            entry["local"] = {
                "role": "leader" if partition.is_leader else "follower",
                "log_start": partition_log.log_start_offset,
                "log_end": partition_log.log_end_offset,
                "high_watermark": partition_log.high_watermark,
                "size_bytes": partition_log.size,
                "epoch_history": [{"epoch": e.epoch, "start_offset": e.start_offset}
                                  for e in partition_log.epoch_cache.entries],
            }
    coordinator = broker.group_coordinator_if_started
    offsets: dict[str, list[dict[str, Any]]] = {}
    for group_id, topic_name, index, committed, lag in consumer_lag(broker):
        offsets.setdefault(group_id, []).append({"topic": topic_name, "partition": index, "committed": committed,
                                                 "lag": lag})
    epochs = {(group_id, key): committed.leader_epoch
              for group_id, key, committed in (coordinator.committed_offsets() if coordinator is not None else ())}
    status["share_partitions"] = [
        {"group_id": group_id, "topic": partition.topic, "partition": partition.index,
         "start_offset": share.start_offset, "end_offset": share.end_offset, "in_flight": share.in_flight_count,
         "acquired": share.acquired_count, "archived": share.archived_total}
        for partition in broker.replica_manager.partitions.values() if partition.is_leader
        for group_id, share in sorted(partition.share_partitions.items())]
    for group in coordinator.groups.values() if coordinator is not None else ():
        for entry in offsets.get(group.group_id, []):
            entry["leader_epoch"] = epochs[(group.group_id, (entry["topic"], entry["partition"]))]
        entry = {"group_id": group.group_id, "type": group.type, "state": group.state_name,
                 "members": group.num_members(), "offsets": offsets.get(group.group_id, [])}
        if isinstance(group, ConsumerGroup):
            assert coordinator is not None
            entry.update(_consumer_group(group, coordinator.consumer_group_config.assignors[0], broker.metadata))
        elif isinstance(group, ShareGroup):
            entry.update(_share_group(group, broker.metadata))
        else:
            entry["protocol"] = getattr(group, "protocol_name", None)  # a classic group's assignor
        status["groups"].append(entry)
    status["client_instances"] = [
        {"client_instance_id": kafka_uuid_text(instance.instance_id), "client_id": instance.client_id,
         "source": instance.source, "subscription_id": instance.subscription_id,
         "requested_metrics": instance.metrics, "push_interval_ms": instance.interval_ms,
         "pushes": instance.pushes, "metric_count": len(instance.points),
         "last_push_ms": None if instance.pushed_at_ms is None else int(instance.pushed_at_ms),
         "last_error": instance.last_error.name}
        for instance in broker.client_metrics.live_instances()]
    return status


def _partitions(assignment: Mapping[bytes, frozenset[int]], metadata: MetadataCache) -> list[dict[str, Any]]:
    named = []
    for topic_id, indexes in assignment.items():
        topic = metadata.topics_by_id.get(topic_id)
        # a deleted topic's id, still held until the member revokes it: shown as Kafka's text form
        name = topic.name if topic is not None else base64.urlsafe_b64encode(topic_id).decode().rstrip("=")
        named.append({"topic": name, "partitions": sorted(indexes)})
    return sorted(named, key=lambda t: t["topic"])


def _share_group(group: ShareGroup, metadata: MetadataCache) -> dict[str, Any]:
    """A share group's epochs and members (their share-partitions are in `share_partitions`, where led)."""
    members = [{"member_id": m.member_id, "client_id": m.subscription.client_id,
                "client_host": m.subscription.client_host, "member_epoch": m.member_epoch, "state": "stable",
                "subscribed_topic_names": list(m.subscription.subscribed_topic_names),
                "assigned": _partitions(m.assignment.assigned, metadata), "pending_revocation": [],
                "target": _partitions(group.target_of(m.member_id), metadata)}
               for m in sorted(group.members.values(), key=lambda m: m.member_id)]
    return {"protocol": "simple", "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
            "member_details": members}


def _consumer_group(group: ConsumerGroup, default_assignor: str, metadata: MetadataCache) -> dict[str, Any]:
    """A KIP-848 group's epochs and members, partitions by topic name (the group keeps topic ids)."""

    def partitions(assignment: Mapping[bytes, frozenset[int]]) -> list[dict[str, Any]]:
        return _partitions(assignment, metadata)

    members = []
    for member in sorted(group.members.values(), key=lambda m: m.member_id):
        subscription, assignment = member.subscription, member.assignment
        members.append({
            "member_id": member.member_id, "instance_id": subscription.instance_id,
            "client_id": subscription.client_id, "client_host": subscription.client_host,
            "member_epoch": assignment.member_epoch,
            "state": assignment.state.value.split("_")[0],  # stable, unrevoked, unreleased (or unknown)
            "subscribed_topic_names": list(subscription.subscribed_topic_names),
            "subscribed_topic_regex": subscription.subscribed_topic_regex,
            "assigned": partitions(assignment.assigned),
            "pending_revocation": partitions(assignment.pending_revocation),
            "target": partitions(group.target_of(member.member_id)),
        })
    return {"protocol": group.preferred_assignor(default_assignor), "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch, "member_details": members}


def controller_status(config: BrokerConfig, controller: Controller, faults: BrokerFaults) -> dict[str, Any]:
    """The status of a controller-only process: the metadata it commits, no logs."""
    return _common(config, controller.image, controller, faults)


def _common(config: BrokerConfig, metadata: MetadataCache, controller: Controller | None, faults: BrokerFaults
            ) -> dict[str, Any]:
    brokers = [{"id": broker_id, "host": record.host, "port": record.port,
                "fenced": broker_id in metadata.fenced_brokers, "epoch": record.broker_epoch}
               for broker_id, record in sorted(metadata.brokers.items())]
    topics = []
    for topic in metadata.topics_by_id.values():
        min_isr = topic_config(config, topic.configs)["min.insync.replicas"]
        partitions = []
        for index in sorted(topic.partitions):
            state = topic.partitions[index]
            partitions.append({
                "partition": index, "leader": state.leader, "leader_epoch": state.leader_epoch,
                "partition_epoch": state.partition_epoch, "replicas": list(state.replicas), "isr": list(state.isr),
                "under_replicated": len(state.isr) < len(state.replicas), "under_min_isr": len(state.isr) < min_isr,
                "offline": state.leader < 0, "local": None})
        topics.append({"name": topic.name, "topic_id": base64.urlsafe_b64encode(topic.topic_id).decode().rstrip("="),
                       "internal": topic.name.startswith("__"), "partitions": partitions})
    return {
        "node_id": config.node_id,
        "roles": sorted(config.process_roles),
        "cluster_id": metadata.cluster_id,
        "version": VERSION,
        "now_ms": int(time.time() * 1000),
        "controller": None if controller is None else {
            "active": controller.active, "controller_epoch": controller.controller_epoch,
            "metadata_offset": controller.committed_offset - 1,
            "fenced_brokers": len(controller.image.fenced_brokers)},
        "brokers": brokers,
        "topics": topics,
        "groups": [],
        "client_instances": [],  # KIP-714 telemetry: a broker's
        "faults": [{"key": key, "value": value} for key, value in sorted(faults.in_force().items())],
    }
