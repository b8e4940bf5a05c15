"""The client on a plain blocking socket: for Spark executors, scripts and anything without an event loop.

One request at a time: `request` sends, then reads until its response arrives (the socket timeout bounds
every read). The protocol rules are `connection.py`'s, shared with the asyncio client.
"""

from __future__ import annotations

import socket
from typing import Any

from epoch_broker.client.connection import ClientConnection, ConnectionClosed
from epoch_broker.protocol.schema import Api

DEFAULT_TIMEOUT_S = 30.0


class BlockingKafkaClient:
    def __init__(self, host: str, port: int, client_id: str = "epoch-broker-client",
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.host = host
        self.port = port
        self.connection = ClientConnection(client_id)
        self._socket = socket.create_connection((host, port), timeout=timeout_s)
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    @classmethod
    def connect(cls, bootstrap: str, client_id: str = "epoch-broker-client",
                timeout_s: float = DEFAULT_TIMEOUT_S) -> BlockingKafkaClient:
        host, _, port = bootstrap.rpartition(":")
        return cls(host, int(port), client_id, timeout_s)

    def close(self) -> None:
        self._socket.close()

    def __enter__(self) -> BlockingKafkaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def negotiate(self) -> dict[int, tuple[int, int]]:
        """ApiVersions v3; remembers the broker's ranges for `version_for`."""
        return self.connection.on_api_versions(self.request(*self.connection.api_versions_request()))

    def version_for(self, api: Api) -> int:
        return self.connection.version_for(api)

    def request(self, api: Api, version: int, body: Any, *, expect_response: bool = True) -> Any:
        """Send one request and return its decoded response (None when `expect_response` is False)."""
        correlation_id, data = self.connection.send_request(api, version, body, expect_response)
        self._socket.sendall(data)
        if not expect_response:
            return None
        while True:
            chunk = self._socket.recv(1 << 20)
            if not chunk:
                raise ConnectionClosed(f"{self.host}:{self.port} closed the connection")
            for response in self.connection.receive_data(chunk):
                if response.correlation_id != correlation_id:
                    continue  # an answer to a request that timed out before (its caller gave up on it)
                if response.error is not None:
                    raise response.error
                return response.body


# ConnectionClosed: what `request` raises when the broker closes the connection, for callers to catch
__all__ = ["DEFAULT_TIMEOUT_S", "BlockingKafkaClient", "ConnectionClosed"]
