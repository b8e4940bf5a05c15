"""Moves bytes between sockets and the dispatcher; nothing else.

Rules:
- The socket is read straight into `FrameDecoder`'s memory (a BufferedProtocol: a large request's body into a
  buffer of its own, copied by nobody but the kernel), which splits the frames; a frame over
  `socket.request.max.bytes` (or a negative size) closes the connection before its body is read, as Kafka does.
- One request at a time per connection, as Kafka's SocketServer mutes a channel until its response is sent:
  requests take effect in the order they were sent (50 pipelined offset commits commit 50 last, whatever
  replication acknowledges first), and responses go back in that order. A client may pipeline; the next frame
  is taken from the buffer only when the previous response is written. While a request is in flight (a long
  poll too) and a whole frame is buffered behind it, reading stops: what one connection holds is bounded by
  one read and one frame, however many requests are written without reading the answers.
- A request starts in the callback that read it (broker/eager.py): one that never waits is answered there,
  with no task and no loop trip; one that waits goes on as the connection's in-flight task. A pipelined request
  behind one answered at once is taken in a later callback, so that one client cannot hold the loop.
- Nor is a request taken while the client does not read its responses (the transport asked us to pause
  writing): a client that never reads cannot make the broker queue answers for it.
- `CloseConnection` from the dispatcher closes the connection after the responses before it are written.
- Response parts are bytes-like or `FileRecords` (segment byte ranges). The bytes and every range under
  `SENDFILE_MIN_BYTES` (read with `os.pread`) go out in one writev; a larger range is sent with `os.sendfile`
  straight from the page cache when nothing is queued ahead of it in the transport; when something is (a slow
  reader), the rest is read with `os.pread` and queued, so order is kept.
- A new connection past `max.connections`, past `max.connections.per.ip` for its address, or past what the
  file-descriptor budget leaves (`connection_budget`: the open-files limit less what the logs hold and a
  headroom for checkpoints and the controller) is closed at once, with a WARNING at most once a second:
  connections never starve the logs of file descriptors.
- Each listener is bound by `start`, with its TLS context and its SASL mechanisms (`Listener`, made by
  security/listeners.py). Under TLS the bytes must go through the TLS layer, so file ranges are read with
  `os.pread` instead of sendfile (as Kafka loses zero-copy under TLS). A TLS client certificate's subject is
  the connection's principal.
- A connection whose answer ends it (a failed SASL authentication) is closed once that answer is written.
- A client over a quota (broker/network/quotas.py) gets its answer, then nothing of its connection is read for the
  throttle time (`muted`), as Kafka's throttled channel (KIP-219).
- A connection with no traffic and nothing in flight for `connections.max.idle.ms` is closed. The idle timer
  is cancelled when the connection closes, so nothing keeps a closed connection in memory.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
from collections.abc import Callable
from typing import Any

from epoch_broker.broker.eager import start_eagerly
from epoch_broker.broker.network.dispatch import CloseConnection, Dispatcher
from epoch_broker.broker.security.listeners import Listener
from epoch_broker.broker.security.tls import principal_of
from epoch_broker.protocol.connection import ANONYMOUS, ServerConnection
from epoch_broker.protocol.framing import FrameDecoder, FrameError
from epoch_broker.storage.file_records import FileRecords

log = logging.getLogger(__name__)

PLAINTEXT_LISTENER = Listener()  # `start`'s default: no TLS, no SASL
# A file range smaller than this is read and sent in the response's one writev: a sendfile of its own would cost
# a syscall, and a packet, for each partition of a fetch that returns a little from many.
SENDFILE_MIN_BYTES = 32 * 1024


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, server: KafkaServer, listener: Listener) -> None:
        self.server = server
        self.listener = listener
        self.decoder = FrameDecoder(server.max_frame_size)
        # this connection's request rules; remade with the principal once the TLS peer is known
        self.protocol = ServerConnection(server.dispatcher.registry, listener.sasl)
        self.in_flight: asyncio.Future | None = None  # the one request waiting on something (a task)
        self.transport: Any = None
        self.socket_fd = -1
        self.peer = ""
        self.last_activity = 0.0
        self.last_read = 0.0  # loop time of the last read: every buffered frame was whole by then
        self.closing = False
        self.reading = True
        self.writing_paused = False
        self.muted = False  # throttled by a client quota (broker/network/quotas.py): nothing read until it ends
        self._idle_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:  # uvloop's transports are not asyncio.Transport
        self.transport = transport
        sock = transport.get_extra_info("socket")
        # sendfile would put plaintext on a TLS connection: under TLS every byte goes through the transport
        self.socket_fd = sock.fileno() if sock is not None and self.listener.tls is None else -1
        if self.listener.tls is not None:
            certificate = transport.get_extra_info("peercert")
            self.protocol.principal = principal_of(certificate) if certificate else ANONYMOUS
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.ip = peer[0] if peer else "?"
        if (refusal := self.server.admit(self.ip)) is not None:
            self.closing = True
            transport.abort()
            self.server.warn_refused(self.peer, refusal)
            return
        self.server.connections.add(self)
        self.server.per_ip[self.ip] += 1
        self.last_activity = self.server.loop.time()
        if self.server.idle_s > 0:
            self._idle_timer = self.server.loop.call_later(self.server.idle_s, self._check_idle)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        if self not in self.server.connections:
            return  # refused at once: never counted
        self.server.connections.discard(self)
        self.server.per_ip[self.ip] -= 1
        if not self.server.per_ip[self.ip]:
            del self.server.per_ip[self.ip]
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        if self.server.on_disconnect is not None:
            self.server.on_disconnect(self.peer)
        if self.in_flight is not None:
            self.in_flight.cancel()
        self.decoder = FrameDecoder(0)  # drop what was buffered
        self.server.idle_or_done()

    def get_buffer(self, sizehint: int) -> memoryview:
        # the socket is read straight into the decoder's memory: a large request's body into its own buffer
        return self.decoder.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        if self.closing:
            return
        self.last_activity = self.last_read = self.server.loop.time()
        self.decoder.buffer_updated(nbytes)
        self._take_next()

    def _take_next(self) -> None:
        """Start the next buffered request, if none is in flight and the client reads its responses; stop
        reading while a whole frame waits behind the one in flight."""
        if self.in_flight is not None or self.writing_paused or self.closing or self.muted:
            if self.decoder.buffered and self.reading and self._frame_waiting():
                self.pause_requests()
            return
        try:
            frame = self.decoder.next_frame()
        except FrameError as exc:
            log.warning("closing %s: %s", self.peer, exc)
            self.close()
            return
        if frame is None:
            self.resume_requests()
            return
        answer = start_eagerly(self.server.dispatcher.handle_frame(
            frame, self.peer, self.protocol, self.listener.name, self.last_read), self.server.loop)
        if answer.done():  # answered without waiting, in this callback
            if not self._answered(answer) or not self.server.accepting:
                return
            if self.decoder.buffered and self._frame_waiting():
                # a pipelined request: taken in a later callback, so that other connections get their turn, and
                # nothing more read meanwhile (what the connection holds stays one read and one frame)
                self.pause_requests()
                self.server.loop.call_soon(self._take_next)
            elif not self.writing_paused:
                self.resume_requests()  # paused while the frame just answered waited its turn
            return
        self.in_flight = answer
        answer.add_done_callback(self._on_done)
        if self.decoder.buffered and self._frame_waiting():
            self.pause_requests()

    def _frame_waiting(self) -> bool:
        """A whole frame is buffered (or a frame's size prefix says it is too large: let the decoder say so)."""
        try:
            return self.decoder.has_frame()
        except FrameError:
            return True

    def pause_requests(self) -> None:
        if self.reading and self.transport is not None and not self.closing:
            self.reading = False
            self.transport.pause_reading()

    def resume_requests(self) -> None:
        if not self.reading and self.transport is not None and not self.closing and not self.muted:
            self.reading = True
            self.transport.resume_reading()

    def _on_done(self, task: asyncio.Future) -> None:
        """The request in flight finished: answer it, then take the next one."""
        self.in_flight = None
        if self._answered(task) and self.server.accepting:
            self._take_next()

    def _answered(self, answer: asyncio.Future) -> bool:
        """Write a finished request's response (or close the connection as it says); whether it stays open."""
        if self.closing or answer.cancelled():
            self.server.idle_or_done()
            return False
        exc = answer.exception()
        if exc is not None:
            if isinstance(exc, CloseConnection):
                log.info("closing %s: %s", self.peer, exc)
            else:
                log.error("closing %s: request failed", self.peer, exc_info=exc)
            self.close()
            return False
        parts = answer.result()
        if parts is not None:
            self._write(parts)
            if self.closing:  # the client went away while it was written
                self.server.idle_or_done()
                return False
        if self.protocol.close_after_response:
            log.info("closing %s: authentication failed or refused", self.peer)
            self.close()
            return False
        self.last_activity = self.server.loop.time()
        self.server.idle_or_done()
        if (quotas := self.server.dispatcher.quotas) is not None and (throttle_s := quotas.take_mute(self.protocol)):
            self._mute(throttle_s)
        return True

    def _mute(self, throttle_s: float) -> None:
        """A client over its quota: its response is written; nothing more is read from it for `throttle_s` (Kafka's
        throttled channel, KIP-219)."""
        self.muted = True
        self.pause_requests()
        self.server.loop.call_later(throttle_s, self._unmute)

    def _unmute(self) -> None:
        self.muted = False
        if self.server.accepting and not self.closing:
            self._take_next()

    def _write(self, parts: list) -> None:
        """One writev for the response's bytes and its small file ranges; sendfile for the large ones."""
        assert self.transport is not None
        pending: list = []
        for part in parts:
            if not isinstance(part, FileRecords):
                pending.append(part)
                continue
            for fd, position, size in part.slices:
                if self.socket_fd < 0 or size < SENDFILE_MIN_BYTES:
                    pending.append(os.pread(fd, size, position))
                    continue
                if pending:
                    self.transport.writelines(pending)
                    pending = []
                self._send_file(fd, position, size)
                if self.closing:
                    return
        if pending:
            self.transport.writelines(pending)

    def _send_file(self, fd: int, position: int, size: int) -> None:
        assert self.transport is not None
        if self.transport.get_write_buffer_size() == 0:
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
            except (BrokenPipeError, ConnectionResetError) as exc:
                # the client went away mid-answer (a consumer closing while its fetch was answered)
                log.info("closing %s: %s while sending records", self.peer, exc.strerror)
                self.close()
                return
        if size:
            self.transport.write(os.pread(fd, size, position))

    def pause_writing(self) -> None:
        # The client reads slower than we answer: take no request (and read none) until it catches up.
        self.writing_paused = True
        self.pause_requests()

    def resume_writing(self) -> None:
        self.writing_paused = False
        if self.server.accepting:
            self._take_next()

    def _check_idle(self) -> None:
        if self.closing:
            return
        idle_until = self.last_activity + self.server.idle_s
        if self.in_flight is None and self.server.loop.time() >= idle_until:
            log.debug("closing %s: idle for %.0f ms", self.peer, self.server.idle_s * 1000)
            self.close()
        else:
            self._idle_timer = self.server.loop.call_at(max(idle_until, self.server.loop.time() + 0.01),
                                                        self._check_idle)

    def close(self) -> None:
        if self.closing:
            return
        self.closing = True
        assert self.transport is not None
        self.transport.close()
        if self.in_flight is not None:
            self.in_flight.cancel()


class KafkaServer:
    def __init__(self, dispatcher: Dispatcher, max_frame_size: int, idle_ms: int,
                 on_disconnect: Callable[[str], None] | None = None, max_connections: int = 2**31 - 1,
                 max_connections_per_ip: int = 2**31 - 1, connection_budget: Callable[[], int] | None = None
                 ) -> None:
        self.dispatcher = dispatcher
        self.on_disconnect = on_disconnect  # called with the peer address of every closed connection
        self.max_frame_size = max_frame_size
        self.idle_s = idle_ms / 1000 if idle_ms > 0 else 0.0
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.connection_budget = connection_budget  # connections the file descriptors leave room for
        self.connections: set[KafkaConnection] = set()
        self.per_ip: collections.Counter[str] = collections.Counter()
        self._last_refusal_warning = 0.0
        self.refused = 0
        self.accepting = True  # False once stopping: requests in flight finish, no new one is taken
        self.loop = asyncio.get_running_loop()
        self._servers: list[asyncio.Server] = []
        self._drained: asyncio.Event | None = None

    async def start(self, host: str, port: int, listener: Listener = PLAINTEXT_LISTENER) -> tuple[str, int]:
        """Listen on one listener; returns the bound address (port 0 picks a free port)."""
        server = await self.loop.create_server(lambda: KafkaConnection(self, listener), host, port,
                                               reuse_address=True, backlog=1024, ssl=listener.tls)
        self._servers.append(server)
        address = server.sockets[0].getsockname()
        return address[0], address[1]

    def admit(self, ip: str) -> str | None:
        """None if a new connection from `ip` may stay, else the limit it would break."""
        if len(self.connections) >= self.max_connections:
            return f"max.connections ({self.max_connections})"
        if self.per_ip[ip] >= self.max_connections_per_ip:
            return f"max.connections.per.ip ({self.max_connections_per_ip}) for {ip}"
        if self.connection_budget is not None and len(self.connections) >= (budget := self.connection_budget()):
            return f"the file-descriptor budget ({budget} connections beside the logs; raise ulimit -n)"
        return None

    def warn_refused(self, peer: str, limit: str) -> None:
        self.refused += 1
        now = self.loop.time()
        if now - self._last_refusal_warning >= 1.0:  # a flood of refusals is one line a second
            self._last_refusal_warning = now
            log.warning("refusing connection from %s: %s reached (%d refused so far)", peer, limit, self.refused)

    def idle_or_done(self) -> None:
        if self._drained is not None and not any(c.in_flight for c in self.connections):
            self._drained.set()

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop accepting, let in-flight requests finish (up to `grace_s`), then close every connection."""
        if not self._servers:
            return
        for server in self._servers:
            server.close()
        self.accepting = False
        for connection in self.connections:
            connection.pause_requests()
        self._drained = asyncio.Event()
        self.idle_or_done()
        try:
            await asyncio.wait_for(self._drained.wait(), grace_s)
        except TimeoutError:
            log.warning("stopping with requests still in flight")
        for connection in list(self.connections):
            connection.close()
        for server in self._servers:
            await server.wait_closed()
