"""Idempotent and transactional producer state of one partition (KIP-98): who wrote which sequence numbers, and
which transactions are open.

For each producer id: its epoch, the metadata of its last 5 batches (first sequence, last sequence, last offset,
max timestamp) - 5 because a producer has at most 5 requests in flight, so a retried batch is always among them -,
the epoch of the transaction coordinator that wrote its last marker, and the first offset of its open
transaction (-1: none).

Snapshot file ``<offset>.snapshot`` in the partition directory (the state as of log offset
``offset``, i.e. after every batch below it), big-endian binary::

    version      int16    2 (1: written before transactions, read without the two transaction fields)
    crc          uint32   CRC-32C of every byte after this field
    count        int32    number of producers
    per producer:
      producer_id    int64
      epoch          int16
      batches        int8     n (<= 5), oldest first
      coordinator_epoch     int32   (version 2)
      txn_first_offset      int64   (version 2) -1 if no transaction is open
      n x (first_seq int32, last_seq int32, last_offset int64, timestamp int64)

Rules:
- ``check_and_update`` (data) and ``check_marker`` (a coordinator's commit or abort) only judge a batch; the state
  changes when the log appends it (``on_append``), so a batch that fails to reach the disk leaves no trace.
- A transaction opens at its producer's first transactional batch and closes at its marker; ``on_append`` returns
  the closed transaction (`CompletedTxn`), which the log indexes when aborted. A marker with no open transaction
  closes an empty one at its own offset, as Kafka's.
- A producer with an open transaction may not write outside it (INVALID_TXN_STATE); a marker from an older
  coordinator epoch than the last one seen is refused (TRANSACTION_COORDINATOR_FENCED), one for an older producer
  epoch too (INVALID_PRODUCER_EPOCH): a zombie coordinator or producer cannot end a newer transaction.
- Snapshots are written atomically at flush points; on open the newest valid snapshot at or
  below the log end is loaded and the log after it is replayed. A bad snapshot is skipped.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from epoch_broker.protocol.records import BatchHeader, EndTxnMarker, crc32c_of
from epoch_broker.storage.fs import FileSystem

MAX_BATCHES = 5
SNAPSHOT_SUFFIX = ".snapshot"
_VERSION = 2
_PREFIX = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_PRODUCER = struct.Struct(">qhb")
_TXN = struct.Struct(">iq")  # version 2: coordinator epoch, first offset of the open transaction
_BATCH = struct.Struct(">iiqq")
_SEQ_MOD = 1 << 31


class Verdict(Enum):
    OK = "ok"
    DUPLICATE = "duplicate"
    OUT_OF_ORDER_SEQUENCE = "out_of_order_sequence"
    INVALID_PRODUCER_EPOCH = "invalid_producer_epoch"
    INVALID_TXN_STATE = "invalid_txn_state"
    COORDINATOR_FENCED = "transaction_coordinator_fenced"


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    last_offset: int
    timestamp: int


class CheckResult(NamedTuple):
    verdict: Verdict
    # For DUPLICATE: where the original batch went, to answer the retry exactly as the first time.
    first_offset: int = -1
    last_offset: int = -1
    timestamp: int = -1


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    aborted: bool


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=MAX_BATCHES))
    coordinator_epoch: int = -1
    txn_first_offset: int = -1


class ProducerStateManager:
    def __init__(self, directory: str, fs: FileSystem | None = None) -> None:
        self.directory = directory
        self.fs = fs or FileSystem()
        self.producers: dict[int, ProducerEntry] = {}
        self.open_txns: dict[int, int] = {}  # producer id -> first offset of its open transaction

    @property
    def first_open_txn_offset(self) -> int | None:
        return min(self.open_txns.values(), default=None)

    def check_and_update(
        self, producer_id: int, producer_epoch: int, base_sequence: int, last_sequence: int,
        transactional: bool = False,
    ) -> CheckResult:
        """Judge an incoming batch of an idempotent producer against what the log holds."""
        entry = self.producers.get(producer_id)
        if entry is not None and not transactional and entry.txn_first_offset >= 0 \
                and producer_epoch == entry.epoch:
            return CheckResult(Verdict.INVALID_TXN_STATE)  # Kafka: a transactional producer writes in its txn
        if base_sequence < 0:
            # no sequence: a coordinator's write for the producer (TxnOffsetCommit); only its epoch is judged
            stale = entry is not None and producer_epoch < entry.epoch
            return CheckResult(Verdict.INVALID_PRODUCER_EPOCH if stale else Verdict.OK)
        if entry is None:
            # First batch we see from this producer (new, or its state expired): it must start at 0.
            return CheckResult(Verdict.OK if base_sequence == 0 else Verdict.OUT_OF_ORDER_SEQUENCE)
        if producer_epoch < entry.epoch:
            # A zombie from before the producer re-initialised.
            return CheckResult(Verdict.INVALID_PRODUCER_EPOCH)
        if producer_epoch > entry.epoch:
            # A bumped epoch restarts the sequence.
            return CheckResult(Verdict.OK if base_sequence == 0 else Verdict.OUT_OF_ORDER_SEQUENCE)
        for batch in entry.batches:
            if batch.first_seq == base_sequence and batch.last_seq == last_sequence:
                first = batch.last_offset - (last_sequence - base_sequence) % _SEQ_MOD
                return CheckResult(Verdict.DUPLICATE, first, batch.last_offset, batch.timestamp)
        if not entry.batches:
            return CheckResult(Verdict.OK if base_sequence == 0 else Verdict.OUT_OF_ORDER_SEQUENCE)
        expected = (entry.batches[-1].last_seq + 1) % _SEQ_MOD
        return CheckResult(Verdict.OK if base_sequence == expected else Verdict.OUT_OF_ORDER_SEQUENCE)

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> Verdict:
        """Judge a coordinator's commit or abort marker."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return Verdict.OK
        if coordinator_epoch < entry.coordinator_epoch:
            return Verdict.COORDINATOR_FENCED
        if producer_epoch < entry.epoch:
            return Verdict.INVALID_PRODUCER_EPOCH
        return Verdict.OK

    def on_append(self, header: BatchHeader, marker: EndTxnMarker | None = None) -> CompletedTxn | None:
        """Record a batch the log has just written (leader or follower); ``marker`` is a control batch's. Returns
        the transaction a marker closed."""
        if header.producer_id < 0:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is None or header.producer_epoch > entry.epoch:
            # a bumped epoch restarts the sequence; an open transaction stays open until its marker
            first = -1 if entry is None else entry.txn_first_offset
            coordinator_epoch = -1 if entry is None else entry.coordinator_epoch
            entry = self.producers[header.producer_id] = ProducerEntry(
                header.producer_epoch, coordinator_epoch=coordinator_epoch, txn_first_offset=first)
        if header.is_control:
            if marker is None:
                return None
            first = entry.txn_first_offset if entry.txn_first_offset >= 0 else header.base_offset
            entry.txn_first_offset = -1
            entry.coordinator_epoch = marker.coordinator_epoch
            self.open_txns.pop(header.producer_id, None)
            return CompletedTxn(header.producer_id, first, header.base_offset, not marker.commit)
        if header.is_transactional and entry.txn_first_offset < 0:
            entry.txn_first_offset = header.base_offset
            self.open_txns[header.producer_id] = header.base_offset
        if header.base_sequence >= 0:
            entry.batches.append(
                BatchMetadata(header.base_sequence, header.last_sequence, header.last_offset, header.max_timestamp)
            )
        return None

    def clear(self) -> None:
        self.producers.clear()
        self.open_txns.clear()

    # --- snapshots ------------------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        offsets = []
        for name in self.fs.listdir(self.directory):
            stem, _, suffix = name.partition(".")
            if "." + suffix == SNAPSHOT_SUFFIX and stem.isdigit():
                offsets.append(int(stem))
        return sorted(offsets)

    def _path(self, offset: int) -> str:
        return os.path.join(self.directory, f"{offset:020d}{SNAPSHOT_SUFFIX}")

    def take_snapshot(self, offset: int, keep: int = 2) -> None:
        """Write the state as of ``offset`` and keep only the ``keep`` newest snapshots."""
        body = bytearray(_COUNT.pack(len(self.producers)))
        for producer_id, entry in self.producers.items():
            body += _PRODUCER.pack(producer_id, entry.epoch, len(entry.batches))
            body += _TXN.pack(entry.coordinator_epoch, entry.txn_first_offset)
            for batch in entry.batches:
                body += _BATCH.pack(*batch)
        data = _PREFIX.pack(_VERSION, crc32c_of(body)) + body
        self.fs.write_atomic(self._path(offset), bytes(data))
        for old in self.snapshot_offsets()[:-keep]:
            self.fs.remove(self._path(old))

    def delete_snapshots_from(self, offset: int) -> None:
        """Remove snapshots at or above ``offset`` (the log was truncated there)."""
        for found in self.snapshot_offsets():
            if found >= offset:
                self.fs.remove(self._path(found))

    def delete_snapshots_before(self, offset: int) -> None:
        """Remove snapshots older than the newest one at or below ``offset`` (log start moved)."""
        older = [o for o in self.snapshot_offsets() if o <= offset]
        for found in older[:-1]:
            self.fs.remove(self._path(found))

    def load_latest(self, max_offset: int) -> int:
        """Load the newest valid snapshot at or below ``max_offset``; returns its offset (0 if none)."""
        self.clear()
        for offset in reversed(self.snapshot_offsets()):
            if offset > max_offset:
                continue
            producers = self._parse(self.fs.read_file(self._path(offset)))
            if producers is not None:
                self.producers = producers
                self.open_txns = {pid: e.txn_first_offset for pid, e in producers.items() if e.txn_first_offset >= 0}
                return offset
        return 0

    @staticmethod
    def _parse(data: bytes) -> dict[int, ProducerEntry] | None:
        try:
            version, crc = _PREFIX.unpack_from(data, 0)
            body = memoryview(data)[_PREFIX.size :]
            if version not in (1, _VERSION) or crc32c_of(body) != crc:
                return None
            (count,) = _COUNT.unpack_from(body, 0)
            pos = _COUNT.size
            producers = {}
            for _ in range(count):
                producer_id, epoch, n = _PRODUCER.unpack_from(body, pos)
                pos += _PRODUCER.size
                entry = ProducerEntry(epoch)
                if version >= 2:
                    entry.coordinator_epoch, entry.txn_first_offset = _TXN.unpack_from(body, pos)
                    pos += _TXN.size
                for _ in range(n):
                    entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                    pos += _BATCH.size
                producers[producer_id] = entry
            return producers if pos == len(body) else None
        except struct.error:
            return None
