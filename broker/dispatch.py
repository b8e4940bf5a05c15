"""Handler registry and request dispatch: frames in, response parts out.

Rules:
- A handler module in `broker/handlers/` registers itself with `@handles(api, "lo-hi")`, the version range
  it really serves, next to its code. ApiVersions is derived from this registry, so the broker never
  advertises an API or version that has no handler (librdkafka and kafka-python use whatever is
  advertised).
- A handler gets the decoded request and a `RequestContext` and returns the response object, or None when no
  response is due (Produce with acks=0). It may be a coroutine function when it has to wait (long-poll
  Fetch, acks=all, group joins); state is mutated on the event loop between awaits.
- `Dispatcher.handle_frame` turns one request frame into the response parts (bytes and, for Fetch, file
  slices sent with sendfile). Malformed input that cannot be answered raises `CloseConnection`.
- Fault hooks (`FaultHooks`) sit in the product, not in tests: a drill can make an API answer an error, delay
  it, or drop the connection, per API key, without any test-only branch in the handlers.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from protocol.errors import ErrorCode
from protocol.framing import frame_size_prefix
from protocol.headers import decode_request_header, encode_response_header, peek_request
from protocol.schema import Api, DecodeError, UnsupportedVersionError
from protocol.versions import VersionRange

log = logging.getLogger(__name__)

Handler = Callable[["RequestContext", Any], Awaitable[Any] | Any]


@dataclass(frozen=True, slots=True)
class Registration:
    api: Api
    versions: VersionRange
    handler: Handler
    is_async: bool


REGISTRY: dict[int, Registration] = {}


def handles(api: Api, versions: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler for `api` at `versions` (within the declared range)."""
    served = VersionRange.parse(versions)
    if served.low not in api.versions or served.high not in api.versions:
        raise ValueError(f"{api.name}: versions {served} are outside the declared {api.versions}")

    def register(fn: Handler) -> Handler:
        if api.key in REGISTRY:
            raise RuntimeError(f"two handlers for {api.name}")
        REGISTRY[api.key] = Registration(api, served, fn, inspect.iscoroutinefunction(fn))
        return fn

    return register


def load_handlers() -> dict[int, Registration]:
    """Import every module of broker.handlers (each registers itself) and return the registry."""
    import broker.handlers as package

    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{info.name}")
    return REGISTRY


def supported_versions() -> list[tuple[int, int, int]]:
    """(api_key, min_version, max_version) for every registered handler, sorted by key."""
    return sorted((key, r.versions.low, r.versions.high) for key, r in REGISTRY.items())


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about the request besides its body."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    broker: Any  # broker.app.Broker: typed loosely here to keep this module free of import cycles
    peer: str = ""
    # Set when the client negotiated a version we do not serve (answered by the ApiVersions handler, KIP-511).
    unsupported: bool = False


class CloseConnection(Exception):
    """The request cannot be answered: the connection is closed, as Kafka does."""


@dataclass
class FaultRule:
    """One fault-injection rule for an API key: answer `error` (when set), after `delay_s`, or drop."""

    error: ErrorCode | None = None
    delay_s: float = 0.0
    drop_connection: bool = False
    remaining: int | None = None  # None: until removed


@dataclass
class FaultHooks:
    rules: dict[int, FaultRule] = field(default_factory=dict)

    def take(self, api_key: int) -> FaultRule | None:
        rule = self.rules.get(api_key)
        if rule is None:
            return None
        if rule.remaining is not None:
            rule.remaining -= 1
            if rule.remaining <= 0:
                del self.rules[api_key]
        return rule


class Dispatcher:
    def __init__(self, broker: Any, faults: FaultHooks | None = None) -> None:
        self.broker = broker
        self.faults = faults or FaultHooks()
        self.registry = load_handlers()

    async def handle_frame(self, frame: bytearray, peer: str) -> list | None:
        """Decode, run the handler, encode. Returns the framed response parts, or None when none is due."""
        try:
            api_key, api_version, correlation_id = peek_request(frame)
        except DecodeError as exc:
            raise CloseConnection(str(exc)) from exc
        registration = self.registry.get(api_key)
        if registration is None:
            raise CloseConnection(f"unknown API key {api_key}")
        api = registration.api
        supported = api_version in registration.versions
        if not supported and api.key != Api.API_VERSIONS_KEY:
            # Kafka closes the connection: the client should have negotiated with ApiVersions first.
            raise CloseConnection(f"{api.name} v{api_version} is not supported")
        context = RequestContext(api_key, api_version, correlation_id, None, self.broker, peer, not supported)
        request = None
        if supported:
            try:
                header, body_start = decode_request_header(frame, api.request_header_version(api_version))
                context.client_id = header.client_id
                request = api.request.decode_from(memoryview(frame), api_version, body_start)[0]
            except (DecodeError, UnsupportedVersionError) as exc:
                raise CloseConnection(f"malformed {api.name} v{api_version} request: {exc}") from exc

        rule = self.faults.take(api_key)
        if rule is not None:
            if rule.delay_s:
                await asyncio.sleep(rule.delay_s)
            if rule.drop_connection:
                raise CloseConnection(f"fault hook dropped {api.name}")
            if rule.error is not None:
                response = self.broker.error_response(api, request, rule.error)
                return self.encode(api, context, response)

        if registration.is_async:
            response = await registration.handler(context, request)
        else:
            response = registration.handler(context, request)
        if response is None:
            return None
        return self.encode(api, context, response)

    @staticmethod
    def encode(api: Api, context: RequestContext, response: Any) -> list:
        # An unsupported ApiVersions version is answered in v0 (KIP-511).
        version = 0 if context.unsupported else context.api_version
        parts = [b"", encode_response_header(context.correlation_id, api.response_header_version(version))]
        api.response.encode_parts(response, version, parts)
        parts[0] = frame_size_prefix(sum(len(p) for p in parts))
        return parts
