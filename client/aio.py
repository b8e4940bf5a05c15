"""The client on asyncio streams: one connection, pipelined requests, typed messages in and out.

Used for inter-broker calls (replica fetchers, broker-to-controller), by the admin CLI and fault hooks, and by
tests that need to send exact requests (a stale CurrentLeaderEpoch, a garbage frame) that stock clients
never send. It speaks whatever version the caller names; `negotiate()` asks ApiVersions first and
`version_for(api)` picks the highest version both sides support. The protocol rules are `connection.py`'s.

`Security` is how the connection is secured: TLS with the caller's context (the server's name checked as the
context says), then SASL (SaslHandshake v1 and SaslAuthenticate, mechanisms of `sasl.py`) before any other
request; a refused authentication raises `AuthenticationFailed` from `open`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from dataclasses import dataclass, field
from typing import Any

from epoch_broker.client.connection import ClientConnection, ConnectionClosed, UnexpectedResponse
from epoch_broker.client.sasl import SaslError, new_client
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import sasl_authenticate, sasl_handshake
from epoch_broker.protocol.schema import Api


@dataclass(frozen=True, slots=True)
class Security:
    """TLS (a client context) and SASL (mechanism, username, password) for a connection; none by default."""

    tls: ssl.SSLContext | None = None
    sasl_mechanism: str = ""
    username: str = ""
    password: str = field(default="", repr=False)  # never in a log line


PLAINTEXT = Security()


class AuthenticationFailed(ConnectionError):
    """The broker refused our SASL authentication (the message is its own), or its tokens were wrong."""


class KafkaClient:
    def __init__(self, host: str, port: int, client_id: str = "epoch-broker-client",
                 security: Security = PLAINTEXT) -> None:
        self.host = host
        self.port = port
        self.security = security
        self.connection = ClientConnection(client_id)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._futures: dict[int, asyncio.Future[Any]] = {}  # decoded responses by correlation id
        self._read_task: asyncio.Task[None] | None = None
        self._closed: ConnectionClosed | None = None  # set when the read loop ended: every later request fails

    @classmethod
    async def connect(cls, bootstrap: str, client_id: str = "epoch-broker-client",
                      security: Security = PLAINTEXT) -> KafkaClient:
        host, _, port = bootstrap.rpartition(":")
        client = cls(host, int(port), client_id, security)
        try:
            await client.open()
        except BaseException:
            await client.close()
            raise
        return client

    @property
    def broker_versions(self) -> dict[int, tuple[int, int]]:
        return self.connection.broker_versions

    async def open(self) -> None:
        tls = self.security.tls
        self._reader, self._writer = await asyncio.open_connection(
            self.host, self.port, ssl=tls, server_hostname=self.host if tls is not None else None)
        self._read_task = asyncio.create_task(self._read_loop())
        if self.security.sasl_mechanism:
            await self._authenticate()

    async def _authenticate(self) -> None:
        """SaslHandshake v1, then SaslAuthenticate until the mechanism completes."""
        security = self.security
        handshake = await self.request(sasl_handshake.API, 1, sasl_handshake.REQUEST.cls(
            mechanism=security.sasl_mechanism))
        if handshake.error_code != ErrorCode.NONE:
            raise AuthenticationFailed(f"{self.host}:{self.port} refused SASL mechanism {security.sasl_mechanism} "
                                       f"({ErrorCode(handshake.error_code).name}; it enables "
                                       f"{', '.join(handshake.mechanisms) or 'none'})")
        mechanism = new_client(security.sasl_mechanism, security.username, security.password)
        token: bytes | None = mechanism.initial()
        while token is not None:
            answer = await self.request(sasl_authenticate.API, 1, sasl_authenticate.REQUEST.cls(auth_bytes=token))
            if answer.error_code != ErrorCode.NONE:
                raise AuthenticationFailed(f"{self.host}:{self.port}: {ErrorCode(answer.error_code).name}: "
                                           f"{answer.error_message}")
            try:
                token = mechanism.evaluate(answer.auth_bytes)
            except SaslError as exc:
                raise AuthenticationFailed(f"{self.host}:{self.port}: {exc}") from None

    async def close(self) -> None:
        """Close the socket and end the read loop; safe at any point, also while `open` is still connecting
        in another task (the caller cancels that task: nothing of this client is left running)."""
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(ConnectionError):
                await self._writer.wait_closed()
        if self._read_task is not None:
            await asyncio.gather(self._read_task, return_exceptions=True)

    def abort(self) -> None:
        """Drop the connection now, from code that cannot await: every request waiting for an answer fails with
        ConnectionClosed at once (`close` still releases the rest)."""
        if self._writer is not None:
            self._writer.transport.abort()

    async def __aenter__(self) -> KafkaClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def negotiate(self) -> dict[int, tuple[int, int]]:
        """ApiVersions v3; remembers the broker's ranges for `version_for`."""
        response = await self.request(*self.connection.api_versions_request())
        return self.connection.on_api_versions(response)

    def version_for(self, api: Api) -> int:
        return self.connection.version_for(api)

    def send_raw(self, data: bytes) -> None:
        """Write bytes as they are (for malformed-input tests)."""
        assert self._writer is not None
        self._writer.write(data)

    async def request(self, api: Api, version: int, body: Any, *, expect_response: bool = True) -> Any:
        """Send one request and await its decoded response (None when `expect_response` is False).

        Raises ConnectionClosed at once once the connection has ended: a request written after the peer closed
        would otherwise wait for an answer that cannot come."""
        assert self._writer is not None
        if self._closed is not None:
            raise self._closed
        correlation_id, data = self.connection.send_request(api, version, body, expect_response)
        self._writer.write(data)
        if not expect_response:
            await self._writer.drain()
            return None
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._futures[correlation_id] = future
        await self._writer.drain()
        return await future

    async def _read_loop(self) -> None:
        assert self._reader is not None
        error = ConnectionClosed(f"{self.host}:{self.port} closed the connection")
        try:
            while data := await self._reader.read(1 << 20):
                for response in self.connection.receive_data(data):
                    future = self._futures.pop(response.correlation_id)
                    if future.done():  # the caller was cancelled (a wait_for timeout): drop the answer
                        continue
                    if response.error is not None:
                        future.set_exception(response.error)
                    else:
                        future.set_result(response.body)
        except (ConnectionError, OSError, UnexpectedResponse) as exc:
            error = ConnectionClosed(str(exc))
        self._closed = error
        if self._writer is not None:
            self._writer.close()
        for future in self._futures.values():
            if not future.done():
                future.set_exception(error)
        self._futures.clear()


__all__ = ["PLAINTEXT", "AuthenticationFailed", "ConnectionClosed", "KafkaClient", "Security"]
