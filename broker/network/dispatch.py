"""Handler registry and request dispatch: frames in, response parts out.

Rules:
- A handler module in `broker/handlers/` registers itself with `@handles(api, "lo-hi")`, the version range
  it really serves, next to its code. ApiVersions is derived from this registry, so the broker never
  advertises an API or version that has no handler (librdkafka and kafka-python use whatever is
  advertised).
- A broker claiming a Kafka release (`kafka.version`, protocol/releases.py) serves only that release's APIs, each
  at the versions both the release and its handler have (`served_by`): ApiVersions lists them and the connection
  refuses the rest as that release would. An API registered `release_only` (the ZooKeeper-era broker-to-broker
  APIs) is served only to a release that lists it. A controller process always serves its own ranges: the
  release is what clients see of the brokers.
- A handler gets the decoded request and a `RequestContext` and returns the response object, or None when no
  response is due (Produce with acks=0). It may be a coroutine function when it has to wait (long-poll
  Fetch, acks=all, group joins); state is mutated on the event loop between awaits.
- `Dispatcher.handle_frame` turns one request frame into the response parts (bytes and, for Fetch, file
  slices sent with sendfile). The per-connection request rules (unknown key or version, malformed input,
  ApiVersions answered in v0) are protocol/connection.py's; a violation raises `CloseConnection`. A handler
  that meets a KafkaError from below (the controller refusing, a storage error) or an unreachable controller
  (ConnectionError) gets an answer with that code (REQUEST_TIMED_OUT for the latter) in every error field.
- The SASL gate is protocol/connection.py's: a request it does not take before authentication is answered
  ILLEGAL_SASL_STATE here and the connection closed after the answer; the handlers see the connection's
  principal and listener in the context.
- A request from a peer behind `fault.network.partition` (a broker's replica fetcher, or a client by client.id)
  closes its connection here, before anything else: to that peer the link is down. One from a peer with a
  `fault.network.delay` waits that long first.
- An API registered with `cluster_action` (what only brokers send: the controller's APIs) is answered
  CLUSTER_AUTHORIZATION_FAILED here, before its handler, to a principal the authorizer does not allow
  CLUSTER_ACTION on the cluster.
- Request fault rules (broker/faults.py, `fault.request.<api>`) are applied here, before the handler: answer
  an error, delay, or drop the connection, per API key, without any test-only branch in the handlers.
- In a controller process, every API but the connection's own (CONNECTION_APIS) is answered NOT_CONTROLLER
  unless the process is acting (`ControllerServices.acting`: a standby of a ZooKeeper quorum is not), and its
  answer waits until the records decided so far are committed (`until_committed`): NOT_CONTROLLER instead if
  leadership was lost meanwhile (the decision was reverted).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import pkgutil
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar, cast

from epoch_broker.broker.faults import NETWORK_PARTITION, peer_of
from epoch_broker.broker.network.quotas import ClientQuotas
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import CLUSTER, authorized
from epoch_broker.broker.services import ControllerServices, Services
from epoch_broker.protocol.connection import ANONYMOUS, NotAuthenticated, ProtocolViolation, ServerConnection
from epoch_broker.protocol.errors import ErrorCode, KafkaError
from epoch_broker.protocol.messages import api_versions, sasl_authenticate, sasl_handshake
from epoch_broker.protocol.releases import KafkaRelease
from epoch_broker.protocol.schema import Api, Field
from epoch_broker.protocol.versions import VersionRange

log = logging.getLogger(__name__)

Handler = Callable[["RequestContext[Any]", Any], Awaitable[Any] | Any]


@dataclass(frozen=True, slots=True)
class Registration:
    api: Api
    versions: VersionRange
    handler: Handler
    is_async: bool
    cluster_action: bool  # only brokers send it: CLUSTER_ACTION on the cluster, checked before the handler
    release_only: bool = False  # served only when the emulated release lists it


BROKER = "broker"
CONTROLLER = "controller"
# Per process role, API key -> handler: a controller-only process answers a different set of APIs (and its
# own Fetch, of the metadata log) than a broker.
REGISTRY: dict[str, dict[int, Registration]] = {BROKER: {}, CONTROLLER: {}}
HANDLER_PACKAGES = ("epoch_broker.broker.handlers", "epoch_broker.broker.controller.handlers")
# what any controller process answers, active or not: setting up the connection
CONNECTION_APIS = frozenset(api.key for api in (api_versions.API, sasl_handshake.API, sasl_authenticate.API))


def handles(api: Api, versions: str, roles: tuple[str, ...] = (BROKER,),
            cluster_action: bool = False, release_only: bool = False) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler for `api` at `versions` (within the declared range) in
    the processes of the given roles; `cluster_action`: an API only brokers send (the controller's), refused
    CLUSTER_AUTHORIZATION_FAILED to a principal without CLUSTER_ACTION on the cluster; `release_only`: served
    only when the emulated Kafka release has it."""
    served = VersionRange.parse(versions)
    if served.low not in api.versions or served.high not in api.versions:
        raise ValueError(f"{api.name}: versions {served} are outside the declared {api.versions}")

    def register(fn: Handler) -> Handler:
        for role in roles:
            if api.key in REGISTRY[role]:
                raise RuntimeError(f"two {role} handlers for {api.name}")
            REGISTRY[role][api.key] = Registration(api, served, fn, inspect.iscoroutinefunction(fn), cluster_action,
                                                   release_only)
        return fn

    return register


