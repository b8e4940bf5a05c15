"""The per-record walk of a batch, the hot spot of Produce for small records (every record of every batch is
parsed, as Kafka's LogValidator does): pure Python, and compiled by Cython with the C types that
`record_scan.pxd` declares when the package is installed (setup.py; a machine that cannot compile runs this same
file, ~20x slower). One source for both: a change here is a change to both (tests/protocol/test_record_scan.py
runs them side by side).

The compiled build reads `data` as a typed buffer (bounds-checked: an index past the end is the same IndexError)
and keeps the integers of a record in C; a value that cannot fit 64 bits (a malformed varint) is OverflowError
there, a huge Python int here: both end as CorruptRecordError.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from epoch_broker.protocol.errors import CorruptRecordError, InvalidRecordError

if TYPE_CHECKING:
    from epoch_broker.protocol.records import BatchHeader

Buffer = bytes | bytearray | memoryview


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Zigzag varint at ``pos`` -> (value, next position). IndexError if truncated. The compiled build's own copy of
    primitives' reader: typed by record_scan.pxd, it is called without leaving C."""
    shift = 0
    raw = 0
    while True:
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


class RecordScan(NamedTuple):
    """What `scan_records` learned of a batch's records without copying them."""

    # the field shadows tuple.count(value), which mypy reports; the name is the public API (and tests')
    count: int  # type: ignore[assignment]
    min_timestamp_delta: int
    max_timestamp_delta: int
    null_key: bool


def scan_records(body: Buffer, header: BatchHeader) -> RecordScan:
    """Walk every record of a batch body (from `batch_body`) without copying keys, values or headers: each
    record's length must match its fields, offset deltas must run 0, 1, 2, ... and the number of records
    must be the header's count. CorruptRecordError for bad framing, InvalidRecordError for bad offsets.

    The hot path of per-record validation: varints are decoded inline (one byte, the common case, without a
    call), the rest by `read_varint`; the body is indexed where it lies (no copy of an uncompressed batch).
    """
    data = body
    pos = 0
    size = len(data)
    low = high = 0
    null_key = False
    try:
        for expected in range(header.records_count):
            byte = data[pos]
            if byte < 0x80:
                length, pos = (byte >> 1) ^ -(byte & 1), pos + 1
            elif data[pos + 1] < 0x80:  # two bytes: records up to 8 KiB
                raw = (byte & 0x7F) | (data[pos + 1] << 7)
                length, pos = (raw >> 1) ^ -(raw & 1), pos + 2
            else:
                length, pos = read_varint(data, pos)
            record_end = pos + length
            if length < 0 or record_end > size:
                raise CorruptRecordError(f"record {expected} of the batch at offset {header.base_offset} claims "
                                         f"{length} bytes, past the end of the batch")
            byte = data[pos + 1]  # after the attributes byte: the timestamp delta
            if byte < 0x80:
                ts_delta, pos = (byte >> 1) ^ -(byte & 1), pos + 2
            elif data[pos + 2] < 0x80:  # two bytes: up to 8 s after the batch's first record
                raw = (byte & 0x7F) | (data[pos + 2] << 7)
                ts_delta, pos = (raw >> 1) ^ -(raw & 1), pos + 3
            else:
                ts_delta, pos = read_varint(data, pos + 1)
            byte = data[pos]
            if byte < 0x80:
                offset_delta, pos = (byte >> 1) ^ -(byte & 1), pos + 1
            elif data[pos + 1] < 0x80:  # two bytes: records 64 to 8191 of the batch
                raw = (byte & 0x7F) | (data[pos + 1] << 7)
                offset_delta, pos = (raw >> 1) ^ -(raw & 1), pos + 2
            else:
                offset_delta, pos = read_varint(data, pos)
            if offset_delta != expected:
                raise InvalidRecordError(f"record {expected} of the batch at offset {header.base_offset} has "
                                         f"offset delta {offset_delta}")
            byte = data[pos]
            if byte < 0x80:
                key_length, pos = (byte >> 1) ^ -(byte & 1), pos + 1
            else:
                key_length, pos = read_varint(data, pos)
            if key_length < 0:
                null_key = True
            else:
                pos += key_length
            byte = data[pos]
            if byte < 0x80:
                value_length, pos = (byte >> 1) ^ -(byte & 1), pos + 1
            elif data[pos + 1] < 0x80:  # two bytes: values up to 8 KiB
                raw = (byte & 0x7F) | (data[pos + 1] << 7)
                value_length, pos = (raw >> 1) ^ -(raw & 1), pos + 2
            else:
                value_length, pos = read_varint(data, pos)
            if value_length > 0:
                pos += value_length
            byte = data[pos]
            if byte == 0:  # no headers: the common case
                pos += 1
            else:
                header_count, pos = read_varint(data, pos)
                if header_count < 0:
                    raise CorruptRecordError(f"record {expected}: negative header count")
                for _ in range(header_count):
                    header_key_length, pos = read_varint(data, pos)
                    if header_key_length < 0:
                        raise CorruptRecordError(f"record {expected}: null header key")
                    header_value_length, pos = read_varint(data, pos + header_key_length)
                    pos += max(header_value_length, 0)
            if pos != record_end:
                raise CorruptRecordError(f"record {expected} of the batch at offset {header.base_offset}: its "
                                         "length does not match its fields")
            if ts_delta:  # producers mostly write 0 or a few ms: compare only when it is not 0
                if ts_delta < low:
                    low = ts_delta
                elif ts_delta > high:
                    high = ts_delta
    except (IndexError, ValueError, OverflowError) as exc:  # (OverflowError: compiled, past 64 bits)
        raise CorruptRecordError(f"malformed record in the batch at offset {header.base_offset}") from exc
    if pos != size:
        raise CorruptRecordError(f"the batch at offset {header.base_offset} has bytes after its "
                                 f"{header.records_count} records")
    return RecordScan(header.records_count, low, high, null_key)
