"""Record batches, magic 2 (KIP-98), as they travel on the wire and sit in a segment file.

Layout of one batch (big-endian; offsets in bytes from the batch start)::

     0  baseOffset            int64   stamped by the leader
     8  batchLength           int32   bytes after this field (so the batch is batchLength + 12)
    12  partitionLeaderEpoch  int32   stamped by the leader; NOT covered by the CRC
    16  magic                 int8    2
    17  crc                   uint32  CRC-32C of bytes 21..end
    21  attributes            int16   bits 0-2 compression (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd),
                                      bit 3 timestamp type (0 create, 1 log append),
                                      bit 4 transactional, bit 5 control, bit 6 delete horizon
    23  lastOffsetDelta       int32
    27  baseTimestamp         int64
    35  maxTimestamp          int64
    43  producerId            int64
    51  producerEpoch         int16
    53  baseSequence          int32
    57  recordsCount          int32
    61  records               compressed as a whole when compression != 0

Each record: length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
keyLength varint (-1 null), key, valueLength varint (-1 null), value, headerCount varint, then per
header keyLength varint, key (UTF-8), valueLength varint (-1 null), value. All varints are zigzag.

Rules:
- Sans-IO: bytes in, values out. The hot path (iter_batches, validate_batch, stamp) uses only
  ``struct`` and ``crc32c`` and never copies record bytes (memoryview slices).
- Only magic 2 is accepted; magic 0/1 raise UnsupportedForMessageFormat.
- Every malformed input raises CorruptRecordError, never another exception type; a batch whose CRC holds but
  whose codec no Kafka client writes (attributes 5-7), UnsupportedCompressionTypeError.
- The base offset and partition leader epoch sit outside the CRC, so the broker stamps them in
  place; anything else (log-append time) needs the CRC recomputed.
- Codecs: gzip is the standard library's, snappy, lz4 and zstd are cramjam's (a core dependency: one wheel, no
  C library on the system), imported on first use: parsing headers and CRCs needs none of them.
- Decompression never holds more than MAX_DECOMPRESSED_BYTES of output (a decompression bomb must not exhaust
  memory): gzip stops there, a snappy block states its length up front, and lz4 and zstd decode into a fixed
  buffer sized by their block headers (`_frames_bound`), before anything is decoded.
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from enum import IntEnum
from types import ModuleType
from typing import Any, NamedTuple

from epoch_broker.protocol.errors import (
    CorruptRecordError,
    UnsupportedCompressionTypeError,
    UnsupportedForMessageFormat,
)
from epoch_broker.protocol.record_scan import Buffer, read_varint

BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part batchLength does not count
MAGIC = 2
# Smallest legal batchLength: a header with no records.
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD

_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_UINT32 = struct.Struct(">I")

_MAGIC_POS = 16
_CRC_POS = 17
_LEADER_EPOCH_POS = 12
_ATTRIBUTES_POS = 21
_MAX_TIMESTAMP_POS = 35

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20

TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1

# xerial snappy-java stream framing, used by Kafka's Java client: magic, version 1, compatible 1,
# then blocks of [int32 compressed length][raw snappy block].
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> Compression:
        """The batch's codec; UnsupportedCompressionTypeError for the ids Kafka leaves undefined (5-7)."""
        codec = self.attributes & _COMPRESSION_MASK
        if codec > Compression.ZSTD:
            raise _undefined_codec(self)
        return Compression(codec)

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & _TIMESTAMP_TYPE_BIT else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        """Sequence of the batch's last record, wrapping at int32 as Kafka does; -1 if none."""
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) % 0x80000000

    @property
    def total_size(self) -> int:
        return self.batch_length + LOG_OVERHEAD


