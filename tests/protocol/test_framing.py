"""Length-prefixed framing: chunked input, size limits checked before allocation."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epoch_broker.protocol.framing import (
    LARGE_FRAME_LIMIT,
    READ_CHUNK_BYTES,
    FrameDecoder,
    FrameError,
    FrameTooLarge,
    frame_size_prefix,
)


def frames_of(payloads: list[bytes]) -> bytes:
    return b"".join(frame_size_prefix(len(p)) + p for p in payloads)


@given(st.lists(st.binary(max_size=64), max_size=8), st.data())
def test_frames_survive_any_chunking(payloads: list[bytes], data: st.DataObject) -> None:
    stream = frames_of(payloads)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    decoder = FrameDecoder()
    received = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        decoder.receive_data(stream[start:end])
        while (frame := decoder.next_frame()) is not None:
            received.append(bytes(frame))
    assert received == payloads
    assert decoder.buffered == 0


def test_oversized_frame_is_rejected_from_its_length_prefix_alone() -> None:
    decoder = FrameDecoder(max_frame_size=1024)
    decoder.receive_data(struct.pack(">i", 1025))
    with pytest.raises(FrameTooLarge) as info:
        decoder.next_frame()
    assert info.value.size == 1025 and info.value.limit == 1024


def test_huge_length_prefix_allocates_nothing() -> None:
    decoder = FrameDecoder(max_frame_size=100 * 1024 * 1024)
    decoder.receive_data(struct.pack(">i", 0x7FFFFFFF) + b"abc")
    with pytest.raises(FrameTooLarge):
        decoder.next_frame()
    assert decoder.buffered == 7


def test_negative_length_is_a_frame_error() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(struct.pack(">i", -5))
    with pytest.raises(FrameError):
        decoder.next_frame()


def test_frames_are_writable_bytearrays_for_in_place_stamping() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(frames_of([b"abcd"]))
    frame = decoder.next_frame()
    assert isinstance(frame, bytearray)
    memoryview(frame)[0:1] = b"z"
    assert frame == bytearray(b"zbcd")


def test_partial_frame_waits_for_more_data() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(frames_of([b"hello"])[:6])
    assert decoder.next_frame() is None
    decoder.receive_data(b"llo")
    assert decoder.next_frame() == bytearray(b"hello")


@given(st.lists(st.binary(max_size=64), max_size=8), st.data())
def test_frames_survive_any_mix_of_reads_into_our_buffers_and_chunks_given(payloads: list[bytes],
                                                                           data: st.DataObject) -> None:
    """BufferedProtocol reads (get_buffer / buffer_updated, a read never larger than the buffer offered) mixed
    with receive_data, frames taken as they complete or only at the end: the same frames, and frames of at
    least `large_frame_bytes` (16 here) come out as the buffer their body was read into."""
    stream = frames_of(payloads)
    decoder = FrameDecoder(large_frame_bytes=16)
    received: list[bytes] = []
    position = 0
    while position < len(stream):
        want = data.draw(st.integers(1, 40))
        if data.draw(st.booleans()):
            target = decoder.get_buffer()
            n = min(want, len(target), len(stream) - position)
            target[:n] = stream[position:position + n]
            decoder.buffer_updated(n)
        else:
            n = min(want, len(stream) - position)
            decoder.receive_data(stream[position:position + n])
        position += n
        if data.draw(st.booleans()):
            while (frame := decoder.next_frame()) is not None:
                received.append(bytes(frame))
    while (frame := decoder.next_frame()) is not None:
        received.append(bytes(frame))
    assert received == payloads
    assert decoder.buffered == 0


def test_a_large_body_is_read_into_its_own_buffer_and_no_read_runs_past_it() -> None:
    decoder = FrameDecoder(large_frame_bytes=1024)
    body = bytes(range(256)) * 8  # 2048 bytes
    stream = frames_of([body, b"next"])
    decoder.receive_data(stream[:100])
    target = decoder.get_buffer()
    assert len(target) == 2048 - 96  # exactly what the body still misses
    target[:] = stream[100:4 + 2048]
    decoder.buffer_updated(len(target))
    assert decoder.has_frame()
    frame = decoder.next_frame()
    assert frame == bytearray(body) and isinstance(frame, bytearray)
    decoder.receive_data(stream[4 + 2048:])
    assert decoder.next_frame() == bytearray(b"next") and decoder.buffered == 0


def test_an_oversized_prefix_read_through_get_buffer_is_refused_before_any_allocation() -> None:
    decoder = FrameDecoder(max_frame_size=1024, large_frame_bytes=16)
    target = decoder.get_buffer()
    target[:4] = struct.pack(">i", 1 << 30)
    decoder.buffer_updated(4)
    assert len(decoder.get_buffer()) <= 64 * 1024  # no body buffer for the refused frame
    with pytest.raises(FrameTooLarge):
        decoder.next_frame()


def test_a_size_prefix_past_the_large_frame_limit_reserves_nothing_up_front() -> None:
    """Four bytes must not make a connection hold megabytes: past LARGE_FRAME_LIMIT the body grows as it comes."""
    decoder = FrameDecoder(large_frame_bytes=16)
    decoder.receive_data(struct.pack(">i", LARGE_FRAME_LIMIT + 1) + b"abc")
    assert len(decoder.get_buffer()) <= READ_CHUNK_BYTES and decoder.buffered == 7
    decoder.receive_data(b"x" * (LARGE_FRAME_LIMIT - 2))
    assert decoder.next_frame() == bytearray(b"abc" + b"x" * (LARGE_FRAME_LIMIT - 2))
