"""The metadata log on the wire: how brokers fetch the controller's records (docs/cluster.md, Propagation).

A broker sends Fetch (v13+) for `__cluster_metadata` partition 0, by the fixed topic id below (KRaft's), from
the metadata offset after the last record it applied. The controller answers one record batch (v2, CRC32C,
uncompressed) with base offset = the metadata offset of its first record; each record's value is the record's
JSON line as in the store (`records.to_json`), key null. The partition's high watermark is the controller's
end offset, so a broker knows when it has caught up.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.metadata.records import from_json, to_json
from epoch_broker.protocol.records import Record, build_batch, iter_batches, iter_records, validate_batch

METADATA_TOPIC_ID = (1).to_bytes(16, "big")  # Kafka's Uuid.METADATA_TOPIC_ID: AAAAAAAAAAAAAAAAAAAAAQ
METADATA_TOPIC = "__cluster_metadata"


def encode(records: list[Any], base_offset: int) -> bytearray:
    return build_batch([(None, to_json(r).encode(), (), None) for r in records], base_offset=base_offset)


def decode(buf: Any) -> list[tuple[int, Any]]:
    """(metadata offset, record) for every record in `buf`; raises CorruptRecordError on a bad batch."""
    decoded = []
    for position, header in iter_batches(buf):
        validate_batch(buf, position, header)
        decoded += [(r.offset, from_json(_value(r).decode())) for r in iter_records(buf, position, header)]
    return decoded


def _value(record: Record) -> bytes:
    if record.value is None:  # the controller writes no null value; the TypeError bytes(None) would raise
        raise TypeError(f"metadata record at offset {record.offset} has a null value")
    return bytes(record.value)
