"""Kafka's LogValidator for batches a client writes, on the leader, before a byte is stored.

Rules (each answered with Kafka's code and a message naming the batch and what is wrong):
- Magic 2 only: Produce v3+ carries record batches v2 (older magics: INVALID_RECORD, as Kafka answers).
- No control batches from clients (INVALID_RECORD): commit and abort markers are the coordinator's.
- The header's record count equals lastOffsetDelta + 1, and is at least 1 (INVALID_RECORD): one record with
  lastOffsetDelta 2^31-1 cannot move the log end by 2^31.
- Every record is walked (decompressed first, bounded at MAX_DECOMPRESSED_BYTES): its length must match its
  fields, offset deltas run 0..n-1, the count matches (CORRUPT_MESSAGE for framing or a body that does not
  decompress, INVALID_RECORD for offsets): a batch labelled gzip that is not gzip is refused, not stored.
- A compacted topic takes no record without a key (INVALID_RECORD).
- CreateTime timestamps must lie within message.timestamp.before.max.ms before and
  message.timestamp.after.max.ms after the broker's clock (INVALID_TIMESTAMP; Kafka's defaults accept any).
- Those two rules are judged per record: the error carries `record_errors`, (index of the record in its batch,
  why) for every record that breaks them, which Produce v8+ answers as Kafka does. The records are walked one by
  one only once the batch's scan found a breach.
- Valid batches are stored as they came (an uncompressed one is checked in place, no copy of its records),
  unless the topic's compression.type names a codec (`uncompressed`, `gzip`, `snappy`, `lz4`, `zstd`) other than
  the batch's: then the batch is encoded again with it, its records, timestamps and producer fields kept
  (`recompressed`), as Kafka's LogValidator does. `producer` (the default) keeps the producer's codec.

Followers skip this: they copy batches the leader already validated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from epoch_broker.protocol.errors import InvalidRecordError, InvalidTimestampError, KafkaError
from epoch_broker.protocol.record_scan import Buffer, scan_records
from epoch_broker.protocol.records import (
    TIMESTAMP_LOG_APPEND_TIME,
    BatchHeader,
    Compression,
    Record,
    batch_body,
    iter_batches,
    iter_records,
    recompressed_batch,
)

LONG_MAX = 2**63 - 1
# compression.type -> the codec batches are stored with (absent: "producer", the producer's own)
TOPIC_CODECS = {"uncompressed": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
                "lz4": Compression.LZ4, "zstd": Compression.ZSTD}


@dataclass(frozen=True, slots=True)
class ValidationRules:
    compacted: bool = False  # cleanup.policy=compact: every record needs a key
    timestamp_before_max_ms: int = LONG_MAX  # message.timestamp.before.max.ms
    timestamp_after_max_ms: int = LONG_MAX  # message.timestamp.after.max.ms
    check_timestamps: bool = True  # False for LogAppendTime topics: the broker's time replaces the client's


class _Where:
    """Names the batch in an error message; formatted only when one is raised."""

    __slots__ = ("index", "producer_id")

    def __init__(self, index: int, producer_id: int) -> None:
        self.index, self.producer_id = index, producer_id

    def __str__(self) -> str:
        return f"batch {self.index} (producer {self.producer_id})"


def validate_client_batches(buf: Buffer, batches: Sequence[tuple[int, BatchHeader]], rules: ValidationRules,
                            now_ms: int) -> None:
    """Raise the KafkaError Kafka would answer for the first batch that breaks a rule; return if all hold."""
    for index, (pos, header) in enumerate(batches):
        where = _Where(index, header.producer_id)
        if header.is_control:
            raise InvalidRecordError(f"{where}: clients may not write control batches")
        if header.records_count < 1:
            raise InvalidRecordError(f"{where}: a batch needs at least one record")
        if header.records_count != header.last_offset_delta + 1:
            raise InvalidRecordError(f"{where}: {header.records_count} records but lastOffsetDelta "
                                     f"{header.last_offset_delta}")
        scan = scan_records(batch_body(buf, pos, header), header)
        if rules.compacted and scan.null_key:
            raise _per_record(InvalidRecordError(f"{where}: a compacted topic takes no record without a key"),
                              buf, pos, header, lambda r: "a compacted topic takes no record without a key"
                              if r.key is None else None)
        if rules.check_timestamps and header.timestamp_type != TIMESTAMP_LOG_APPEND_TIME:
            earliest = header.base_timestamp + scan.min_timestamp_delta
            latest = header.base_timestamp + scan.max_timestamp_delta
            low, high = now_ms - rules.timestamp_before_max_ms, now_ms + rules.timestamp_after_max_ms
            if earliest < low or latest > high:
                bound = (f"message.timestamp.before.max.ms {rules.timestamp_before_max_ms} before" if earliest < low
                         else f"message.timestamp.after.max.ms {rules.timestamp_after_max_ms} after")

                def out_of_range(r: Record, low: int = low, high: int = high) -> str | None:
                    if low <= r.timestamp <= high:
                        return None
                    return f"timestamp {r.timestamp} is out of range [{low}, {high}]"

                raise _per_record(
                    InvalidTimestampError(f"{where}: timestamp {earliest if earliest < low else latest} is more than "
                                          f"{bound} the broker's time {now_ms}"),
                    buf, pos, header, out_of_range)


def _per_record(error: KafkaError, buf: Buffer, pos: int, header: BatchHeader,
                why: Callable[[Record], str | None]) -> KafkaError:
    """`error` with `record_errors`: (index in the batch, why) of each record `why` names a reason for."""
    reasons = ((i, why(record)) for i, record in enumerate(iter_records(buf, pos, header)))
    error.record_errors = tuple((i, reason) for i, reason in reasons if reason is not None)
    return error


def recompressed(buf: memoryview, batches: list[tuple[int, BatchHeader]], compression_type: str
                 ) -> tuple[memoryview, list[tuple[int, BatchHeader]]]:
    """The batches as the topic stores them: unchanged when `compression_type` is "producer" or every batch
    already has its codec, else every batch with another codec encoded again with it (validated batches only)."""
    codec = TOPIC_CODECS.get(compression_type)
    if codec is None or all(header.compression == codec for _, header in batches):
        return buf, batches  # the produce path's common case: no copy
    out = bytearray()
    for pos, header in batches:
        if header.compression == codec:
            out += buf[pos:pos + header.total_size]
        else:
            out += recompressed_batch(buf, pos, header, codec)
    return memoryview(out), list(iter_batches(out))
