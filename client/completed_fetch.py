"""What a consumer returns of one partition's Fetch answer, by isolation level (KIP-98), as Kafka's
CompletedFetch decides it: sans-IO, the answer's record bytes and aborted-transaction list in, verdicts out.

Rules:
- Every batch of the answer is yielded, in log order, with whether its records are returned: a caller advances
  its position past every batch (visible or not), so offsets of skipped records and markers are never read
  twice and never become rows.
- Control batches (transaction markers) are never returned, at either level.
- read_uncommitted returns every other batch. read_committed skips a transactional batch of a producer whose
  transaction is aborted: the answer lists each aborted transaction overlapping it as (producer id, first
  offset); a producer counts as aborted from the first batch whose last offset reaches that first offset until
  its abort marker. A transaction that began before the fetch offset is listed too, so a read starting inside
  it skips its tail.
- The broker bounds a read_committed answer by the last stable offset: nothing here is undecided.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterable, Iterator

from epoch_broker.protocol.errors import CorruptRecordError
from epoch_broker.protocol.record_scan import Buffer
from epoch_broker.protocol.records import CONTROL_ABORT, BatchHeader, iter_batches, iter_records

READ_UNCOMMITTED, READ_COMMITTED = 0, 1  # the isolation_level of Fetch and ListOffsets
_CONTROL_KEY = struct.Struct(">hh")  # version, type: the key of a control record


def fetched_batches(records: Buffer, isolation_level: int,
                    aborted_transactions: Iterable[tuple[int, int]] | None = None
                    ) -> Iterator[tuple[int, BatchHeader, bool]]:
    """(position, header, whether a consumer returns its records) of each batch of a Fetch answer's records;
    `aborted_transactions` holds the answer's (producer_id, first_offset) pairs (read_committed only)."""
    pending = [(first_offset, producer_id) for producer_id, first_offset in aborted_transactions or ()]
    heapq.heapify(pending)  # by first offset, as the answers' order is not promised
    aborted: set[int] = set()
    for position, header in iter_batches(records):
        visible = not header.is_control
        if isolation_level == READ_COMMITTED and header.producer_id >= 0:
            while pending and pending[0][0] <= header.last_offset:
                aborted.add(heapq.heappop(pending)[1])
            if header.is_control:
                if _is_abort_marker(records, position, header):
                    aborted.discard(header.producer_id)  # its transaction ends here: later batches are another's
            elif header.is_transactional and header.producer_id in aborted:
                visible = False
        yield position, header, visible


def _is_abort_marker(records: Buffer, position: int, header: BatchHeader) -> bool:
    """Whether the control batch's first record is an abort marker (other control types, such as KRaft's, are
    not; an empty control batch is not either, as in Kafka). A key too short for a type, or of a negative
    version, is CorruptRecordError, as Kafka's ControlRecordType refuses it."""
    for record in iter_records(records, position, header):
        if record.key is None or len(record.key) < _CONTROL_KEY.size:
            raise CorruptRecordError(f"control batch at offset {header.base_offset}: its record's key is too short "
                                     "for a control record type")
        version: int
        kind: int
        version, kind = _CONTROL_KEY.unpack_from(record.key)
        if version < 0:
            raise CorruptRecordError(f"control batch at offset {header.base_offset}: control record key version "
                                     f"{version}")
        return kind == CONTROL_ABORT
    return False