def _undefined_codec(header: BatchHeader) -> UnsupportedCompressionTypeError:
    return UnsupportedCompressionTypeError(f"batch at offset {header.base_offset} has compression codec "
                                           f"{header.attributes & _COMPRESSION_MASK}, which Kafka does not define")


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def parse_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Decode the 61-byte header at ``pos``; CorruptRecordError if fewer bytes remain."""
    try:
        return BatchHeader._make(_HEADER.unpack_from(buf, pos))
    except struct.error as exc:
        raise CorruptRecordError(f"truncated batch header at position {pos}") from exc


def iter_batches(buf: Buffer) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each batch in ``buf``, which must hold whole batches only.

    Checks framing (magic, length within bounds) but not the CRC: see validate_batch.
    """
    end = len(buf)
    pos = 0
    while pos < end:
        remaining = end - pos
        # Magic is checked before the length: old message sets have shorter legal lengths.
        if remaining > _MAGIC_POS and buf[pos + _MAGIC_POS] != MAGIC:
            raise UnsupportedForMessageFormat(f"magic {buf[pos + _MAGIC_POS]} at position {pos}")
        if remaining < BATCH_HEADER_SIZE:
            raise CorruptRecordError(f"truncated batch at position {pos}: {remaining} bytes left")
        header = BatchHeader._make(_HEADER.unpack_from(buf, pos))
        if header.batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"batch length {header.batch_length} at position {pos} is too small")
        if header.batch_length + LOG_OVERHEAD > remaining:
            raise CorruptRecordError(
                f"batch at position {pos} claims {header.total_size} bytes, only {remaining} left"
            )
        yield pos, header
        pos += header.batch_length + LOG_OVERHEAD


_crc32c: Callable[[Buffer], int] | None = None


def _load_crc32c() -> Callable[[Buffer], int]:
    """The crc32c package's C function, loaded without the package's ``__init__``: that one reads the package's
    version through importlib.metadata, 12-80 ms of CPU measured on the first produce of every broker process,
    while the extension module alone loads in about 1 ms."""
    import importlib.machinery
    import importlib.util
    import os

    spec = importlib.util.find_spec("crc32c")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, "_crc32c" + suffix)
            if os.path.exists(path):
                extension = importlib.util.spec_from_file_location("crc32c._crc32c", path)
                if extension is not None and extension.loader is not None:
                    module = importlib.util.module_from_spec(extension)
                    extension.loader.exec_module(module)
                    function: Callable[[Buffer], int] = module.crc32c
                    return function
    from crc32c import crc32c  # laid out otherwise: the package's own way

    return crc32c


def crc32c_of(data: Buffer) -> int:
    """CRC-32C of ``data``, the crc32c package loaded on first use (_load_crc32c)."""
    global _crc32c
    if _crc32c is None:
        _crc32c = _load_crc32c()
    return _crc32c(data)


def compute_crc(buf: Buffer, pos: int, header: BatchHeader) -> int:
    """CRC-32C over attributes..end of the batch at ``pos``."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    return crc32c_of(view[pos + _ATTRIBUTES_POS : pos + header.batch_length + LOG_OVERHEAD])


def validate_batch(buf: Buffer, pos: int, header: BatchHeader) -> None:
    """Raise CorruptRecordError unless the batch's CRC and cheap structural invariants hold."""
    if header.magic != MAGIC:
        raise UnsupportedForMessageFormat(f"magic {header.magic}")
    if header.records_count < 0:
        raise CorruptRecordError(f"negative record count {header.records_count}")
    # Compaction may remove records but never adds offsets: count - 1 <= lastOffsetDelta.
    if header.last_offset_delta < 0 or header.records_count - 1 > header.last_offset_delta:
        raise CorruptRecordError(
            f"last offset delta {header.last_offset_delta} inconsistent with {header.records_count} records"
        )
    if compute_crc(buf, pos, header) != header.crc:
        raise CorruptRecordError(f"CRC mismatch in batch at offset {header.base_offset}")
    # After the CRC (Kafka's order too): a bit flipped on the wire is corruption, which producers retry; a codec id
    # the client chose is not
    if header.attributes & _COMPRESSION_MASK > Compression.ZSTD:
        raise _undefined_codec(header)


def stamp(buf: bytearray | memoryview, pos: int, base_offset: int, partition_leader_epoch: int) -> None:
    """Write base offset and leader epoch in place; the CRC stays valid as it covers neither."""
    _INT64.pack_into(buf, pos, base_offset)
    _INT32.pack_into(buf, pos + _LEADER_EPOCH_POS, partition_leader_epoch)


def stamp_log_append_time(buf: bytearray | memoryview, pos: int, ts: int) -> None:
    """Mark the batch LogAppendTime with timestamp ``ts`` and recompute its CRC.

    As Kafka does, only maxTimestamp and the attribute bit change: with LogAppendTime every record's
    timestamp is the batch's maxTimestamp, so the base timestamp and deltas are left as sent.
    """
    header = parse_header(buf, pos)
    _INT16.pack_into(buf, pos + _ATTRIBUTES_POS, header.attributes | _TIMESTAMP_TYPE_BIT)
    _INT64.pack_into(buf, pos + _MAX_TIMESTAMP_POS, ts)
    _UINT32.pack_into(buf, pos + _CRC_POS, compute_crc(buf, pos, header))