def load_handlers(role: str = BROKER) -> dict[int, Registration]:
    """Import every handler module (each registers itself) and return the registry of `role`."""
    for name in HANDLER_PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{name}.{info.name}")
    return REGISTRY[role]


def served_by(registry: Mapping[int, Registration], release: KafkaRelease | None) -> dict[int, Registration]:
    """What a process claiming `release` (None: none) serves of `registry`."""
    if release is None:
        return {key: r for key, r in registry.items() if not r.release_only}
    served = {}
    for key, registration in registry.items():
        if (claimed := release.api_versions.get(key)) is None:
            continue
        low, high = max(claimed[0], registration.versions.low), min(claimed[1], registration.versions.high)
        if low <= high:
            served[key] = replace(registration, versions=VersionRange(low, high))
    return served


S = TypeVar("S", bound=Services)


@dataclass(slots=True)
class RequestContext(Generic[S]):
    """What a handler knows about the request besides its body, and the services it may call
    (broker/services.py: `RequestContext[BrokerServices]` in a broker-only handler)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    services: S
    peer: str = ""
    # Set when the client negotiated a version we do not serve (answered by the ApiVersions handler, KIP-511).
    unsupported: bool = False
    role: str = BROKER  # the dispatcher's: which APIs this process serves
    listener: str = ""  # the name of the listener the request came in on
    principal: str = ANONYMOUS  # who sent it (SASL or the TLS client certificate)
    connection: ServerConnection | None = None  # its protocol state (the SASL handlers move it on)
    received_at: float = 0.0  # loop time of the read that completed the request's frame (at the latest)
    queue_s: float = 0.0  # from then until the handler ran
    remote_s: float = 0.0  # what the handler spent waiting on others (acks=all, a long poll): the metrics'

    def authorized(self, operation: AclOperation, resource_type: ResourceType = ResourceType.CLUSTER,
                   name: str = CLUSTER) -> bool:
        """Whether this request's principal may do `operation` on the resource (always, with no authorizer)."""
        return authorized(self.services.config, self.services.metadata.acls, self.principal, self.peer, operation,
                          resource_type, name)


class CloseConnection(Exception):
    """The request cannot be answered: the connection is closed, as Kafka does."""


def error_response(api: Api, request: Any, code: ErrorCode) -> Any:
    """A response to `request` with `code` in every error_code field, topics and partitions mirrored from
    the request (for the fault hooks)."""
    response = api.response.cls()
    _fill_error(response, api.response.fields, api.response.types, request, code)
    return response


_PARTITION_ID_FIELDS = ("partition", "index", "partition_index")
_TOPIC_ID_FIELDS = ("name", "topic", "topic_id")


def _fill_error(target: Any, fields: list[Field], types: dict[str, type], source: Any, code: ErrorCode) -> None:
    """Set every error_code of `target`; for each array of structs, one element per element of the first
    array of structs in `source` (the request), carrying its topic and partition identifiers."""
    source_items = _first_struct_array(source)
    for f in fields:
        if f.name == "error_code":
            target.error_code = code
        elif f.is_array and f.is_struct and source_items is not None:
            items = []
            for item in source_items:
                element = types[f.element_type]()
                for name in _TOPIC_ID_FIELDS:
                    if hasattr(item, name) and hasattr(element, name):
                        setattr(element, name, getattr(item, name))
                partition_id = next((getattr(item, n) for n in _PARTITION_ID_FIELDS if hasattr(item, n)), None)
                target_id = next((n for n in _PARTITION_ID_FIELDS if hasattr(element, n)), None)
                if isinstance(partition_id, int) and target_id is not None:
                    setattr(element, target_id, partition_id)
                _fill_error(element, f.fields or [], types, item, code)
                items.append(element)
            setattr(target, f.name, items)


def _first_struct_array(source: Any) -> list | None:
    if source is None or isinstance(source, int):
        return None
    for name in source._field_names:
        value = getattr(source, name)
        if isinstance(value, list) and value and not isinstance(value[0], int | str | bytes):
            return value
    return None


