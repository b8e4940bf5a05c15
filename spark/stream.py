"""Streaming reads of the `kafka-epoch` source (Structured Streaming), with offsets that carry leader epochs.

An offset in Spark's checkpoint is `{topic: {partition: {"offset": o, "leaderEpoch": e}}}`: the next offset to
read and the leader epoch of the record before it (-1 when unknown), as a Kafka consumer commits its position
(KIP-320). A micro-batch that resumes elsewhere than its start (a new partition, or after data loss with
failOnDataLoss=false) also carries `"readFrom": {"offset": o, "leaderEpoch": e}` in its end offset, so that
re-planning the same batch after a restart reads the same records.

Rules:
- Every micro-batch validates each stored position with the leader before going on: OffsetForLeaderEpoch for its
  epoch must end at or after its offset (else the log was truncated below it: an unclean election replaced
  records already read), and the offset must not be below the log start (records deleted before being read).
  An offset-only check cannot see the first case once the partition has grown back past the stored offset.
- Data loss with failOnDataLoss=true fails the query with one message naming the topic, partition, stored offset
  and epoch, and the divergence point; with false it logs a warning with the same facts and resumes at the
  divergence point (or the log start).
- A micro-batch's end is each partition's high watermark (under read_committed its last stable offset: an open
  transaction holds the partition's batches back until it ends; its aborted records and markers take offsets
  but give no rows), capped by `maxOffsetsPerTrigger` (shared in proportion to what each partition has
  waiting, as the connector does) and, under Trigger.AvailableNow, by the ends seen when the query started.
  Its epochs are found from the leader's epoch history (Cluster.epochs_before): from the validation's answer
  alone while the position's epoch is still the latest.
- `minOffsetsPerTrigger` skips a trigger (latestOffset answers its start: Spark runs no batch) while fewer offsets
  than that wait in all partitions together, as the connector's delayBatch: offsets, not records (under
  read_committed, markers and aborted records count), each partition's from where its next batch starts. Once
  `maxTriggerDelay` has passed since the last trigger let through, the next one runs whatever waits (then capped by
  `maxOffsetsPerTrigger`). The clock starts at the query's (or the restarted query's) first trigger, which is
  always let through, and restarts at each trigger let through, even one that found nothing new, as the
  connector's. Trigger.Once (ReadAllAvailable) and Trigger.AvailableNow read without waiting for the minimum.
- Partitions that appear (new topics matching subscribePattern, added partitions) are read from their log start;
  partitions of a deleted topic are data loss.
- The reader keeps one connection set on the driver between micro-batches and never pickles it; tasks read with
  source.py's `read_range`, from nothing but their InputPartition.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from epoch_broker.spark.kafka import BACKOFF_S, Cluster, TopicPartition
from epoch_broker.spark.options import EARLIEST, LATEST, Position, SourceOptions
from epoch_broker.spark.source import NAME, Range, cluster_of, read_range, starting_positions, tasks

log = logging.getLogger("epoch_broker.spark")
Offsets = dict[TopicPartition, Position]


class DataLossError(RuntimeError):
    """Records the query read, or was about to read, are gone (failOnDataLoss=true)."""


def offsets_to_json(positions: Offsets, read_from: Offsets | None = None) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for (topic, partition), position in sorted(positions.items()):
        entry: dict[str, Any] = {"offset": position.offset, "leaderEpoch": position.leader_epoch}
        if read_from and (start := read_from.get((topic, partition))) is not None:
            entry["readFrom"] = {"offset": start.offset, "leaderEpoch": start.leader_epoch}
        document.setdefault(topic, {})[str(partition)] = entry  # JSON keys are strings: Spark gives them back so
    return document


def offsets_from_json(document: dict[str, Any]) -> tuple[Offsets, Offsets]:
    """(positions, where the batch ending at them starts reading when not at its start offset)."""
    positions: Offsets = {}
    read_from: Offsets = {}
    for topic, partitions in document.items():
        for partition, entry in partitions.items():
            positions[(topic, int(partition))] = Position(int(entry["offset"]), int(entry["leaderEpoch"]))
            if (start := entry.get("readFrom")) is not None:
                read_from[(topic, int(partition))] = Position(int(start["offset"]), int(start["leaderEpoch"]))
    return positions, read_from


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._cluster: Cluster | None = None
        self._available_now: dict[TopicPartition, int] | None = None  # Trigger.AvailableNow's high watermarks
        self._last_trigger: float | None = None  # monotonic time minOffsetsPerTrigger last let a trigger through

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_cluster": None}  # sockets stay on the driver

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            self._cluster = cluster_of(self.options)
        return self._cluster

    def stop(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    def getDefaultReadLimit(self) -> ReadLimit:
        """The connector's limit. PySpark has no CompositeReadLimit (it hands a source back only ReadAllAvailable,
        ReadMinRows, ReadMaxRows, ReadMaxFiles or ReadMaxBytes) and its ReadMinRows carries no maxTriggerDelay:
        where the connector answers minRows(min, delay), alone or with maxRows(max), this answers ReadMinRows(min)
        and latestOffset takes the delay and the max from the options."""
        options = self.options
        if options.min_offsets_per_trigger is not None:
            return ReadMinRows(options.min_offsets_per_trigger)
        if options.max_offsets_per_trigger is not None:
            return ReadMaxRows(options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        cluster = self.cluster
        wanted = self.options.partitions_in(cluster.refresh())
        self._available_now = {tp: offset for tp, (offset, _) in cluster.list_offsets(wanted, LATEST).items()}

    def initialOffset(self) -> dict[str, Any]:
        cluster = self.cluster
        wanted = self.options.partitions_in(cluster.refresh())
        positions = starting_positions(cluster, self.options, wanted)
        log_starts = {tp: offset for tp, (offset, _) in cluster.list_offsets(wanted, EARLIEST).items()}
        epochs = cluster.epochs_before({tp: p.offset for tp, p in positions.items() if p.leader_epoch < 0},
                                       log_starts)
        return offsets_to_json({tp: Position(p.offset, epochs.get(tp, p.leader_epoch))
                                for tp, p in positions.items()})

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        stored, _ = offsets_from_json(start)
        cluster = self.cluster
        wanted = self.options.partitions_in(cluster.refresh())
        if not set(stored) <= set(wanted):  # gone, or a metadata answer caught mid-change: ask once more
            time.sleep(BACKOFF_S)
            wanted = self.options.partitions_in(cluster.refresh())
        self._drop_deleted(stored, set(wanted))
        log_starts = {tp: offset for tp, (offset, _) in cluster.list_offsets(wanted, EARLIEST).items()}
        high_watermarks = {tp: offset for tp, (offset, _) in cluster.list_offsets(wanted, LATEST).items()}
        froms, known = self._validate(cluster, stored, wanted, log_starts, high_watermarks)
        ends = {tp: max(froms[tp].offset, self._cap(tp, high_watermarks[tp], froms[tp].offset)) for tp in wanted}
        min_rows, max_rows = self._limits(limit)
        if min_rows is not None and self._delay_batch(min_rows, froms, ends):
            return start
        if max_rows is not None:
            ends = prorate({tp: froms[tp].offset for tp in wanted}, ends, max_rows)
        moved = {tp: end for tp, end in ends.items() if end != froms[tp].offset}
        epochs = cluster.epochs_before(moved, log_starts, known)
        end_positions = {tp: Position(end, epochs[tp]) if tp in moved else froms[tp] for tp, end in ends.items()}
        read_from = {tp: position for tp, position in froms.items() if stored.get(tp) != position}
        return offsets_to_json(end_positions, read_from)

    def _limits(self, limit: ReadLimit) -> tuple[int | None, int | None]:
        """(the minimum, the maximum) of offsets a micro-batch reads under `limit`. ReadAllAvailable
        (Trigger.Once) has neither. Trigger.AvailableNow has no minimum: its query ends at the first trigger that
        answers its start, so a skipped trigger would end it with records unread."""
        if isinstance(limit, ReadMaxRows):
            return None, limit.max_rows
        if isinstance(limit, ReadMinRows):  # stands for the connector's composite (getDefaultReadLimit)
            return (None if self._available_now is not None else limit.min_rows), self.options.max_offsets_per_trigger
        return None, None

    def _delay_batch(self, min_rows: int, froms: Offsets, ends: dict[TopicPartition, int]) -> bool:
        """Whether minOffsetsPerTrigger skips this trigger (the connector's delayBatch; see the module's rules)."""
        now = time.monotonic()
        waiting = sum(end - froms[tp].offset for tp, end in ends.items())
        if (self._last_trigger is not None and now - self._last_trigger < self.options.max_trigger_delay_ms / 1000
                and waiting < min_rows):
            log.debug("%s: %d offsets waiting, fewer than minOffsetsPerTrigger %d: skipping this trigger", NAME,
                      waiting, min_rows)
            return True
        self._last_trigger = now
        return False

    def _cap(self, tp: TopicPartition, high_watermark: int, start: int) -> int:
        """Trigger.AvailableNow reads nothing newer than the query's start (not even a partition made since)."""
        if self._available_now is None:
            return high_watermark
        return min(high_watermark, self._available_now.get(tp, start))

    def _drop_deleted(self, stored: Offsets, current: set[TopicPartition]) -> None:
        if gone := sorted(tp for tp in stored if tp not in current):
            names = ", ".join(f"{t}-{p} (at offset {stored[(t, p)].offset})" for t, p in gone)
            self._data_loss(f"{names}: no longer in the cluster (topic deleted?)", "stops reading them")

    def _validate(self, cluster: Cluster, stored: Offsets, wanted: list[TopicPartition],
                  log_starts: dict[TopicPartition, int], high_watermarks: dict[TopicPartition, int]
                  ) -> tuple[Offsets, dict[TopicPartition, tuple[int, int, int]]]:
        """Where each partition's next batch starts, after checking the stored positions with the leader; and
        the epochs known to cover [position - 1, epoch end) (for Cluster.epochs_before)."""
        checked = {tp: position.leader_epoch for tp, position in stored.items()
                   if tp in log_starts and position.leader_epoch >= 0}
        epoch_ends = cluster.end_offsets_for_epochs(checked) if checked else {}
        froms: Offsets = {}
        known: dict[TopicPartition, tuple[int, int, int]] = {}
        for tp in wanted:
            position, log_start = stored.get(tp), log_starts[tp]
            if position is None:
                log.info("%s: %s-%d is new: reading it from its log start %d", NAME, tp[0], tp[1], log_start)
                froms[tp] = Position(log_start)
                continue
            epoch, epoch_end = epoch_ends.get(tp, (position.leader_epoch, -1))
            if tp in epoch_ends and (epoch < 0 or epoch_end < position.offset):
                divergence = epoch_end if epoch >= 0 else log_start
                self._data_loss(
                    f"{tp[0]}-{tp[1]}: the stored offset {position.offset} (leader epoch {position.leader_epoch}) "
                    f"is past the end of that epoch in the leader's log: the log diverged at offset {divergence} "
                    f"(an unclean leader election truncated records already read; offsets {divergence} and up "
                    "may now hold other records)", f"resumes at offset {divergence}")
                froms[tp] = Position(divergence, epoch if divergence > log_start else -1)
            elif position.offset < log_start:
                self._data_loss(f"{tp[0]}-{tp[1]}: the stored offset {position.offset} (leader epoch "
                                f"{position.leader_epoch}) is below the log start {log_start}: offsets "
                                f"{position.offset} to {log_start - 1} were deleted before being read",
                                f"resumes at offset {log_start}")
                froms[tp] = Position(log_start)
            elif tp not in epoch_ends and position.offset > high_watermarks[tp]:  # no epoch: the offset alone
                self._data_loss(f"{tp[0]}-{tp[1]}: the stored offset {position.offset} is past the log end "
                                f"{high_watermarks[tp]}: the log was truncated", "resumes at the log end")
                froms[tp] = Position(high_watermarks[tp])
            else:
                froms[tp] = position
                if tp in epoch_ends and epoch == position.leader_epoch:
                    known[tp] = (epoch, position.offset - 1, epoch_end)
        return froms, known

    def _data_loss(self, facts: str, resumes: str) -> None:
        if self.options.fail_on_data_loss:
            raise DataLossError(f"{NAME}: data loss: {facts}. Set failOnDataLoss=false to go on (it {resumes}).")
        log.warning("%s: data loss: %s; failOnDataLoss=false: it %s", NAME, facts, resumes)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        starts, _ = offsets_from_json(start)
        ends, read_from = offsets_from_json(end)
        ranges = []
        for tp, until in ends.items():
            begin = read_from.get(tp) or starts.get(tp) or Position(0)
            ranges.append(Range(tp[0], tp[1], begin.offset, until.offset, begin.leader_epoch, until.leader_epoch))
        return tasks(self.options, ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(partition)


def prorate(starts: dict[TopicPartition, int], ends: dict[TopicPartition, int], limit: int
            ) -> dict[TopicPartition, int]:
    """At most about `limit` records in all, each partition getting its share of what is waiting (at least one
    record where it has some), as the connector's maxOffsetsPerTrigger does."""
    waiting = {tp: ends[tp] - starts[tp] for tp in ends}
    total = sum(waiting.values())
    if total <= limit:
        return ends
    capped = {}
    for tp, size in waiting.items():
        share = limit * size / total
        capped[tp] = starts[tp] + min(size, math.ceil(share) if share < 1 else math.floor(share))
    return capped
