"""`RemoteChannel`: a broker's `ControllerChannel` to a controller in another process (docs/cluster.md).

Two connections, so that a long-polling metadata fetch never delays a heartbeat (a Kafka connection answers
in request order): one pulls the metadata log, the other carries registration, heartbeats and writes. Both
reconnect with backoff; a broker keeps serving what it knows while the controller is away, and is fenced by
the controller if that lasts longer than its session.

With several controllers (`controller.address` a list: controllers sharing a ZooKeeper store), both
connections go to the one in use; a connection that fails, or an answer of NOT_CONTROLLER (a standby, or an
active controller that lost its election mid-request), moves them on to the next in the list, round and
round, until the active one answers. Every controller serves the same committed log, so the metadata fetch
resumes from the broker's own offset on the new one.

Rules:
- `fault.metadata.paused` stops the metadata fetch (heartbeats go on): the broker acts on what it knew.
- Records are applied in metadata-offset order, each exactly once; a gap or a bad batch drops the connection
  and the fetch resumes from the last applied offset.
- A write returns once its effect is visible in this broker's `MetadataCache` (the fetch loop applies the
  controller's commit within one long poll), so the handler that asked can answer from the cache. A write
  that meets a closed connection is sent again on a new one (`_write`): a controller restart is not an error.
- STALE_BROKER_EPOCH on a heartbeat (another process registered as this node) and a failure to apply a record
  (a bug: the broker's state would no longer follow the controller) are fatal: `on_fatal` is called with the
  reason (the broker exits; Kafka's does too).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from epoch_broker.broker.config import DYNAMIC_TOPIC_CONFIG, BrokerConfig
from epoch_broker.broker.controller.channel import OnRecords, Reassignment
from epoch_broker.broker.controller.config_control import ListChange, TopicConfigChange, current_text
from epoch_broker.broker.controller.controller import QuorumReplica, QuorumState
from epoch_broker.broker.controller.quota_control import QuotaAlteration
from epoch_broker.broker.controller.replication_control import NewTopic, PartitionChangeResult, TopicResult
from epoch_broker.broker.faults import CONTROLLER_PEER, NETWORK_PARTITION, BrokerFaults
from epoch_broker.broker.metadata import metadata_log
from epoch_broker.broker.metadata.client_quotas import quota_entity
from epoch_broker.broker.metadata.image import MetadataCache
from epoch_broker.broker.security import wire
from epoch_broker.broker.security.acl import AclBinding, AclBindingFilter
from epoch_broker.broker.security.listeners import client_security
from epoch_broker.client.aio import KafkaClient, Security
from epoch_broker.protocol.errors import ErrorCode, KafkaError
from epoch_broker.protocol.messages import (
    allocate_producer_ids,
    alter_client_quotas,
    alter_partition,
    alter_partition_reassignments,
    alter_user_scram_credentials,
    broker_heartbeat,
    broker_registration,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_topics,
    describe_cluster,
    describe_quorum,
    elect_leaders,
    fetch,
    incremental_alter_configs,
    list_partition_reassignments,
    unregister_broker,
)
from epoch_broker.protocol.schema import Api

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 60.0  # a broker started before its controller waits this long for it
RETRY_BACKOFF_S = 0.2
METADATA_MAX_WAIT_MS = 500
REQUEST_TIMEOUT_S = 15.0  # beyond any long poll (METADATA_MAX_WAIT_MS): the connection is dead
APPLY_TIMEOUT_S = 10.0
WRITE_RETRY_S = 10.0  # how long a write waits for an unreachable controller (a restart takes about a second)
FAULT_CHECK_S = 0.1  # how often a paused metadata fetch (fault.metadata.paused) looks at the flag again
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}  # Kafka's SecurityProtocol


class NotActiveController(ConnectionError):
    """The controller answered NOT_CONTROLLER: as a lost connection, the request goes to the next one."""


class _Controllers:
    """The controllers a broker may reach, and the one both links use now."""

    def __init__(self, addresses: str) -> None:
        self.addresses = [(host, int(port)) for host, _, port in
                          (address.strip().rpartition(":") for address in addresses.split(",") if address.strip())]
        self.current = 0

    def now(self) -> tuple[int, str, int]:
        return self.current, *self.addresses[self.current]

    def move_on(self, failed: int) -> None:
        """The controller at `failed` did not serve: try the next (unless the other link already moved)."""
        if self.current == failed:
            self.current = (failed + 1) % len(self.addresses)


def _first_error_code(message: Any) -> int | None:
    """The first error code along the first element of each nested array (where a refusal of the whole
    request shows: every error_code field of a NOT_CONTROLLER answer holds it)."""
    code = getattr(message, "error_code", None)
    if code is not None:
        return code
    for name in message._field_names:
        value = getattr(message, name)
        if isinstance(value, list) and value and hasattr(value[0], "_field_names"):
            return _first_error_code(value[0])
    return None


class _Link:
    """One lazily (re)connected, version-negotiated connection to the controller in use."""

    def __init__(self, controllers: _Controllers, client_id: str, faults: BrokerFaults, security: Security) -> None:
        self.controllers = controllers
        self.client_id = client_id
        self.security = security
        self.faults = faults
        self._client: KafkaClient | None = None
        self._index = -1  # which controller `_client` is connected to

    async def call(self, api: Api, body: Any, version: int | None = None, timeout_s: float = REQUEST_TIMEOUT_S
                   ) -> Any:
        """Send one request; on a connection failure the link is reset and ConnectionError raised."""
        if self.faults.cut_off(CONTROLLER_PEER):  # fault.network.partition: as a link that went down
            await self.close()
            await asyncio.sleep(RETRY_BACKOFF_S)
            raise ConnectionError(f"cut off from the controller ({NETWORK_PARTITION})")
        if delay := self.faults.delay_s(CONTROLLER_PEER):  # fault.network.delay: a slow link to the controller
            await asyncio.sleep(delay)
        index, host, port = self.controllers.now()
        if self._index != index:  # the other link moved on
            await self.close()
        try:
            # A controller that stopped answering without closing (paused, partitioned) must not hang us: the
            # kernel still accepts connections for a paused process, so the connection's set-up is timed too.
            response = await asyncio.wait_for(self._request(index, host, port, api, body, version), timeout_s)
        except (OSError, EOFError) as exc:  # TimeoutError is an OSError
            await self.close()
            self.controllers.move_on(index)
            raise ConnectionError(f"controller {host}:{port}: {exc}") from exc
        if _first_error_code(response) == ErrorCode.NOT_CONTROLLER:
            await self.close()
            self.controllers.move_on(index)
            raise NotActiveController(f"controller {host}:{port} is not the active controller")
        return response

    async def _request(self, index: int, host: str, port: int, api: Api, body: Any, version: int | None) -> Any:
        if self._client is None:
            client = KafkaClient(host, port, self.client_id, self.security)
            try:
                await client.open()
                await client.negotiate()
            except BaseException:
                await client.close()
                raise
            self._client, self._index = client, index
        return await self._client.request(api, self._client.version_for(api) if version is None else version, body)

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()


class RemoteChannel:
    def __init__(self, config: BrokerConfig, metadata: MetadataCache, faults: BrokerFaults,
                 on_fatal: Callable[[str], None]) -> None:
        self.controllers = _Controllers(config.controller_address)
        self.node_id = config.node_id
        self.config = config
        self.heartbeat_interval_s = config.broker_heartbeat_interval_ms / 1000
        self.session_timeout_s = config.broker_session_timeout_ms / 1000
        # How long a heartbeat, or a metadata fetch beyond its long poll, waits for its answer. With several
        # controllers, one that stopped answering (paused, cut off) is left in time to reach another within the
        # session; with one there is nowhere else to go, and a loaded controller is waited for.
        self.answer_timeout_s = (min(REQUEST_TIMEOUT_S, self.session_timeout_s / 3)
                                 if len(self.controllers.addresses) > 1 else REQUEST_TIMEOUT_S)
        self.metadata = metadata
        self.faults = faults
        self.on_fatal = on_fatal
        self.controller_id = -1
        security = client_security(config, (*config.controller_listener_names, "PLAINTEXT")[0],
                                   config.sasl_mechanism_controller_protocol)
        self._requests = _Link(self.controllers, f"broker-{config.node_id}", faults, security)
        self._fetches = _Link(self.controllers, f"broker-{config.node_id}-metadata", faults, security)
        self._on_records: OnRecords | None = None
        self._applied = asyncio.Event()  # set (and replaced) whenever records were applied
        self._high_watermark = 0  # the controller's end offset, as last seen
        self._broker_epoch = -1
        self._fetch_task: asyncio.Task | None = None
        self._heartbeat_task: asyncio.Task | None = None

    # -- the metadata log ---------------------------------------------------------------------------

    async def start(self, on_records: OnRecords) -> None:
        self._on_records = on_records
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONNECT_TIMEOUT_S
        while True:
            try:
                response = await self._requests.call(describe_cluster.API, describe_cluster.REQUEST.cls())
                break
            except ConnectionError as exc:
                if loop.time() > deadline:
                    raise ConnectionError(f"no controller after {CONNECT_TIMEOUT_S:.0f} s: {exc}") from exc
                log.info("waiting for the controller (%s)", exc)
                await asyncio.sleep(RETRY_BACKOFF_S * 5)
        self.controller_id = response.controller_id
        while True:  # catch up before the broker opens its logs: topic configs come from the metadata
            await self._fetch_once(max_wait_ms=0)
            if self.metadata.metadata_offset + 1 >= self._high_watermark:
                break
        log.info("caught up with the metadata log of controller %d at offset %d", self.controller_id,
                 self.metadata.metadata_offset)
        self._fetch_task = asyncio.create_task(self._fetch_loop())

    async def _fetch_loop(self) -> None:
        while True:
            if self.faults.metadata_paused:
                await asyncio.sleep(FAULT_CHECK_S)
                continue
            try:
                await self._fetch_once(METADATA_MAX_WAIT_MS)
            except (ConnectionError, KafkaError) as exc:
                log.warning("metadata fetch failed: %s; retrying", exc)
                await asyncio.sleep(RETRY_BACKOFF_S)
            except Exception:
                log.exception("applying metadata failed")
                self.on_fatal("applying metadata failed")
                return

    async def _fetch_once(self, max_wait_ms: int) -> None:
        offset = self.metadata.metadata_offset + 1
        request = fetch.REQUEST.cls(
            max_wait_ms=max_wait_ms, min_bytes=1, session_epoch=-1,
            topics=[fetch.REQUEST.FetchTopic(topic_id=metadata_log.METADATA_TOPIC_ID, partitions=[
                fetch.REQUEST.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 30)])])
        response = await self._fetches.call(fetch.API, request, timeout_s=max_wait_ms / 1000 + self.answer_timeout_s)
        if self.faults.metadata_paused:  # set while this fetch waited: its answer is not applied either
            return
        (answer,) = response.responses[0].partitions
        if answer.error_code != ErrorCode.NONE:
            raise KafkaError(f"metadata fetch from {offset}", ErrorCode(answer.error_code))
        self._high_watermark = answer.high_watermark
        if not answer.records:
            return
        fetched = metadata_log.decode(answer.records)
        if fetched[0][0] != offset:
            await self._fetches.close()
            raise KafkaError(f"metadata fetch from {offset} answered from {fetched[0][0]}",
                             ErrorCode.CORRUPT_MESSAGE)
        assert self._on_records is not None
        self._on_records([record for _, record in fetched])
        self._applied.set()
        self._applied = asyncio.Event()

    async def _until(self, applied: Callable[[], bool], what: str) -> None:
        """Wait until the fetch loop has applied what makes `applied()` true."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + APPLY_TIMEOUT_S
        while not applied():
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise KafkaError(f"{what}: not visible in the metadata after {APPLY_TIMEOUT_S:.0f} s",
                                 ErrorCode.REQUEST_TIMED_OUT)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._applied.wait(), remaining)

    async def _write(self, api: Api, body: Any, version: int | None = None) -> Any:
        """A request that changes metadata: a lost connection (the controller restarting) is retried on a new one
        for up to WRITE_RETRY_S, as clients retry NOT_CONTROLLER; then ConnectionError."""
        deadline = asyncio.get_running_loop().time() + WRITE_RETRY_S
        while True:
            try:
                return await self._requests.call(api, body, version)
            except ConnectionError as exc:
                if asyncio.get_running_loop().time() >= deadline:
                    raise
                log.info("%s to the controller failed (%s): retrying", api.name, exc)
                await asyncio.sleep(RETRY_BACKOFF_S)

    # -- registration and heartbeats ------------------------------------------------------------------

    def _listeners(self, host: str, port: int, endpoints: dict[str, str] | None) -> list[Any]:
        """The registration's listeners, the inter-broker one first (the controller records it as the address)."""
        inter_broker = self.config.inter_broker_listener
        listed = {inter_broker: f"{host}:{port}", **{k: v for k, v in (endpoints or {}).items() if k != inter_broker}}
        return [broker_registration.REQUEST.Listener(
            name=name, host=address.rpartition(":")[0], port=int(address.rpartition(":")[2]),
            security_protocol=SECURITY_PROTOCOL_IDS[self.config.security_protocol(name)])
            for name, address in listed.items()]

    async def register(self, node_id: int, incarnation_id: bytes, host: str, port: int,
                       rack: str | None, endpoints: dict[str, str] | None = None) -> int:
        request = broker_registration.REQUEST.cls(
            broker_id=node_id, cluster_id=self.metadata.cluster_id or "", incarnation_id=incarnation_id,
            listeners=self._listeners(host, port, endpoints),
            rack=rack)
        # another incarnation's session still alive (this node killed and started again within it, or a second
        # process with this node id): retry until it ends, or give up after two sessions
        deadline = asyncio.get_running_loop().time() + 2 * self.session_timeout_s
        while True:
            response = await self._write(broker_registration.API, request)
            if (response.error_code != ErrorCode.DUPLICATE_BROKER_REGISTRATION
                    or asyncio.get_running_loop().time() > deadline):
                break
            log.warning("node %d is still registered by another process (DUPLICATE_BROKER_REGISTRATION); "
                        "retrying until its session ends", node_id)
            await asyncio.sleep(self.heartbeat_interval_s)
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(f"registration of node {node_id} refused", ErrorCode(response.error_code))
        epoch = response.broker_epoch
        registered = self.metadata.brokers

        await self._until(lambda: node_id in registered and registered[node_id].broker_epoch == epoch,
                          f"registration of node {node_id}")
        self._broker_epoch = epoch
        self._heartbeat_task = asyncio.create_task(self._heartbeat_loop())
        return epoch

    async def _heartbeat(self, want_shut_down: bool = False) -> Any:
        return await self._requests.call(broker_heartbeat.API, broker_heartbeat.REQUEST.cls(
            broker_id=self.node_id, broker_epoch=self._broker_epoch,
            current_metadata_offset=self.metadata.metadata_offset, want_fence=False,
            want_shut_down=want_shut_down), timeout_s=self.answer_timeout_s)

    async def _heartbeat_loop(self) -> None:
        fenced = False
        # with several controllers a failed heartbeat is tried at once on the next (the active one may be there)
        retry_s = RETRY_BACKOFF_S if len(self.controllers.addresses) > 1 else self.heartbeat_interval_s
        delay_s = self.heartbeat_interval_s
        while True:
            await asyncio.sleep(delay_s)
            try:
                response = await self._heartbeat()
            except ConnectionError as exc:
                log.warning("heartbeat failed: %s", exc)
                delay_s = retry_s
                continue
            delay_s = self.heartbeat_interval_s
            if response.error_code == ErrorCode.STALE_BROKER_EPOCH:
                self.on_fatal("the controller answered STALE_BROKER_EPOCH: another process registered as this node")
                return
            if response.is_fenced != fenced:
                fenced = response.is_fenced
                log.warning("node %d is %s by the controller", self.node_id, "fenced" if fenced else "unfenced")

    async def shut_down(self, node_id: int, broker_epoch: int) -> None:
        if self._heartbeat_task is not None:  # the metadata fetch goes on: it brings the leadership moves
            self._heartbeat_task.cancel()
        response = await self._heartbeat(want_shut_down=True)
        if response.error_code != ErrorCode.NONE:
            raise KafkaError("controlled shutdown refused", ErrorCode(response.error_code))
        await self._until(lambda: node_id in self.metadata.fenced_brokers, f"controlled shutdown of {node_id}")

    # -- writes -------------------------------------------------------------------------------------

    async def create_topics(self, topics: list[NewTopic], validate_only: bool) -> list[TopicResult]:
        Topic, Assignment, Config = (create_topics.REQUEST.CreatableTopic,
                                     create_topics.REQUEST.CreatableReplicaAssignment,
                                     create_topics.REQUEST.CreatableTopicConfig)
        request = create_topics.REQUEST.cls(validate_only=validate_only, topics=[
            Topic(name=t.name, num_partitions=t.num_partitions, replication_factor=t.replication_factor,
                  assignments=[Assignment(partition_index=p, broker_ids=r) for p, r in t.assignments.items()],
                  configs=[Config(name=k, value=v) for k, v in t.configs.items()])
            for t in topics])
        response = await self._write(create_topics.API, request)
        results = [
            TopicResult(r.name, ErrorCode(r.error_code), r.error_message, r.topic_id, r.num_partitions,
                        r.replication_factor,
                        {c.name: c.value for c in r.configs or () if c.config_source == DYNAMIC_TOPIC_CONFIG})
            for r in response.topics]
        created = [r.name for r in results if r.error_code == ErrorCode.NONE and not validate_only]
        await self._until(lambda: all(n in self.metadata.topics_by_name for n in created), "topic creation")
        return results

    async def delete_topics(self, topics: list[tuple[str | None, bytes | None]]
                            ) -> list[tuple[str | None, bytes, ErrorCode]]:
        Topic = delete_topics.REQUEST.DeleteTopicState
        request = delete_topics.REQUEST.cls(topics=[Topic(name=n, topic_id=i or bytes(16)) for n, i in topics],
                                            topic_names=[n for n, _ in topics if n is not None])
        response = await self._write(delete_topics.API, request)
        results = [(r.name, r.topic_id, ErrorCode(r.error_code)) for r in response.responses]
        deleted = [i for _, i, e in results if e == ErrorCode.NONE]
        await self._until(lambda: not any(i in self.metadata.topics_by_id for i in deleted), "topic deletion")
        return results

    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                                validate_only: bool) -> tuple[ErrorCode, str | None]:
        Topic, Assignment = create_partitions.REQUEST.CreatePartitionsTopic, (
            create_partitions.REQUEST.CreatePartitionsAssignment)
        request = create_partitions.REQUEST.cls(validate_only=validate_only, topics=[Topic(
            name=name, count=count,
            assignments=None if assignments is None else [Assignment(broker_ids=a) for a in assignments])])
        (result,) = (await self._write(create_partitions.API, request)).results
        error = ErrorCode(result.error_code)
        if error == ErrorCode.NONE and not validate_only:
            topics = self.metadata.topics_by_name
            await self._until(lambda: name in topics and len(topics[name].partitions) >= count, "new partitions")
        return error, result.error_message

    async def alter_topic_configs(self, name: str, changes: Mapping[str, TopicConfigChange],
                                  validate_only: bool) -> tuple[ErrorCode, str | None]:
        request = _alter_configs_request(incremental_alter_configs.TOPIC_RESOURCE, name, changes, validate_only)
        (result,) = (await self._write(incremental_alter_configs.API, request)).responses
        error = ErrorCode(result.error_code)
        if error == ErrorCode.NONE and not validate_only:
            topics = self.metadata.topics_by_name

            def applied() -> bool:
                configs = topics[name].configs if name in topics else {}
                return all(_holds(self.config, configs, key, change) for key, change in changes.items())

            await self._until(applied, f"the configs of topic {name}")
        return error, result.error_message

    async def alter_client_metrics_configs(self, name: str, changes: Mapping[str, TopicConfigChange],
                                           validate_only: bool) -> tuple[ErrorCode, str | None]:
        request = _alter_configs_request(incremental_alter_configs.CLIENT_METRICS_RESOURCE, name, changes,
                                         validate_only)
        (result,) = (await self._write(incremental_alter_configs.API, request)).responses
        error = ErrorCode(result.error_code)
        if error == ErrorCode.NONE and not validate_only:
            subscriptions = self.metadata.client_metrics

            def applied() -> bool:
                configs = subscriptions.get(name, {})
                return all(_holds_items(configs.get(key, ""), change) if isinstance(change, ListChange)
                           else configs.get(key) == change for key, change in changes.items())

            await self._until(applied, f"the configs of client metrics {name}")
        return error, result.error_message

    async def alter_group_configs(self, group_id: str, changes: Mapping[str, TopicConfigChange],
                                  validate_only: bool) -> tuple[ErrorCode, str | None]:
        request = _alter_configs_request(incremental_alter_configs.GROUP_RESOURCE, group_id, changes, validate_only)
        (result,) = (await self._write(incremental_alter_configs.API, request)).responses
        error = ErrorCode(result.error_code)
        if error == ErrorCode.NONE and not validate_only:
            groups = self.metadata.group_configs
            # group keys are never lists: the controller refuses APPEND and SUBTRACT
            await self._until(lambda: all(groups.get(group_id, {}).get(key) == change
                                          for key, change in changes.items()), f"the configs of group {group_id}")
        return error, result.error_message

    async def create_acls(self, bindings: list[AclBinding]) -> list[tuple[ErrorCode, str | None]]:
        response = await self._write(create_acls.API, create_acls.REQUEST.cls(
            creations=[wire.creation_of(binding) for binding in bindings]))
        results = [(ErrorCode(r.error_code), r.error_message) for r in response.results]
        created = [binding for binding, (error, _) in zip(bindings, results, strict=True) if error == ErrorCode.NONE]
        await self._until(lambda: all(binding in self.metadata.acls for binding in created), "the created ACLs")
        return results

    async def delete_acls(self, filters: list[AclBindingFilter]
                          ) -> list[tuple[ErrorCode, str | None, list[AclBinding]]]:
        response = await self._write(delete_acls.API, delete_acls.REQUEST.cls(
            filters=[wire.filter_to_wire(binding_filter) for binding_filter in filters]))
        results = [(ErrorCode(r.error_code), r.error_message,
                    [wire.binding_from_matching_acl(m) for m in r.matching_acls]) for r in response.filter_results]
        deleted = [binding for _, _, matched in results for binding in matched]
        await self._until(lambda: not any(binding in self.metadata.acls for binding in deleted), "the deleted ACLs")
        return results

    async def alter_scram_credentials(self, request: Any) -> dict[str, tuple[ErrorCode, str | None]]:
        response = await self._write(alter_user_scram_credentials.API, request)
        results = {r.user: (ErrorCode(r.error_code), r.error_message) for r in response.results}
        store = self.metadata.credentials

        def applied() -> bool:
            for deletion in request.deletions:
                mechanism = wire.SCRAM_MECHANISM_NAMES.get(deletion.mechanism, "")
                if results[deletion.name][0] == ErrorCode.NONE and store.scram(deletion.name, mechanism) is not None:
                    return False
            for upsertion in request.upsertions:
                if results[upsertion.name][0] == ErrorCode.NONE:
                    held = store.scram(upsertion.name, wire.SCRAM_MECHANISM_NAMES[upsertion.mechanism])
                    if held is None or held.salt != upsertion.salt:
                        return False
            return True

        await self._until(applied, "the altered SCRAM credentials")
        return results

    async def alter_client_quotas(self, alterations: list[QuotaAlteration], validate_only: bool
                                  ) -> list[tuple[QuotaAlteration, ErrorCode, str | None]]:
        messages = alter_client_quotas.REQUEST
        response = await self._write(alter_client_quotas.API, messages.cls(validate_only=validate_only, entries=[
            messages.EntryData(entity=[messages.EntityData(entity_type=t, entity_name=n) for t, n in a.entity],
                               ops=[messages.OpData(key=k, value=v or 0.0, remove=v is None) for k, v in a.ops])
            for a in alterations]))
        by_entity = {quota_entity(dict(a.entity)): a for a in reversed(alterations)}  # each entity's first
        results = [(by_entity[quota_entity({e.entity_type: e.entity_name for e in r.entity})],
                    ErrorCode(r.error_code), r.error_message) for r in response.entries]
        quotas = self.metadata.client_quotas

        def applied() -> bool:
            for alteration, error, _ in results:
                held = quotas.get(quota_entity(dict(alteration.entity)), {})
                if error == ErrorCode.NONE and any(held.get(k) != v for k, v in alteration.ops):
                    return False
            return True

        if not validate_only:
            await self._until(applied, "the altered client quotas")
        return results

    async def allocate_producer_ids(self, node_id: int, broker_epoch: int) -> tuple[int, int]:
        response = await self._write(allocate_producer_ids.API, allocate_producer_ids.REQUEST.cls(
            broker_id=node_id, broker_epoch=broker_epoch))
        if response.error_code != ErrorCode.NONE:
            raise KafkaError("producer ids refused", ErrorCode(response.error_code))
        return response.producer_id_start, response.producer_id_len

    async def alter_partition(self, node_id: int, broker_epoch: int, topic_id: bytes, partition: int,
                              leader_epoch: int, partition_epoch: int, new_isr: tuple[int, ...]
                              ) -> PartitionChangeResult:
        request = alter_partition.REQUEST
        body = request.cls(broker_id=node_id, broker_epoch=broker_epoch, topics=[request.TopicData(
            topic_id=topic_id, partitions=[request.PartitionData(
                partition_index=partition, leader_epoch=leader_epoch, partition_epoch=partition_epoch,
                new_isr_with_epochs=[request.BrokerState(broker_id=b) for b in new_isr])])])
        response = await self._write(alter_partition.API, body, version=3)
        if response.error_code != ErrorCode.NONE:
            return PartitionChangeResult(ErrorCode(response.error_code))
        (answer,) = response.topics[0].partitions
        result = PartitionChangeResult(ErrorCode(answer.error_code), answer.leader_id, answer.leader_epoch,
                                       answer.partition_epoch, tuple(answer.isr))
        if result.error == ErrorCode.NONE:
            state = self.metadata.topics_by_id.get(topic_id)
            await self._until(lambda: state is None or state.partitions[partition].partition_epoch
                              >= result.partition_epoch, "ISR change")
        return result

    async def elect_leaders(self, partitions: list[tuple[str, int]] | None, unclean: bool, target_leader: int
                            ) -> list[tuple[str, int, ErrorCode, str | None]]:
        Topic = elect_leaders.REQUEST.TopicPartitions
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions or ():
            by_topic.setdefault(topic, []).append(partition)
        request = elect_leaders.REQUEST.cls(
            election_type=1 if unclean else 0, target_leader=target_leader,
            topic_partitions=None if partitions is None else [Topic(topic=t, partitions=p)
                                                              for t, p in by_topic.items()])
        response = await self._write(elect_leaders.API, request, version=2)
        return [(r.topic, p.partition_id, ErrorCode(p.error_code), p.error_message)
                for r in response.replica_election_results for p in r.partition_result]

    async def alter_partition_reassignments(self, wanted: list[tuple[str, int, tuple[int, ...] | None]],
                                            allow_replication_factor_change: bool = True
                                            ) -> list[tuple[str, int, ErrorCode, str | None]]:
        R = alter_partition_reassignments.REQUEST
        by_topic: dict[str, list[Any]] = {}
        for topic, partition, replicas in wanted:
            by_topic.setdefault(topic, []).append(R.ReassignablePartition(
                partition_index=partition, replicas=None if replicas is None else list(replicas)))
        response = await self._write(alter_partition_reassignments.API, R.cls(
            allow_replication_factor_change=allow_replication_factor_change,
            topics=[R.ReassignableTopic(name=name, partitions=parts) for name, parts in by_topic.items()]))
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(response.error_message or "", ErrorCode(response.error_code))
        return [(topic.name, p.partition_index, ErrorCode(p.error_code), p.error_message)
                for topic in response.responses for p in topic.partitions]

    async def describe_quorum(self) -> QuorumState:
        R = describe_quorum.REQUEST
        response = await self._requests.call(describe_quorum.API, R.cls(topics=[R.TopicData(
            topic_name=metadata_log.METADATA_TOPIC, partitions=[R.PartitionData(partition_index=0)])]))
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(response.error_message or "", ErrorCode(response.error_code))
        (partition,) = response.topics[0].partitions
        if partition.error_code != ErrorCode.NONE:
            raise KafkaError(partition.error_message or "", ErrorCode(partition.error_code))
        return QuorumState(partition.leader_id, partition.leader_epoch, partition.high_watermark,
                           [_quorum_replica(v) for v in partition.current_voters],
                           [_quorum_replica(o) for o in partition.observers],
                           [(n.node_id, [(e.name, e.host, e.port) for e in n.listeners]) for n in response.nodes])

    async def list_partition_reassignments(self, wanted: list[tuple[str, int]] | None) -> list[Reassignment]:
        R = list_partition_reassignments.REQUEST
        by_topic: dict[str, list[int]] = {}
        for topic, partition in wanted or ():
            by_topic.setdefault(topic, []).append(partition)
        response = await self._requests.call(list_partition_reassignments.API, R.cls(
            topics=None if wanted is None else [R.ListPartitionReassignmentsTopics(name=n, partition_indexes=p)
                                                for n, p in by_topic.items()]))
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(response.error_message or "", ErrorCode(response.error_code))
        return [(topic.name, p.partition_index, tuple(p.replicas), tuple(p.adding_replicas),
                 tuple(p.removing_replicas)) for topic in response.topics for p in topic.partitions]

    async def unregister_broker(self, node_id: int) -> tuple[ErrorCode, str | None]:
        response = await self._write(unregister_broker.API, unregister_broker.REQUEST.cls(broker_id=node_id))
        if response.error_code == ErrorCode.NONE:
            await self._until(lambda: node_id not in self.metadata.brokers, f"unregistration of {node_id}")
        return ErrorCode(response.error_code), response.error_message

    async def close(self) -> None:
        tasks = [t for t in (self._fetch_task, self._heartbeat_task) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._requests.close()
        await self._fetches.close()


def _alter_configs_request(resource_type: int, name: str, changes: Mapping[str, TopicConfigChange],
                           validate_only: bool) -> Any:
    """IncrementalAlterConfigs of one resource, for the controller."""
    messages = incremental_alter_configs
    Resource, Config = messages.REQUEST.AlterConfigsResource, messages.REQUEST.AlterableConfig
    return messages.REQUEST.cls(validate_only=validate_only, resources=[Resource(
        resource_type=resource_type, resource_name=name,
        configs=[Config(name=key, config_operation=_operation(change), value=_value(change))
                 for key, change in changes.items()])])


def _operation(change: TopicConfigChange) -> int:
    messages = incremental_alter_configs
    if isinstance(change, ListChange):
        return messages.APPEND if change.append else messages.SUBTRACT
    return messages.DELETE if change is None else messages.SET


def _value(change: TopicConfigChange) -> str | None:
    return ",".join(change.items) if isinstance(change, ListChange) else change


def _holds(config: BrokerConfig, overrides: Mapping[str, str], key: str, change: TopicConfigChange) -> bool:
    """Whether a topic's configs show `change` made (an APPEND's items all there, a SUBTRACT's all gone)."""
    if not isinstance(change, ListChange):
        return overrides.get(key) == change
    return _holds_items(current_text(config, overrides, key), change)


def _holds_items(current: str, change: ListChange) -> bool:
    """Whether the list `current` shows `change` made."""
    items = set(current.split(","))
    return all((item in items) == change.append for item in change.items)


def _quorum_replica(state: Any) -> QuorumReplica:
    return QuorumReplica(state.replica_id, state.log_end_offset, state.last_fetch_timestamp,
                         state.last_caught_up_timestamp)
