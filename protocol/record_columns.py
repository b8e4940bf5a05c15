"""Record batches decoded straight into columns: the rows of a consumer's read as Arrow lays out its arrays, with
no Python object per record. Pure Python, and compiled by Cython with the C types that `record_columns.pxd`
declares when the package is installed (setup.py), as record_scan.py is: one source for both
(tests/protocol/test_record_columns.py holds them to the same answers, and both to `records.iter_records`').

The columns (`RecordColumns`), in the host's byte order (Arrow's little-endian on every host Spark runs on):
- key, value: Arrow binary: int32 offsets (rows + 1), the bytes, and a validity bitmap (bit i, least significant
  first, set when row i is not null; None when no row is null);
- offset int64; timestamp int64 in milliseconds (CreateTime: the batch's base timestamp plus the record's delta;
  LogAppendTime: the batch's max timestamp, as iter_records); timestamp_type int32; leader_epoch int32 (the
  batch's partitionLeaderEpoch);
- headers, only when asked: a list of (key, value) pairs per row (Python objects: records with headers are rare).
The buffers may be longer than their rows need: each column states its used length.

Rules:
- Sans-IO and pyarrow-free: batch bodies in (`records.batch_body`, decompressed when their batch is), bytearrays
  out. Which batches a consumer returns is the caller's decision (client/completed_fetch.py); CRCs are not
  checked here (nor by iter_records).
- Every record of a batch is walked and checked, inside the range or not, as iter_records checks it: a length
  past the batch, fields that do not fill a record's length, bytes after the last record, a negative header
  count, a null header key or one that is not UTF-8 are CorruptRecordError, raised before any row of the call is
  returned. Stricter than iter_records in one point: a varint, offset or timestamp past 64 bits is
  CorruptRecordError here (iter_records would carry a Python int that no column can hold).
- A row is a record whose offset (base offset + offset delta, unchecked as in iter_records) is in [start, end),
  in log order.
- A record takes at least 7 bytes (a length and six one-byte fields), so a batch body of n bytes yields at most
  n // 7 rows: the buffers are sized from the bodies, whatever the headers' record counts claim.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from epoch_broker.protocol.errors import CorruptRecordError

if TYPE_CHECKING:
    from epoch_broker.protocol.record_scan import Buffer
    from epoch_broker.protocol.records import BatchHeader

MIN_RECORD_SIZE = 7
_TIMESTAMP_TYPE_BIT = 0x08
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

Headers = list[tuple[str, bytes | None]]


class RecordColumns(NamedTuple):
    """The rows of one `decode_columns` call, column by column (see the module's layout)."""

    rows: int
    key_offsets: bytearray
    key_data: bytearray
    key_validity: bytearray | None
    key_nulls: int
    value_offsets: bytearray
    value_data: bytearray
    value_validity: bytearray | None
    value_nulls: int
    offsets: bytearray
    timestamps: bytearray
    timestamp_types: bytearray
    leader_epochs: bytearray
    headers: list[Headers] | None


def decode_columns(batches: Sequence[tuple[Buffer, BatchHeader]], start: int, end: int,
                   with_headers: bool) -> RecordColumns:
    """The records with offsets in [start, end) of `batches` (each a batch body and its header, in log order) as
    columns; `with_headers` decodes their headers too. CorruptRecordError for a malformed body."""
    capacity = data_capacity = 0
    for body, header in batches:
        capacity += max(0, min(header.records_count, len(body) // MIN_RECORD_SIZE))
        data_capacity += len(body)
    key_offsets, value_offsets = bytearray(4 * (capacity + 1)), bytearray(4 * (capacity + 1))
    key_data, value_data = bytearray(data_capacity), bytearray(data_capacity)
    key_validity, value_validity = bytearray((capacity + 7) // 8), bytearray((capacity + 7) // 8)
    offsets, timestamps = bytearray(8 * capacity), bytearray(8 * capacity)
    timestamp_types, leader_epochs = bytearray(4 * capacity), bytearray(4 * capacity)
    headers: list[Headers] | None = [] if with_headers else None
    # the views are temporaries of the call: released when it returns
    rows, key_nulls, value_nulls = _fill(
        list(batches), start, end, headers,
        memoryview(key_offsets).cast("i"), memoryview(key_data), memoryview(key_validity),
        memoryview(value_offsets).cast("i"), memoryview(value_data), memoryview(value_validity),
        memoryview(offsets).cast("q"), memoryview(timestamps).cast("q"), memoryview(timestamp_types).cast("i"),
        memoryview(leader_epochs).cast("i"))
    return RecordColumns(rows, key_offsets, key_data, key_validity if key_nulls else None, key_nulls,
                         value_offsets, value_data, value_validity if value_nulls else None, value_nulls,
                         offsets, timestamps, timestamp_types, leader_epochs, headers)


def _read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Zigzag varint at ``pos`` -> (value, next position); IndexError if truncated, OverflowError past 64 bits
    (the compiled build raises it converting to a C long long; this check makes the plain build agree). This
    module's own copy of the reader: typed by record_columns.pxd, it is called without leaving C."""
    shift = 0
    raw = 0
    while True:
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            value = (raw >> 1) ^ -(raw & 1)
            if value < _INT64_MIN or value > _INT64_MAX:
                raise OverflowError("varint past 64 bits")
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def _checked_sum(a: int, b: int) -> int:
    """a + b, OverflowError past 64 bits (C would wrap)."""
    if (b > 0 and a > _INT64_MAX - b) or (b < 0 and a < _INT64_MIN - b):
        raise OverflowError("past 64 bits")
    return a + b


def _fill(batches: list[tuple[Buffer, BatchHeader]], start: int, end: int, headers: list[Headers] | None,
          key_offsets: memoryview, key_data: memoryview, key_validity: memoryview,
          value_offsets: memoryview, value_data: memoryview, value_validity: memoryview,
          offsets: memoryview, timestamps: memoryview, timestamp_types: memoryview,
          leader_epochs: memoryview) -> tuple[int, int, int]:
    """Walk every record of `batches`, writing the rows in range: (rows, null keys, null values).

    Varints are decoded inline for their common one- and two-byte forms, as in record_scan.py; a field's bytes are
    copied only after its record's length is checked, so every copy lies inside the body."""
    row = key_pos = value_pos = key_nulls = value_nulls = 0
    key_offsets[0] = value_offsets[0] = 0
    for body, header in batches:
        data = body
        size = len(data)
        base_offset = header.base_offset
        base_timestamp = header.base_timestamp
        max_timestamp = header.max_timestamp
        log_append = (header.attributes & _TIMESTAMP_TYPE_BIT) != 0
        timestamp_type = 1 if log_append else 0
        epoch = header.partition_leader_epoch
        count = header.records_count
        pos = 0
        try:
            for _ in range(count):
                byte = data[pos]
                if byte < 0x80:
                    length, pos = (byte >> 1) ^ -(byte & 1), pos + 1
                elif data[pos + 1] < 0x80:  # two bytes: records up to 8 KiB
                    raw = (byte & 0x7F) | (data[pos + 1] << 7)
                    length, pos = (raw >> 1) ^ -(raw & 1), pos + 2
                else:
                    length, pos = _read_varint(data, pos)
                if length < 0 or length > size - pos:
                    raise CorruptRecordError(f"a record of the batch at offset {base_offset} claims {length} "
                                             "bytes, past the end of the batch")
                record_end = pos + length
                byte = data[pos + 1]  # after the attributes byte (unused): the timestamp delta
                if byte < 0x80:
                    timestamp_delta, pos = (byte >> 1) ^ -(byte & 1), pos + 2
                else:
                    timestamp_delta, pos = _read_varint(data, pos + 1)
                byte = data[pos]
                if byte < 0x80:
                    offset_delta, pos = (byte >> 1) ^ -(byte & 1), pos + 1
                elif data[pos + 1] < 0x80:  # two bytes: records 64 to 8191 of the batch
                    raw = (byte & 0x7F) | (data[pos + 1] << 7)
                    offset_delta, pos = (raw >> 1) ^ -(raw & 1), pos + 2
                else:
                    offset_delta, pos = _read_varint(data, pos)
                byte = data[pos]
                if byte < 0x80:
                    key_length, pos = (byte >> 1) ^ -(byte & 1), pos + 1
                else:
                    key_length, pos = _read_varint(data, pos)
                key_at = pos
                if key_length > record_end - pos:
                    raise CorruptRecordError(f"a key in the batch at offset {base_offset} runs past its record")
                if key_length > 0:
                    pos += key_length
                byte = data[pos]
                if byte < 0x80:
                    value_length, pos = (byte >> 1) ^ -(byte & 1), pos + 1
                elif data[pos + 1] < 0x80:  # two bytes: values up to 8 KiB
                    raw = (byte & 0x7F) | (data[pos + 1] << 7)
                    value_length, pos = (raw >> 1) ^ -(raw & 1), pos + 2
                else:
                    value_length, pos = _read_varint(data, pos)
                value_at = pos
                if value_length > record_end - pos:
                    raise CorruptRecordError(f"a value in the batch at offset {base_offset} runs past its record")
                if value_length > 0:
                    pos += value_length
                record_headers: Headers | None = None  # a list only for a record with headers: they are rare
                if data[pos] == 0:
                    pos += 1
                else:
                    record_headers = []
                    pos = _read_headers(data, pos, record_end, record_headers)
                if pos != record_end:
                    raise CorruptRecordError(f"a record of the batch at offset {base_offset}: its length does not "
                                             "match its fields")
                offset = _checked_sum(base_offset, offset_delta)
                timestamp = max_timestamp if log_append else _checked_sum(base_timestamp, timestamp_delta)
                if offset < start or offset >= end:
                    continue
                offsets[row] = offset
                timestamps[row] = timestamp
                timestamp_types[row] = timestamp_type
                leader_epochs[row] = epoch
                if key_length < 0:
                    key_nulls += 1
                else:
                    key_data[key_pos:key_pos + key_length] = data[key_at:key_at + key_length]
                    key_pos += key_length
                    key_validity[row >> 3] |= 1 << (row & 7)
                key_offsets[row + 1] = key_pos
                if value_length < 0:
                    value_nulls += 1
                else:
                    value_data[value_pos:value_pos + value_length] = data[value_at:value_at + value_length]
                    value_pos += value_length
                    value_validity[row >> 3] |= 1 << (row & 7)
                value_offsets[row + 1] = value_pos
                if headers is not None:
                    headers.append([] if record_headers is None else record_headers)
                row += 1
        except (IndexError, ValueError, OverflowError, UnicodeDecodeError) as exc:
            # (ValueError: a varint longer than 10 bytes; OverflowError: a value past 64 bits)
            raise CorruptRecordError(f"malformed record in batch at offset {base_offset}") from exc
        if pos != size:
            raise CorruptRecordError(f"the batch at offset {base_offset} has bytes after its {count} records")
    return row, key_nulls, value_nulls


def _read_headers(data: Buffer, pos: int, record_end: int, found: Headers) -> int:
    """The headers of a record at ``pos`` (its header count) into `found`; the position after them. Checked as
    iter_records checks them: a negative count, a null key or one that is not UTF-8 is an error."""
    count, pos = _read_varint(data, pos)
    if count < 0:
        raise CorruptRecordError("a record has a negative header count")
    for _ in range(count):
        key_length, pos = _read_varint(data, pos)
        if key_length < 0:
            raise CorruptRecordError("a record has a null header key")
        if key_length > record_end - pos:
            raise CorruptRecordError("a header key runs past its record")
        key = bytes(data[pos:pos + key_length]).decode()
        pos += key_length
        value_length, pos = _read_varint(data, pos)
        value = None
        if value_length >= 0:
            if value_length > record_end - pos:
                raise CorruptRecordError("a header value runs past its record")
            value = bytes(data[pos:pos + value_length])
            pos += value_length
        found.append((key, value))
    return pos
