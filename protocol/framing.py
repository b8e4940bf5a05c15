"""Length-prefixed frames: a 4-byte big-endian size, then that many bytes.

`FrameDecoder` is fed arbitrary chunks (`receive_data`) and hands out whole frames (`next_frame`). A size
above the configured maximum, or a negative one, raises `FrameTooLarge`/`FrameError` as soon as the 4 size
bytes arrive, before anything is allocated for the body: the caller closes the connection, as Kafka does.
Frames come out as `bytearray`, so a broker can stamp offsets and leader epochs into record batches in place.

Two ways in, which may be mixed: `receive_data(chunk)` (the bytes were read elsewhere), or `get_buffer()` then
`buffer_updated(n)` (asyncio's BufferedProtocol: the socket is read straight into our memory; outside a large
body that memory is one chunk per thread, copied out by `buffer_updated` at once). Either way, once a frame
of `large_frame_bytes` to `LARGE_FRAME_LIMIT` is next and its size prefix is in, its body gets a buffer of its
own, exactly its size, and the rest of it is read straight into that (`get_buffer` offers no more than the
body still missing, so a read never runs into the next frame): a 1 MiB Produce is copied by nobody but the
kernel.
"""

from __future__ import annotations

import struct
import threading

_SIZE = struct.Struct(">i")
DEFAULT_MAX_FRAME = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default
LARGE_FRAME_BYTES = 64 * 1024  # a body this large is read into its own buffer
# ... up to this size: a larger one grows as its bytes arrive, so that four bytes of size prefix cannot make the
# broker hold more than this per connection (Kafka's allocates the whole size at once)
LARGE_FRAME_LIMIT = 2 * 1024 * 1024
READ_CHUNK_BYTES = 64 * 1024  # what `get_buffer` offers outside a large body


class _ReadChunk(threading.local):
    """One read chunk per thread, shared by its decoders: `buffer_updated` copies out what was read before
    another read can happen on that thread's loop, so 10,000 connections hold no 10,000 chunks."""

    def __init__(self) -> None:
        self.memory = memoryview(bytearray(READ_CHUNK_BYTES))


_READ_CHUNK = _ReadChunk()


class FrameError(Exception):
    """The byte stream cannot be split into frames (the peer is not speaking Kafka)."""


class FrameTooLarge(FrameError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class FrameDecoder:
    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME, large_frame_bytes: int = LARGE_FRAME_BYTES) -> None:
        self.max_frame_size = max_frame_size
        self.large_frame_bytes = large_frame_bytes
        self._buffer = bytearray()
        self._need = -1  # size of the frame being received, -1 while its length prefix is incomplete
        self._large: bytearray | None = None  # the body of the large frame next, read into place
        self._large_filled = 0

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        if self._large is not None:
            taken = min(len(data), len(self._large) - self._large_filled)
            self._large[self._large_filled:self._large_filled + taken] = data[:taken]
            self._large_filled += taken
            data = data[taken:]
            if not data:
                return
        self._buffer += data
        self._start_large_body()

    def get_buffer(self) -> memoryview:
        """Where the next read goes: the rest of a large frame's body, or a chunk given to `buffer_updated`."""
        if self._large is not None:
            return memoryview(self._large)[self._large_filled:]
        return _READ_CHUNK.memory

    def buffer_updated(self, nbytes: int) -> None:
        """`nbytes` were read into the buffer `get_buffer` gave."""
        if self._large is not None:
            self._large_filled += nbytes
        else:
            self.receive_data(_READ_CHUNK.memory[:nbytes])

    def _start_large_body(self) -> None:
        """If the frame at the head of the buffer is large, valid and not whole yet, give its body its own buffer."""
        buf = self._buffer
        if self._large is not None or len(buf) < 4:
            return
        (size,) = _SIZE.unpack_from(buf, 0)
        if not self.large_frame_bytes <= size <= min(self.max_frame_size, LARGE_FRAME_LIMIT) or len(buf) >= 4 + size:
            return  # small, refused by next_frame (nothing allocated), past the limit, or already whole
        self._large = bytearray(size)
        self._large_filled = len(buf) - 4
        self._large[:self._large_filled] = memoryview(buf)[4:]
        buf.clear()
        self._need = -1

    @property
    def buffered(self) -> int:
        return len(self._buffer) + (4 + self._large_filled if self._large is not None else 0)

    def has_frame(self) -> bool:
        """Whether a whole frame is buffered (raises like `next_frame` on a bad size prefix)."""
        if self._large is not None:
            return self._large_filled == len(self._large)
        if len(self._buffer) < 4:
            return False
        size = self._need if self._need >= 0 else _SIZE.unpack_from(self._buffer, 0)[0]
        if size < 0:
            raise FrameError(f"negative frame size {size}")
        if size > self.max_frame_size:
            raise FrameTooLarge(size, self.max_frame_size)
        return len(self._buffer) >= 4 + size

    def next_frame(self) -> bytearray | None:
        """The next whole frame (without its size prefix), or None until more data arrives."""
        if self._large is not None:
            if self._large_filled < len(self._large):
                return None
            large, self._large = self._large, None
            self._start_large_body()  # what was read behind it (by receive_data) may begin another
            return large
        buf = self._buffer
        if self._need < 0:
            if len(buf) < 4:
                return None
            (size,) = _SIZE.unpack_from(buf, 0)
            if size < 0:
                raise FrameError(f"negative frame size {size}")
            if size > self.max_frame_size:
                raise FrameTooLarge(size, self.max_frame_size)
            self._need = size
        end = 4 + self._need
        if len(buf) < end:
            return None
        frame = buf[4:end]
        del buf[:end]  # CPython bytearrays drop a prefix without moving the rest
        self._need = -1
        self._start_large_body()
        return frame


def frame_size_prefix(size: int) -> bytes:
    return _SIZE.pack(size)
