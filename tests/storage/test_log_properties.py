"""Property test: random leader/follower appends, epoch bumps, truncations, deletions, rolls and
reopens, checked after every step against a plain in-memory model of the log."""

from __future__ import annotations

import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from epoch_broker.protocol.records import build_batch, parse_header
from epoch_broker.storage.leader_epoch import EpochEntry
from epoch_broker.storage.log import LogConfig, PartitionLog
from tests.storage.storage_invariants import batches_of

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=100)


class ModelLog:
    """What the log must hold: batches (stamped bytes), log start, epoch history."""

    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.log_start = 0
        self.end = 0
        self.epochs: list[EpochEntry] = []

    def assign(self, epoch: int, start: int) -> None:
        if self.epochs and self.epochs[-1].epoch == epoch and start >= self.epochs[-1].start_offset:
            return
        self.epochs = [e for e in self.epochs if e.epoch < epoch and e.start_offset < start]
        self.epochs.append(EpochEntry(epoch, start))

    def visible(self) -> list[bytes]:
        return [b for b in self.batches if parse_header(b).last_offset >= self.log_start]


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp()
        self.log = PartitionLog.open(self.dir, CONFIG)
        self.model = ModelLog()
        self.epoch = 0
        self.serial = 0

    def _batch(self, records: int, **kwargs: int) -> bytearray:
        self.serial += 1
        return build_batch([(b"k%d" % self.serial, b"v" * 40, [], self.serial) for _ in range(records)], **kwargs)

    @rule(sizes=st.lists(st.integers(1, 4), min_size=1, max_size=3), bump=st.booleans())
    def leader_append(self, sizes: list[int], bump: bool) -> None:
        if bump:
            self.epoch += 1
        bufs = [self._batch(n) for n in sizes]
        buf = bytearray(b"".join(bufs))
        info = self.log.append_as_leader(buf, self.epoch)
        assert info.first_offset == self.model.end
        pos = 0
        for n, raw in zip(sizes, bufs, strict=True):
            stamped = bytes(buf[pos : pos + len(raw)])
            if not self.model.epochs or self.epoch > self.model.epochs[-1].epoch:
                self.model.assign(self.epoch, parse_header(stamped).base_offset)
            self.model.batches.append(stamped)
            self.model.end = parse_header(stamped).next_offset
            pos += len(raw)
            assert parse_header(stamped).records_count == n

    @rule(
        sizes=st.lists(st.integers(1, 4), min_size=1, max_size=3),
        bumps=st.lists(st.booleans(), min_size=3, max_size=3),
    )
    def follower_append(self, sizes: list[int], bumps: list[bool]) -> None:
        offset = self.model.end
        parts = []
        for n, bump in zip(sizes, bumps, strict=False):
            self.epoch += bump
            parts.append(bytes(self._batch(n, base_offset=offset, partition_leader_epoch=self.epoch)))
            offset += n
        self.log.append_as_follower(bytearray(b"".join(parts)))
        for raw in parts:
            header = parse_header(raw)
            self.model.assign(header.partition_leader_epoch, header.base_offset)
            self.model.batches.append(raw)
            self.model.end = header.next_offset

    @precondition(lambda self: self.model.batches)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(self.model.log_start, self.model.end))
        self.log.truncate_to(target)
        if target < self.model.end:
            # Whole batches only: the batch holding the target goes, so the end may fall below it.
            dropped = [parse_header(b) for b in self.model.batches if parse_header(b).last_offset >= target]
            self.model.end = dropped[0].base_offset
            self.model.batches = [b for b in self.model.batches if parse_header(b).last_offset < target]
            self.model.log_start = min(self.model.log_start, self.model.end)
        # Kafka's truncateTo: even when nothing is cut, an epoch starting at the log end (assigned, never
        # written) is dropped
        self.model.epochs = [e for e in self.model.epochs if e.start_offset < self.model.end]

    @precondition(lambda self: self.model.batches)
    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(self.model.log_start, self.model.end))
        self.log.high_watermark = self.log.log_end_offset
        self.log.delete_records_before(target)
        if target > self.model.log_start:
            self.model.log_start = target
            earlier = [e for e in self.model.epochs if e.start_offset <= target]
            if earlier:
                later = [e for e in self.model.epochs if e.start_offset > target]
                self.model.epochs = [EpochEntry(earlier[-1].epoch, target), *later]

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        offsets = dict(
            recovery_point=self.log.recovery_point,
            log_start_offset=self.log.log_start_offset,
            high_watermark=self.log.high_watermark,
        )
        if clean:
            self.log.close()
        else:
            self.log.close_without_flush()
        self.log = PartitionLog.open(self.dir, CONFIG, clean_shutdown=clean, **offsets)
        # Loading drops epoch entries at or beyond the log end (KIP-101); an entry there holds no data.
        self.model.epochs = [e for e in self.model.epochs if e.start_offset < self.model.end]

    @invariant()
    def log_equals_model(self) -> None:
        assert self.log.log_end_offset == self.model.end
        assert self.log.log_start_offset == self.model.log_start
        assert batches_of(self.log) == self.model.visible()
        assert self.log.epoch_cache.entries == self.model.epochs
        bases = [parse_header(b).base_offset for b in self.model.batches]
        assert bases == sorted(set(bases))

    def teardown(self) -> None:
        self.log.close_without_flush()
        shutil.rmtree(self.dir, ignore_errors=True)


LogMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
test_log_matches_its_model = LogMachine.TestCase
