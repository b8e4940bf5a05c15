"""The server side of one Kafka connection, sans-IO: request frames in, decoded requests or a verdict out.

Rules (Kafka's `SocketServer`/`RequestChannel` and KIP-511):
- A frame shorter than the fixed header (api key, version, correlation id) closes the connection.
- An API key the process does not serve closes the connection: the client should have asked ApiVersions.
- A version outside the served range closes the connection, except for ApiVersions, which is answered in v0
  (with UNSUPPORTED_VERSION and the served ranges) so that the client can negotiate.
- A header or body that does not decode closes the connection: nothing can be answered to a request that
  cannot be read, and guessing would answer the wrong request.
- Responses use the request's correlation id and its version (v0 for an unsupported ApiVersions).

This is the one place these rules are decided; the SASL gate (authentication before any other API) lands
here as a state of the connection.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from epoch_broker.protocol.framing import frame_size_prefix
from epoch_broker.protocol.headers import decode_request_header, encode_response_header, peek_request
from epoch_broker.protocol.schema import Api, DecodeError, UnsupportedVersionError
from epoch_broker.protocol.versions import VersionRange


class Served(Protocol):
    """What the connection needs to know of an API a process serves."""

    api: Api
    versions: VersionRange


class ProtocolViolation(Exception):
    """The peer broke a rule that allows no answer: the connection must be closed."""


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
    def response_version(self) -> int:
        return 0 if self.unsupported else self.api_version


class ServerConnection:
    """Applies the per-connection request rules to each frame; holds the connection's protocol state."""

    def __init__(self, served: Mapping[int, Served]) -> None:
        self.served = served

    def receive_request(self, frame: bytearray) -> tuple[Served, Request]:
        """Decode one request frame (the 4-byte size already stripped); raises ProtocolViolation."""
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
    def encode_response(request: Request, response: Any) -> list:
        """The framed response parts (bytes, and whatever `encode_parts` leaves unencoded, such as file ranges)."""
        version = request.response_version
        api = request.api
        parts = [b"", encode_response_header(request.correlation_id, api.response_header_version(version))]
        api.response.encode_parts(response, version, parts)
        parts[0] = frame_size_prefix(sum(len(p) for p in parts))
        return parts
