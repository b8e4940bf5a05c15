"""The client side of one Kafka connection, sans-IO: requests out as bytes, bytes in, responses out.

Rules:
- Correlation ids count up from 1; a response is matched to its request by id, never by order alone.
- A request sent without expecting a response (Produce acks=0) leaves nothing pending.
- A response frame whose id matches no pending request is a protocol error of the peer (`UnexpectedResponse`);
  a body that does not decode is that request's error, delivered with its id, and the connection goes on.
- `version_for(api)` is the highest version both sides serve, after `on_api_versions` recorded the broker's
  ranges (ApiVersions is the one request sent before they are known).

No sockets and no event loop here: `aio.py` and `blocking.py` move the bytes.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from epoch_broker.protocol.framing import FrameDecoder, frame_size_prefix
from epoch_broker.protocol.headers import decode_response_header, encode_request_header
from epoch_broker.protocol.messages import api_versions
from epoch_broker.protocol.schema import Api


class ConnectionClosed(ConnectionError):
    """The broker closed the connection (as it does for requests it cannot answer)."""


class UnexpectedResponse(Exception):
    """The broker sent a response to no request of ours: the connection cannot be trusted any more."""


@dataclass(frozen=True, slots=True)
class Response:
    """The answer to request `correlation_id`: its decoded body, or the error decoding it raised."""

    correlation_id: int
    body: Any = None
    error: Exception | None = None


class ClientConnection:
    def __init__(self, client_id: str | None = "epoch-broker-client") -> None:
        self.client_id = client_id
        self._decoder = FrameDecoder()
        self._pending: dict[int, tuple[Api, int]] = {}
        self._correlation = itertools.count(1)
        self.broker_versions: dict[int, tuple[int, int]] = {}

    @property
    def pending(self) -> list[int]:
        """Correlation ids still waiting for a response, oldest first."""
        return list(self._pending)

    def send_request(self, api: Api, version: int, body: Any, expect_response: bool = True) -> tuple[int, bytes]:
        """(correlation id, the framed request bytes to write)."""
        correlation_id = next(self._correlation)
        header = encode_request_header(api.key, version, correlation_id, self.client_id,
                                       api.request_header_version(version))
        payload = header + api.request.encode(body, version)
        if expect_response:
            self._pending[correlation_id] = (api, version)
        return correlation_id, frame_size_prefix(len(payload)) + payload

    def receive_data(self, data: bytes) -> list[Response]:
        """Feed bytes read from the socket; returns the responses they complete, in arrival order."""
        self._decoder.receive_data(data)
        responses = []
        while (frame := self._decoder.next_frame()) is not None:
            responses.append(self._decode(frame))
        return responses

    def _decode(self, frame: bytearray) -> Response:
        correlation_id = int.from_bytes(frame[:4], "big", signed=True)
        expected = self._pending.pop(correlation_id, None)
        if expected is None:
            raise UnexpectedResponse(f"response to correlation id {correlation_id}, which no request of ours has")
        api, version = expected
        try:
            _, body_start = decode_response_header(frame, api.response_header_version(version))
            return Response(correlation_id, api.response.decode_from(memoryview(frame), version, body_start)[0])
        except Exception as exc:  # a decode error belongs to this request's caller, not to the connection
            return Response(correlation_id, error=exc)

    # -- version negotiation ---------------------------------------------------------------------------

    @staticmethod
    def api_versions_request() -> tuple[Api, int, Any]:
        """The ApiVersions request every connection starts with (v3: the client's name, flexible encoding)."""
        return api_versions.API, 3, api_versions.REQUEST.cls(client_software_name="epoch-broker",
                                                             client_software_version="0")

    def on_api_versions(self, response: Any) -> dict[int, tuple[int, int]]:
        self.broker_versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        return self.broker_versions

    def version_for(self, api: Api) -> int:
        low, high = self.broker_versions[api.key]
        version = min(high, api.versions.high)
        if version < max(low, api.versions.low):
            raise ValueError(f"no common version for {api.name}")
        return version