class Dispatcher:
    def __init__(self, services: Services, role: str = BROKER) -> None:
        self.services = services
        self.faults = services.faults  # the request rules of the process's fault catalogue
        self.role = role
        self.registry = served_by(load_handlers(role), services.config.kafka_version if role == BROKER else None)
        self.loop = asyncio.get_running_loop()  # kept: asking for it costs a getpid() syscall on Python 3.11
        # Requests wait for this until the process has registered and caught up with the metadata (a socket
        # bound early, so that its real port can be registered, must not serve the old epochs meanwhile).
        self.ready = asyncio.Event()
        self.ready.set()
        # client quotas (broker/network/quotas.py): a broker's clients only, from the quotas in its metadata
        self.quotas = ClientQuotas(lambda: services.metadata.client_quotas, self.loop.time) if role == BROKER else None

    async def handle_frame(self, frame: bytearray, peer: str, connection: ServerConnection,
                           listener: str = "", received_at: float | None = None) -> list | None:
        """Decode (by the connection's rules), run the handler, encode. Returns the framed response parts, or
        None when none is due. `received_at`: the loop time the frame was read by (now if not given)."""
        try:
            registration, request = connection.receive_request(frame)
        except ProtocolViolation as exc:
            raise CloseConnection(str(exc)) from exc
        except NotAuthenticated as exc:
            log.warning("closing %s: %s", peer, exc)
            return ServerConnection.encode_response(
                exc.request, error_response(exc.served.api, exc.request.body, ErrorCode.ILLEGAL_SASL_STATE))
        assert isinstance(registration, Registration)
        api = registration.api
        loop = self.loop
        context = RequestContext(api.key, request.api_version, request.correlation_id, request.client_id,
                                 self.services, peer, request.unsupported, self.role, listener,
                                 connection.principal, connection,
                                 loop.time() if received_at is None else received_at)
        if self.quotas is not None:
            self.quotas.bound_fetch(context, request.body)
        response = await self._answer(registration, request, context)
        parts = None if response is None else ServerConnection.encode_response(request, response)
        if self.quotas is not None and not registration.cluster_action and api.key not in CONNECTION_APIS:
            parts = self.quotas.throttle(context, request, response, len(frame), parts)
        if (metrics := self.services.metrics) is not None:
            metrics.record_request(api, request.api_version, response, loop.time() - context.received_at,
                                   context.queue_s, context.remote_s)
        return parts

    async def _answer(self, registration: Registration, request: Any, context: RequestContext) -> Any:
        """The response object (None when none is due): the checks before the handler, then the handler."""
        api = registration.api
        peer = context.peer
        if not self.ready.is_set():
            await self.ready.wait()
        body = request.body
        if self.faults.partitioned_from or self.faults.delays_s:
            if self.faults.cut_off(peer_of(request.client_id)):
                raise CloseConnection(f"fault hook {NETWORK_PARTITION}: {request.client_id} is cut off")
            if delay := self.faults.delay_s(peer_of(request.client_id)):
                await asyncio.sleep(delay)  # fault.network.delay: a slow link from that peer
        if registration.cluster_action and not context.authorized(AclOperation.CLUSTER_ACTION):
            log.warning("%s from %s (%s) refused: not a broker (CLUSTER_ACTION on the cluster)", api.name, peer,
                        context.principal)
            return error_response(api, body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        rule = self.faults.take_request_rule(api.key)
        if rule is not None:
            if rule.delay_s:
                await asyncio.sleep(rule.delay_s)
            if rule.drop_connection:
                raise CloseConnection(f"fault hook dropped {api.name}")
            if rule.error is not None:
                return error_response(api, body, rule.error)
        context.queue_s = self.loop.time() - context.received_at
        controller_decides = self.role == CONTROLLER and api.key not in CONNECTION_APIS
        controller = cast(ControllerServices, self.services)
        if controller_decides and not controller.acting:
            return error_response(api, body, ErrorCode.NOT_CONTROLLER)
        try:
            if registration.is_async:
                response = await registration.handler(context, body)
            else:
                response = registration.handler(context, body)
        except KafkaError as exc:  # a layer below refused (the controller, a log): answered, not dropped
            log.warning("%s from %s answered %s: %s", api.name, peer, exc.code.name, exc)
            response = error_response(api, body, exc.code)
        except ConnectionError as exc:  # the controller is unreachable: what Kafka answers a forward timeout
            log.warning("%s from %s answered REQUEST_TIMED_OUT: %s", api.name, peer, exc)
            response = error_response(api, body, ErrorCode.REQUEST_TIMED_OUT)
        if controller_decides and not await controller.until_committed():
            response = error_response(api, body, ErrorCode.NOT_CONTROLLER)  # its records were reverted
        return response
