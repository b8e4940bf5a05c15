"""The broker's own small Kafka client: one connection, pipelined requests, typed messages in and out.

Used for inter-broker calls (replica fetchers, broker-to-controller), by the admin CLI and fault hooks, and by
tests that need to send exact requests (a stale CurrentLeaderEpoch, a garbage frame) that stock clients
never send. It speaks whatever version the caller names; `negotiate()` asks ApiVersions first and
`version_for(api)` picks the highest version both sides support.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import Any

from protocol.framing import FrameDecoder, frame_size_prefix
from protocol.headers import decode_response_header, encode_request_header
from protocol.messages import api_versions
from protocol.schema import Api


class ConnectionClosed(ConnectionError):
    """The broker closed the connection (as it does for requests it cannot answer)."""


class KafkaClient:
    def __init__(self, host: str, port: int, client_id: str = "epoch-broker-client") -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, tuple[Api, int, asyncio.Future]] = {}
        self._correlation = itertools.count(1)
        self._read_task: asyncio.Task | None = None
        self.broker_versions: dict[int, tuple[int, int]] = {}

    @classmethod
    async def connect(cls, bootstrap: str, client_id: str = "epoch-broker-client") -> KafkaClient:
        host, _, port = bootstrap.rpartition(":")
        client = cls(host, int(port), client_id)
        await client.open()
        return client

    async def open(self) -> None:
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        self._read_task = asyncio.create_task(self._read_loop())

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(ConnectionError):
                await self._writer.wait_closed()
        if self._read_task is not None:
            await asyncio.gather(self._read_task, return_exceptions=True)

    async def __aenter__(self) -> KafkaClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def negotiate(self) -> dict[int, tuple[int, int]]:
        """ApiVersions v3; remembers the broker's ranges for `version_for`."""
        response = await self.request(api_versions.API, 3, api_versions.REQUEST.cls(
            client_software_name="epoch-broker", client_software_version="0"))
        self.broker_versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        return self.broker_versions

    def version_for(self, api: Api) -> int:
        low, high = self.broker_versions[api.key]
        version = min(high, api.versions.high)
        if version < max(low, api.versions.low):
            raise ValueError(f"no common version for {api.name}")
        return version

    def send_raw(self, data: bytes) -> None:
        """Write bytes as they are (for malformed-input tests)."""
        assert self._writer is not None
        self._writer.write(data)

    async def request(self, api: Api, version: int, body: Any, *, expect_response: bool = True) -> Any:
        """Send one request and await its decoded response (None when `expect_response` is False)."""
        assert self._writer is not None
        correlation_id = next(self._correlation)
        header = encode_request_header(api.key, version, correlation_id, self.client_id,
                                       api.request_header_version(version))
        payload = header + api.request.encode(body, version)
        self._writer.write(frame_size_prefix(len(payload)) + payload)
        if not expect_response:
            await self._writer.drain()
            return None
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (api, version, future)
        await self._writer.drain()
        return await future

    async def _read_loop(self) -> None:
        assert self._reader is not None
        decoder = FrameDecoder()
        error: BaseException = ConnectionClosed(f"{self.host}:{self.port} closed the connection")
        try:
            while data := await self._reader.read(1 << 20):
                decoder.receive_data(data)
                while (frame := decoder.next_frame()) is not None:
                    self._deliver(frame)
        except (ConnectionError, OSError) as exc:
            error = ConnectionClosed(str(exc))
        for _, _, future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()

    def _deliver(self, frame: bytearray) -> None:
        correlation_id = int.from_bytes(frame[:4], "big", signed=True)
        api, version, future = self._pending.pop(correlation_id)
        if future.done():  # the caller was cancelled (a cancelled task, a wait_for timeout): drop the answer;
            return  # set_result would raise InvalidStateError and kill the read loop, hanging every later call
        _, body_start = decode_response_header(frame, api.response_header_version(version))
        try:
            future.set_result(api.response.decode_from(memoryview(frame), version, body_start)[0])
        except Exception as exc:  # a decode error belongs to this request's caller, not the read loop
            future.set_exception(exc)


__all__ = ["ConnectionClosed", "KafkaClient"]