# --- records -------------------------------------------------------------------------------------


def _write_varint(out: bytearray, value: int) -> None:
    raw = (value << 1) ^ (value >> 63)
    while raw > 0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def _read_bytes(buf: Buffer, pos: int) -> tuple[bytes | None, int]:
    length, pos = read_varint(buf, pos)
    if length < 0:
        return None, pos
    if pos + length > len(buf):
        raise IndexError("field runs past the end of the records")
    return bytes(buf[pos : pos + length]), pos + length


# A batch decompressing to more than this is refused (a decompression bomb must not exhaust memory). Kafka
# bounds it by the JVM heap; 64 MiB is far above any producer's batch (batch.size defaults to 16 KiB-1 MiB).
MAX_DECOMPRESSED_BYTES = 64 << 20

# lz4 and zstd frames from Kafka clients do not state their decompressed size (neither librdkafka nor the Java client
# writes it), but each block's output is capped by the format and the decoders enforce the cap: walking the block
# headers gives a bound before anything is decoded (`_frames_bound`).
_UINT32_LE = struct.Struct("<I")
_LZ4_MAGIC = 0x184D2204
_ZSTD_MAGIC = 0xFD2FB528
_SKIPPABLE_MAGIC = 0x184D2A50  # both formats' skippable frames; the low 4 bits are free
_ZSTD_BLOCK_MAX = 128 << 10


def _cramjam() -> ModuleType:
    """cramjam, or UnsupportedCompressionTypeError in an install without it (not a silent retry as a corrupt batch)."""
    try:
        import cramjam
    except ImportError as exc:
        raise UnsupportedCompressionTypeError(f"snappy, lz4 and zstd need the cramjam package: {exc}") from exc
    return cramjam


def _too_large(max_size: int) -> ValueError:
    return ValueError(f"decompresses to more than {max_size} bytes")


def _snappy_blocks(data: memoryview) -> Iterator[memoryview]:
    """The raw snappy blocks of a body: the body itself (librdkafka), or those of its xerial framing (Kafka's Java
    client): a 16-byte header, then blocks each after its int32 length."""
    if data[: len(_XERIAL_MAGIC)] != _XERIAL_MAGIC:
        yield data
        return
    pos = len(_XERIAL_HEADER)
    while pos < len(data):
        (size,) = _INT32.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise ValueError("truncated xerial snappy block")
        yield data[pos : pos + size]
        pos += size


def _snappy_decompress(snappy: ModuleType, data: memoryview, max_size: int) -> bytearray:
    """Each raw block states its length in a varint preamble: the total is checked against `max_size` before any
    output is allocated."""
    total = 0
    for block in _snappy_blocks(data):
        total += snappy.decompress_raw_len(block)
        if total > max_size:
            raise _too_large(max_size)
    out = bytearray(total)
    view = memoryview(out)
    pos = 0
    for block in _snappy_blocks(data):
        pos += snappy.decompress_raw_into(block, view[pos:])  # snap fails a block that does not fill its length
    return out


def _frames_bound(data: memoryview, max_size: int, magic: int,
                  frame: Callable[[memoryview, int, int, int], tuple[int, int]]) -> int:
    """The most lz4 or zstd frames can decode to, back to back (skippable frames too) as both decoders read them;
    `frame` walks one from after its magic: (position, bound) in, (position after it, bound) out."""
    pos = bound = 0
    while pos < len(data):
        (found,) = _UINT32_LE.unpack_from(data, pos)
        if found & 0xFFFFFFF0 == _SKIPPABLE_MAGIC:
            pos += 8 + _UINT32_LE.unpack_from(data, pos + 4)[0]
        elif found == magic:
            pos, bound = frame(data, pos + 4, bound, max_size)
        else:
            raise ValueError(f"no frame at position {pos}")
    return bound


