"""Moves bytes between sockets and the dispatcher; nothing else.

Rules:
- Frames are split by `FrameDecoder`; a frame over `socket.request.max.bytes` (or a negative size) closes
  the connection before its body is read, as Kafka does.
- Requests are pipelined: each frame is handled as its own task, so a long-polling Fetch does not stop the
  next request from being decoded, but responses are written strictly in request order.
- `CloseConnection` from the dispatcher closes the connection after the responses before it are written.
- Response parts are bytes-like, written with one writev, or `FileRecords` (segment byte ranges), sent with
  `os.sendfile` straight from the page cache when nothing is queued ahead of them in the transport; when
  something is (a slow reader), the rest is read with `os.pread` and queued, so order is kept.
- A connection with no traffic and nothing in flight for `connections.max.idle.ms` is closed.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from collections.abc import Callable
from typing import Any

from epoch_broker.broker.network.dispatch import CloseConnection, Dispatcher
from epoch_broker.protocol.connection import ServerConnection
from epoch_broker.protocol.framing import FrameDecoder, FrameError
from epoch_broker.storage.file_records import FileRecords

log = logging.getLogger(__name__)


class KafkaConnection(asyncio.Protocol):
    def __init__(self, server: KafkaServer) -> None:
        self.server = server
        self.decoder = FrameDecoder(server.max_frame_size)
        self.protocol = ServerConnection(server.dispatcher.registry)  # this connection's request rules
        self.in_flight: deque[asyncio.Task] = deque()
        self.transport: Any = None
        self.socket_fd = -1
        self.peer = ""
        self.last_activity = 0.0
        self.closing = False

    def connection_made(self, transport: Any) -> None:  # uvloop's transports are not asyncio.Transport
        self.transport = transport
        sock = transport.get_extra_info("socket")
        self.socket_fd = sock.fileno() if sock is not None else -1
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.server.connections.add(self)
        self.last_activity = self.server.loop.time()
        if self.server.idle_s > 0:
            self.server.loop.call_later(self.server.idle_s, self._check_idle)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self.server.connections.discard(self)
        if self.server.on_disconnect is not None:
            self.server.on_disconnect(self.peer)
        for task in self.in_flight:
            task.cancel()

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return
        self.last_activity = self.server.loop.time()
        self.decoder.receive_data(data)
        try:
            while (frame := self.decoder.next_frame()) is not None:
                task = self.server.loop.create_task(self.server.dispatcher.handle_frame(frame, self.peer,
                                                                                       self.protocol))
                self.in_flight.append(task)
                task.add_done_callback(self._write_ready)
        except FrameError as exc:
            log.warning("closing %s: %s", self.peer, exc)
            self.close()

    def _write_ready(self, _: asyncio.Task) -> None:
        """Write every finished response at the head of the queue; order is request order."""
        while self.in_flight and self.in_flight[0].done() and not self.closing:
            task = self.in_flight.popleft()
            if task.cancelled():
                continue
            exc = task.exception()
            if exc is not None:
                if isinstance(exc, CloseConnection):
                    log.info("closing %s: %s", self.peer, exc)
                else:
                    log.error("closing %s: request failed", self.peer, exc_info=exc)
                self.close()
                return
            parts = task.result()
            if parts is not None:
                self._write(parts)
        if not self.in_flight:
            self.server.idle_or_done()

    def _write(self, parts: list) -> None:
        assert self.transport is not None
        pending: list = []
        for part in parts:
            if isinstance(part, FileRecords):
                if pending:
                    self.transport.writelines(pending)
                    pending = []
                self._send_file(part)
            else:
                pending.append(part)
        if pending:
            self.transport.writelines(pending)

    def _send_file(self, records: FileRecords) -> None:
        assert self.transport is not None
        for fd, position, size in records.slices:
            if self.socket_fd >= 0 and self.transport.get_write_buffer_size() == 0:
                # Nothing queued ahead of us: the kernel copies page cache to socket, no Python bytes.
                try:
                    while size:
                        sent = os.sendfile(self.socket_fd, fd, position, size)
                        if sent == 0:
                            break
                        position += sent
                        size -= sent
                except (BlockingIOError, InterruptedError):
                    pass  # socket buffer full: queue the rest below, behind nothing
            if size:
                self.transport.write(os.pread(fd, size, position))

    def pause_writing(self) -> None:
        # The client reads slower than we answer: stop reading its requests until it catches up.
        assert self.transport is not None
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        assert self.transport is not None
        if not self.closing:
            self.transport.resume_reading()

    def _check_idle(self) -> None:
        if self.closing:
            return
        idle_until = self.last_activity + self.server.idle_s
        if not self.in_flight and self.server.loop.time() >= idle_until:
            log.info("closing %s: idle for %.0f ms", self.peer, self.server.idle_s * 1000)
            self.close()
        else:
            self.server.loop.call_at(max(idle_until, self.server.loop.time() + 0.01), self._check_idle)

    def close(self) -> None:
        if self.closing:
            return
        self.closing = True
        assert self.transport is not None
        self.transport.close()
        for task in self.in_flight:
            task.cancel()


class KafkaServer:
    def __init__(self, dispatcher: Dispatcher, max_frame_size: int, idle_ms: int,
                 on_disconnect: Callable[[str], None] | None = None) -> None:
        self.dispatcher = dispatcher
        self.on_disconnect = on_disconnect  # called with the peer address of every closed connection
        self.max_frame_size = max_frame_size
        self.idle_s = idle_ms / 1000 if idle_ms > 0 else 0.0
        self.connections: set[KafkaConnection] = set()
        self.loop = asyncio.get_running_loop()
        self._server: asyncio.Server | None = None
        self._drained: asyncio.Event | None = None

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Listen; returns the bound address (port 0 picks a free port)."""
        self._server = await self.loop.create_server(
            lambda: KafkaConnection(self), host, port, reuse_address=True, backlog=1024
        )
        address = self._server.sockets[0].getsockname()
        return address[0], address[1]

    def idle_or_done(self) -> None:
        if self._drained is not None and not any(c.in_flight for c in self.connections):
            self._drained.set()

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop accepting, let in-flight requests finish (up to `grace_s`), then close every connection."""
        if self._server is None:
            return
        self._server.close()
        for connection in self.connections:
            if connection.transport is not None:
                connection.transport.pause_reading()
        self._drained = asyncio.Event()
        self.idle_or_done()
        try:
            await asyncio.wait_for(self._drained.wait(), grace_s)
        except TimeoutError:
            log.warning("stopping with requests still in flight")
        for connection in list(self.connections):
            connection.close()
        await self._server.wait_closed()
