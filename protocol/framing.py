"""Length-prefixed frames: a 4-byte big-endian size, then that many bytes.

`FrameDecoder` is fed arbitrary chunks (`receive_data`) and hands out whole frames (`next_frame`). A size
above the configured maximum, or a negative one, raises `FrameTooLarge`/`FrameError` as soon as the 4 size
bytes arrive, before anything is allocated for the body: the caller closes the connection, as Kafka does.
Frames come out as `bytearray`, so a broker can stamp offsets and leader epochs into record batches in place.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")
DEFAULT_MAX_FRAME = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default


class FrameError(Exception):
    """The byte stream cannot be split into frames (the peer is not speaking Kafka)."""


class FrameTooLarge(FrameError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class FrameDecoder:
    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()
        self._need = -1  # size of the frame being received, -1 while its length prefix is incomplete

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        self._buffer += data

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def has_frame(self) -> bool:
        """Whether a whole frame is buffered (raises like `next_frame` on a bad size prefix)."""
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
        return frame


def frame_size_prefix(size: int) -> bytes:
    return _SIZE.pack(size)