def _lz4_frame(data: memoryview, pos: int, bound: int, max_size: int) -> tuple[int, int]:
    """A stored block adds its size, a compressed one the frame's block maximum (64 KiB-4 MiB)."""
    flags, block_size_id = data[pos], data[pos + 1] >> 4 & 7
    if flags >> 6 != 1 or block_size_id < 4:
        raise ValueError("not an lz4 frame descriptor")
    block_max = 1 << (2 * block_size_id + 8)
    block_checksum = 4 if flags & 0x10 else 0
    pos += 3 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)  # FLG, BD, content size, dictionary id, HC
    while True:
        (size,) = _UINT32_LE.unpack_from(data, pos)
        pos += 4
        if not size:  # the end mark, then the content checksum
            return pos + (4 if flags & 0x04 else 0), bound
        stored = size & 0x80000000
        size &= 0x7FFFFFFF
        bound += size if stored else block_max
        if bound > max_size:
            raise _too_large(max_size)
        pos += size + block_checksum


def _zstd_frame(data: memoryview, pos: int, bound: int, max_size: int) -> tuple[int, int]:
    """A raw or RLE block adds its size, a compressed one 128 KiB (RFC 8878's Block_Maximum_Size)."""
    descriptor = data[pos]
    single_segment = descriptor >> 5 & 1
    # descriptor, window descriptor (unless single segment), dictionary id, frame content size
    pos += 1 + (1 - single_segment) + (0, 1, 2, 4)[descriptor & 3] + (single_segment, 2, 4, 8)[descriptor >> 6]
    last = 0
    while not last:
        if pos + 3 > len(data):
            raise ValueError("truncated zstd frame")
        header = int.from_bytes(data[pos : pos + 3], "little")
        last, block_type, size = header & 1, header >> 1 & 3, header >> 3
        if block_type == 3:
            raise ValueError("reserved zstd block type")
        bound += _ZSTD_BLOCK_MAX if block_type == 2 else size
        if bound > max_size:
            raise _too_large(max_size)
        pos += 3 + (1 if block_type == 1 else size)
    return pos + (4 if descriptor & 0x04 else 0), bound  # then the content checksum


def _decompress(codec: Compression, data: memoryview, max_size: int) -> Buffer:
    """The batch body decompressed; ValueError (or the codec's own error) past `max_size` or on bad data."""
    if codec is Compression.GZIP:
        out = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data, max_size + 1)
        if len(out) > max_size:
            raise _too_large(max_size)
        return out
    cramjam = _cramjam()
    if codec is Compression.SNAPPY:
        return _snappy_decompress(cramjam.snappy, data, max_size)
    if codec is Compression.LZ4:
        decoded = bytearray(_frames_bound(data, max_size, _LZ4_MAGIC, _lz4_frame))
        del decoded[cramjam.lz4.decompress_into(data, decoded) :]
    else:
        decoded = bytearray(_frames_bound(data, max_size, _ZSTD_MAGIC, _zstd_frame))
        del decoded[cramjam.zstd.decompress_into(data, decoded) :]
    return decoded


def decompress(codec: Compression, data: Buffer, max_size: int) -> Buffer:
    """`data` compressed with `codec` (not NONE), decompressed: a batch body's codecs, for other payloads compressed
    the same way (KIP-714 telemetry); ValueError (or the codec's error) past `max_size` or on bad data."""
    return _decompress(codec, memoryview(data), max_size)


def _compress(codec: Compression, data: bytes) -> Buffer:
    if codec is Compression.GZIP:
        compressor = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
        return compressor.compress(data) + compressor.flush()
    cramjam = _cramjam()
    if codec is Compression.SNAPPY:
        block = cramjam.snappy.compress_raw(data)  # xerial-framed, one block, as Kafka's Java producer writes it
        return b"".join((_XERIAL_HEADER, _INT32.pack(len(block)), block))
    if codec is Compression.LZ4:
        # Independent blocks: Kafka's Java consumer (KafkaLZ4BlockInputStream) refuses linked ones. Level 0 is
        # lz4's fast mode, librdkafka's default.
        compressor = cramjam.lz4.Compressor(level=0, content_checksum=False, block_linked=False)
        compressor.compress(data)
        return memoryview(compressor.finish())
    return memoryview(cramjam.zstd.compress(data))  # level 3, zstd's default


def iter_records(buf: Buffer, pos: int, header: BatchHeader) -> Iterator[Record]:
    """Decode the records of the batch at ``pos`` (decompressing if needed)."""
    body = batch_body(buf, pos, header)
    log_append = header.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
    try:
        records = _decode_records(body, header, log_append)
    except (IndexError, ValueError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"malformed record in batch at offset {header.base_offset}") from exc
    yield from records


