"""The server side of one Kafka connection, sans-IO: request frames in, decoded requests or a verdict out.

Rules (Kafka's `SocketServer`/`RequestChannel` and KIP-511):
- A frame shorter than the fixed header (api key, version, correlation id) closes the connection.
- An API key the process does not serve closes the connection: the client should have asked ApiVersions.
- A version outside the served range closes the connection, except for ApiVersions, which is answered in v0
  (with UNSUPPORTED_VERSION and the served ranges) so that the client can negotiate.
- A header or body that does not decode closes the connection: nothing can be answered to a request that
  cannot be read, and guessing would answer the wrong request.
- Responses use the request's correlation id and its version (v0 for an unsupported ApiVersions).

SASL (Kafka's `SaslServerAuthenticator`), on a listener that requires it, as a state of the connection:
- HANDSHAKE: only ApiVersions and SaslHandshake are taken. A mechanism the listener does not enable is
  answered UNSUPPORTED_SASL_MECHANISM (with the enabled ones) and the connection closed after the answer.
- AUTHENTICATE: only SaslAuthenticate is taken. After SaslHandshake v0 the client sends raw SASL tokens
  instead (a size and the token, no request header) and gets raw tokens back; a failure then closes the
  connection without a word, as Kafka does. After v1, a failure is answered SASL_AUTHENTICATION_FAILED with
  a message and the connection is closed after the answer.
- AUTHENTICATED: every served API; the principal is the mechanism's. A second SaslHandshake is refused
  (re-authentication, KIP-368, is not supported).
- Any other request before AUTHENTICATED raises `NotAuthenticated`: it is answered ILLEGAL_SASL_STATE and
  the connection closed, and nothing it asked for happens.
On a listener without SASL the connection starts AUTHENTICATED, as the TLS client certificate's subject or
User:ANONYMOUS; a SaslHandshake there is answered ILLEGAL_SASL_STATE.

This is the one place these rules are decided; the mechanisms' exchanges are the caller's (`SaslMechanism`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.framing import frame_size_prefix
from epoch_broker.protocol.headers import decode_request_header, encode_response_header, peek_request
from epoch_broker.protocol.messages import api_versions, sasl_authenticate, sasl_handshake
from epoch_broker.protocol.primitives import Parts
from epoch_broker.protocol.schema import Api, DecodeError, UnsupportedVersionError
from epoch_broker.protocol.versions import VersionRange

ANONYMOUS = "User:ANONYMOUS"
RAW_TOKEN = -1  # the correlation id of a raw SASL token (after SaslHandshake v0): it has no header


class Served(Protocol):
    """What the connection needs to know of an API a process serves (read-only: a frozen Registration is one)."""

    @property
    def api(self) -> Api: ...

    @property
    def versions(self) -> VersionRange: ...


class ProtocolViolation(Exception):
    """The peer broke a rule that allows no answer: the connection must be closed."""


class SaslMechanism(Protocol):
    """One SASL exchange, server side: `evaluate` takes the client's token and returns the server's (raising
    on failure); `complete` once it succeeded, and `principal` then names who authenticated."""

    complete: bool
    principal: str

    def evaluate(self, token: bytes) -> bytes: ...


class AuthState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


_TAKEN_BEFORE_AUTHENTICATION = {
    AuthState.HANDSHAKE: frozenset({api_versions.API.key, sasl_handshake.API.key}),
    AuthState.AUTHENTICATE: frozenset({sasl_authenticate.API.key}),
    AuthState.FAILED: frozenset(),
}


@dataclass(slots=True)
class Request:
    """One decoded request. `body` is None when the version is not served (an ApiVersions to answer in v0)."""

    api: Api
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any

    @property
    def unsupported(self) -> bool:
        return self.body is None

    @property
    def raw_token(self) -> bool:
        """A SASL token sent bare after SaslHandshake v0 (answered bare too)."""
        return self.correlation_id == RAW_TOKEN

    @property
    def response_version(self) -> int:
        return 0 if self.unsupported else self.api_version


class NotAuthenticated(Exception):
    """A request the SASL state does not take: answer it ILLEGAL_SASL_STATE, then close the connection."""

    def __init__(self, served: Served, request: Request, state: AuthState) -> None:
        super().__init__(f"{request.api.name} before SASL authentication completed ({state.value} state)")
        self.served = served
        self.request = request


class ServerConnection:
    """Applies the per-connection request rules to each frame; holds the connection's protocol state.

    `sasl` maps each mechanism the listener enables to a factory of its exchange (None: no SASL here);
    `principal` is who the connection is before any SASL (a TLS client certificate's subject)."""

    def __init__(self, served: Mapping[int, Served],
                 sasl: Mapping[str, Callable[[], SaslMechanism]] | None = None, principal: str = ANONYMOUS) -> None:
        self.served = served
        self.sasl = sasl
        self.principal = principal
        self.auth_state = AuthState.HANDSHAKE if sasl is not None else AuthState.AUTHENTICATED
        self.raw_tokens = False  # after SaslHandshake v0
        self.mechanism: SaslMechanism | None = None
        self.close_after_response = False  # the answer ends the connection (a failed authentication)
        self.client_software: tuple[str, str] | None = None  # (name, version) from ApiVersions v3+ (KIP-511)

    @property
    def mechanisms(self) -> list[str]:
        return list(self.sasl or ())

    def handshake(self, mechanism: str, version: int) -> ErrorCode:
        """SaslHandshake: choose the mechanism; the error code to answer."""
        if self.sasl is None:
            return ErrorCode.ILLEGAL_SASL_STATE  # not a SASL listener: nothing to hand-shake
        factory = self.sasl.get(mechanism)
        if factory is None:
            self.auth_state = AuthState.FAILED
            self.close_after_response = True
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM
        self.mechanism = factory()
        self.auth_state = AuthState.AUTHENTICATE
        self.raw_tokens = version == 0
        return ErrorCode.NONE

    def authenticate(self, token: bytes) -> bytes:
        """SaslAuthenticate (or a raw token): one step of the exchange; the server's token to answer. Raises
        what the mechanism raises on failure; the caller then calls `authentication_failed`."""
        assert self.mechanism is not None and self.auth_state is AuthState.AUTHENTICATE
        answer = self.mechanism.evaluate(token)
        if self.mechanism.complete:
            self.auth_state = AuthState.AUTHENTICATED
            self.principal = self.mechanism.principal
            self.raw_tokens = False
        return answer

    def authentication_failed(self) -> None:
        self.auth_state = AuthState.FAILED
        self.close_after_response = True

    def receive_request(self, frame: bytearray) -> tuple[Served, Request]:
        """Decode one request frame (the 4-byte size already stripped); raises ProtocolViolation, or
        NotAuthenticated for a request the SASL state does not take."""
        if self.raw_tokens:
            served = self.served.get(sasl_authenticate.API.key)
            if served is None:
                raise ProtocolViolation("a raw SASL token, but SaslAuthenticate is not served")
            body = sasl_authenticate.REQUEST.cls(auth_bytes=bytes(frame))
            return served, Request(served.api, 0, RAW_TOKEN, None, body)
        served, request = self._decode(frame)
        if self.auth_state is not AuthState.AUTHENTICATED and (
                served.api.key not in _TAKEN_BEFORE_AUTHENTICATION[self.auth_state]):
            state = self.auth_state
            self.authentication_failed()
            raise NotAuthenticated(served, request, state)
        return served, request

    def _decode(self, frame: bytearray) -> tuple[Served, Request]:
        try:
            api_key, api_version, correlation_id = peek_request(frame)
        except DecodeError as exc:
            raise ProtocolViolation(str(exc)) from exc
        served = self.served.get(api_key)
        if served is None:
            raise ProtocolViolation(f"unknown API key {api_key}")
        api = served.api
        if api_version not in served.versions:
            if api.key != Api.API_VERSIONS_KEY:
                raise ProtocolViolation(f"{api.name} v{api_version} is not supported")
            return served, Request(api, api_version, correlation_id, None, None)
        try:
            header, body_start = decode_request_header(frame, api.request_header_version(api_version))
            body = api.request.decode_from(memoryview(frame), api_version, body_start)[0]
        except (DecodeError, UnsupportedVersionError) as exc:
            raise ProtocolViolation(f"malformed {api.name} v{api_version} request: {exc}") from exc
        return served, Request(api, api_version, correlation_id, header.client_id, body)

    @staticmethod
    def encode_response(request: Request, response: Any) -> Parts:
        """The framed response parts (bytes, and whatever `encode_parts` leaves unencoded, such as file ranges)."""
        if request.raw_token:
            token = response.auth_bytes
            return [frame_size_prefix(len(token)), token]
        version = request.response_version
        api = request.api
        parts: Parts = [b"", encode_response_header(request.correlation_id, api.response_header_version(version))]
        api.response.encode_parts(response, version, parts)
        parts[0] = frame_size_prefix(sum(len(p) for p in parts))
        return parts