def batch_body(buf: Buffer, pos: int, header: BatchHeader) -> Buffer:
    """The records of the batch at ``pos``: a view of the buffer, or decompressed (bounded) bytes."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    body = view[pos + BATCH_HEADER_SIZE : pos + header.batch_length + LOG_OVERHEAD]
    if not header.attributes & _COMPRESSION_MASK:
        return body
    codec = header.compression  # UnsupportedCompressionTypeError for 5-7
    try:
        return _decompress(codec, body, MAX_DECOMPRESSED_BYTES)
    except UnsupportedCompressionTypeError as exc:  # no cramjam: a known codec, but not one this install decodes
        raise UnsupportedCompressionTypeError(f"batch at offset {header.base_offset} is {codec.name.lower()}: "
                                              f"{exc}") from exc
    except Exception as exc:  # each codec raises its own types: all mean a corrupt batch
        raise CorruptRecordError(f"batch at offset {header.base_offset} does not decompress as "
                                 f"{codec.name.lower()}: {exc}") from exc


def _decode_records(body: Buffer, header: BatchHeader, log_append: bool) -> list[Record]:
    records = []
    pos = 0
    size = len(body)
    for _ in range(header.records_count):
        length, pos = read_varint(body, pos)
        record_end = pos + length
        if length < 0 or record_end > size:
            raise ValueError("record length out of bounds")
        pos += 1  # record attributes: unused
        ts_delta, pos = read_varint(body, pos)
        offset_delta, pos = read_varint(body, pos)
        key, pos = _read_bytes(body, pos)
        value, pos = _read_bytes(body, pos)
        header_count, pos = read_varint(body, pos)
        if header_count < 0:
            raise ValueError("negative header count")
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(header_count):
            hkey, pos = _read_bytes(body, pos)
            if hkey is None:
                raise ValueError("null header key")
            hvalue, pos = _read_bytes(body, pos)
            headers.append((hkey.decode(), hvalue))
        if pos != record_end:
            raise ValueError("record length does not match its fields")
        timestamp = header.max_timestamp if log_append else header.base_timestamp + ts_delta
        records.append(Record(header.base_offset + offset_delta, timestamp, key, value, headers))
    if pos != size:
        raise ValueError("bytes left after the last record")
    return records


def _record_fields(item: Any) -> tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]], int]:
    if isinstance(item, tuple) and not hasattr(item, "_fields"):
        key, value, headers, timestamp = item
    else:
        key, value, headers, timestamp = item.key, item.value, item.headers, item.timestamp
    return key, value, headers or (), timestamp


def recompressed_batch(buf: Buffer, pos: int, header: BatchHeader, codec: Compression) -> bytearray:
    """The batch at ``pos`` encoded again with ``codec``: the same records, offsets, timestamps, leader epoch,
    producer id, epoch and sequence and transactional flag (Kafka's LogValidator when a topic's compression.type
    differs from the batch's)."""
    return build_batch(
        iter_records(buf, pos, header), base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch, producer_id=header.producer_id,
        producer_epoch=header.producer_epoch, base_sequence=header.base_sequence, compression=codec,
        is_transactional=header.is_transactional, is_control=header.is_control,
        timestamp_type=header.timestamp_type)


def build_batch(
    records: Iterable[Any],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    compression: Compression = Compression.NONE,
    is_transactional: bool = False,
    is_control: bool = False,
    timestamp_type: int = TIMESTAMP_CREATE_TIME,
) -> bytearray:
    """Encode one batch with a correct CRC.

    ``records`` holds (key, value, headers, timestamp) tuples or objects with those attributes
    (such as Record); a None timestamp means now. Offset deltas are 0..n-1.
    """
    items = [_record_fields(r) for r in records]
    if not items:
        raise ValueError("a batch needs at least one record")
    now = int(time.time() * 1000)
    timestamps = [now if ts is None else ts for _, _, _, ts in items]
    base_ts = min(timestamps)
    body = bytearray()
    for delta, ((key, value, headers, _), ts) in enumerate(zip(items, timestamps, strict=True)):
        rec = bytearray(b"\x00")
        _write_varint(rec, ts - base_ts)
        _write_varint(rec, delta)
        for field in (key, value):
            if field is None:
                _write_varint(rec, -1)
            else:
                _write_varint(rec, len(field))
                rec += field
        _write_varint(rec, len(headers))
        for hkey, hvalue in headers:
            encoded = hkey.encode()
            _write_varint(rec, len(encoded))
            rec += encoded
            if hvalue is None:
                _write_varint(rec, -1)
            else:
                _write_varint(rec, len(hvalue))
                rec += hvalue
        _write_varint(body, len(rec))
        body += rec
    payload = _compress(compression, bytes(body)) if compression else body
    attributes = int(compression)
    if timestamp_type == TIMESTAMP_LOG_APPEND_TIME:
        attributes |= _TIMESTAMP_TYPE_BIT
    if is_transactional:
        attributes |= _TRANSACTIONAL_BIT
    if is_control:
        attributes |= _CONTROL_BIT
    out = bytearray(BATCH_HEADER_SIZE)
    out += payload
    header = BatchHeader(
        base_offset,
        len(out) - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        len(items) - 1,
        base_ts,
        max(timestamps),
        producer_id,
        producer_epoch,
        base_sequence,
        len(items),
    )
    _HEADER.pack_into(out, 0, *header)
    _UINT32.pack_into(out, _CRC_POS, compute_crc(out, 0, header))
    return out


# -- transaction markers (KIP-98): the one record of a control batch ------------------------------------------
# key: version int16 (0), type int16 (0 abort, 1 commit); value: version int16 (0), coordinator epoch int32
_MARKER_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")
CONTROL_ABORT, CONTROL_COMMIT = 0, 1


class EndTxnMarker(NamedTuple):
    commit: bool
    coordinator_epoch: int


def build_end_txn_marker(producer_id: int, producer_epoch: int, marker: EndTxnMarker, timestamp: int) -> bytearray:
    """A control batch ending a transaction: transactional, control, no sequence, one record."""
    key = _MARKER_KEY.pack(0, CONTROL_COMMIT if marker.commit else CONTROL_ABORT)
    value = _MARKER_VALUE.pack(0, marker.coordinator_epoch)
    return build_batch([(key, value, (), timestamp)], producer_id=producer_id, producer_epoch=producer_epoch,
                       is_transactional=True, is_control=True)


def parse_end_txn_marker(buf: Buffer, pos: int, header: BatchHeader) -> EndTxnMarker:
    """The commit/abort marker of the control batch at ``pos``; CorruptRecordError if it is not one."""
    for record in iter_records(buf, pos, header):
        if record.key is None or len(record.key) < _MARKER_KEY.size:
            break
        _, kind = _MARKER_KEY.unpack_from(record.key)
        if kind not in (CONTROL_ABORT, CONTROL_COMMIT):
            break
        coordinator_epoch = -1
        if record.value is not None and len(record.value) >= _MARKER_VALUE.size:
            coordinator_epoch = _MARKER_VALUE.unpack_from(record.value)[1]
        return EndTxnMarker(kind == CONTROL_COMMIT, coordinator_epoch)
    raise CorruptRecordError(f"control batch at offset {header.base_offset} holds no transaction marker")


# -- batches rewritten with some of their records (the log cleaner) -------------------------------------------

def _encoded(header: BatchHeader, records: Buffer) -> tuple[bytearray, BatchHeader]:
    """`header` over `records` (already compressed if the header says so), with its length and CRC made right."""
    batch = bytearray(BATCH_HEADER_SIZE) + records
    header = header._replace(batch_length=len(batch) - LOG_OVERHEAD, crc=0)
    _HEADER.pack_into(batch, 0, *header)
    header = header._replace(crc=compute_crc(batch, 0, header))
    _HEADER.pack_into(batch, 0, *header)
    return batch, header


def batch_keeping(header: BatchHeader, body: Buffer, spans: list[tuple[int, int]]) -> tuple[bytearray, BatchHeader]:
    """The batch with only the records at `spans` of its body, compressed again with its codec."""
    view = memoryview(body)
    kept = b"".join(view[start:end] for start, end in spans)
    records: Buffer = kept
    if header.compression is not Compression.NONE:
        records = _compress(header.compression, kept)
    return _encoded(header._replace(records_count=len(spans)), records)


def empty_batch(header: BatchHeader) -> tuple[bytearray, BatchHeader]:
    """The batch's bare header: no records, no codec (an empty body does not decompress), as Kafka's
    DefaultRecordBatch.writeEmptyHeader."""
    return _encoded(header._replace(records_count=0, attributes=header.attributes - header.compression), b"")
