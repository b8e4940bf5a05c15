"""All partition logs of a broker, across its log directories.

Layout of each log directory::

    <topic>-<partition>/                  one PartitionLog (storage.log)
    <topic>-<partition>.<hex>-delete/     a partition being deleted (removed at the next start)
    replication-offset-checkpoint         high watermarks       "topic partition offset" lines
    recovery-point-offset-checkpoint      recovery points       (format: storage.checkpoint)
    log-start-offset-checkpoint           log start offsets
    cleaner-offset-checkpoint             first dirty offsets of the compacted logs (storage.log_cleaner)
    .kafka_cleanshutdown                  present only between a clean shutdown and the next start

Rules:
- Start: if the clean-shutdown marker is present, logs open without scanning; it is removed
  before anything is written, so a crash from then on is treated as unclean at the next start.
  Otherwise every log recovers from its checkpointed recovery point.
- Delete: rename the directory to ``...-delete`` (one atomic step), then remove it; a crash in
  between leaves a ``-delete`` directory that the next start removes.
- Checkpoints are written atomically; a missing or corrupt one reads as empty (recovery point 0:
  the log rescans; high watermark 0: replication re-advances it; first dirty offset 0: the log is cleaned again
  from its start).
- Cleaning (storage.log_cleaner): `cleanings` yields the cleanings due, one log at a time, planned when reached;
  the caller runs each (`Cleaning.run`, in a worker thread: the broker's maintenance) and hands it back to
  `finish_cleaning`, which swaps it in, writes the log dir's cleaner checkpoint and logs one INFO line.
  `clean_now` does a whole pass in the calling thread. A shutdown aborts the cleaning in progress.
"""

from __future__ import annotations

import logging
import math
import os
import uuid
from collections.abc import Callable, Iterator

from epoch_broker.storage.checkpoint import CheckpointFile
from epoch_broker.storage.fs import FileSystem
from epoch_broker.storage.log import LogConfig, PartitionLog, wall_clock_ms
from epoch_broker.storage.log_cleaner import CleanerStats, Cleaning, cleanable_range, plan
from epoch_broker.storage.log_validator import LONG_MAX

logger = logging.getLogger(__name__)  # `log` names a PartitionLog here

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
HIGH_WATERMARK_FILE = "replication-offset-checkpoint"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
CLEANER_OFFSET_FILE = "cleaner-offset-checkpoint"
DELETE_SUFFIX = "-delete"
# what takes the place of an unusable checkpoint of the log dir (CheckpointFile's warning says it)
_FALLBACKS = {
    HIGH_WATERMARK_FILE: "high watermarks start at the log start (followers and the leader move them again)",
    RECOVERY_POINT_FILE: "every log is recovered from its first segment",
    LOG_START_FILE: "log start offsets are taken from the first segments",
    CLEANER_OFFSET_FILE: "compacted logs are cleaned again from their start",
}
STRAY_SUFFIX = "-stray"  # a partition this broker no longer hosts, kept for the operator (never loaded)

TopicPartition = tuple[str, int]


def parse_dir_name(name: str) -> TopicPartition | None:
    """``my-topic-3`` -> ("my-topic", 3); topic names may contain '-', the partition never."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


FILES_PER_SEGMENT = 3  # .log, .index, .timeindex


class LogManager:
    def __init__(
        self,
        log_dirs: list[str],
        config: LogConfig | None = None,
        fs: FileSystem | None = None,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.default_config = config or LogConfig()
        self.fs = fs or FileSystem()
        self.clock = clock
        self.logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        self.was_clean_shutdown: dict[str, bool] = {}
        self._cleaning: Cleaning | None = None  # the last one `cleanings` yielded, until finished
        self._tombstones_expire: dict[TopicPartition, int] = {}  # when a tombstone the last cleaning kept may go

    @classmethod
    def open(
        cls,
        log_dirs: list[str],
        config: LogConfig | None = None,
        fs: FileSystem | None = None,
        topic_configs: dict[str, LogConfig] | None = None,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> LogManager:
        manager = cls(log_dirs, config, fs, clock)
        for log_dir in manager.log_dirs:
            manager._load_dir(log_dir, topic_configs or {})
        return manager

    def _checkpoint(self, log_dir: str, name: str) -> CheckpointFile:
        return CheckpointFile(os.path.join(log_dir, name), self.fs, _FALLBACKS[name])

    def _read_offsets(self, log_dir: str, name: str) -> dict[TopicPartition, int]:
        entries = self._checkpoint(log_dir, name).read((str, int, int)) or []
        return {(topic, partition): offset for topic, partition, offset in entries}

    def _load_dir(self, log_dir: str, topic_configs: dict[str, LogConfig]) -> None:
        self.fs.makedirs(log_dir)
        marker = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
        clean = self.fs.exists(marker)
        self.was_clean_shutdown[log_dir] = clean
        if clean:
            self.fs.remove(marker)
            self.fs.fsync_dir(log_dir)
        recovery_points = self._read_offsets(log_dir, RECOVERY_POINT_FILE)
        log_starts = self._read_offsets(log_dir, LOG_START_FILE)
        high_watermarks = self._read_offsets(log_dir, HIGH_WATERMARK_FILE)
        first_dirty = self._read_offsets(log_dir, CLEANER_OFFSET_FILE)
        for name in sorted(self.fs.listdir(log_dir)):
            path = os.path.join(log_dir, name)
            if name.endswith(DELETE_SUFFIX):
                self.fs.rmtree(path)  # a delete interrupted by a crash
                continue
            tp = parse_dir_name(name)
            if tp is None or not os.path.isdir(path):
                continue
            self.logs[tp] = PartitionLog.open(
                path,
                topic_configs.get(tp[0], self.default_config),
                self.fs,
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=log_starts.get(tp, 0),
                high_watermark=high_watermarks.get(tp, 0),
                first_dirty_offset=first_dirty.get(tp, 0),
                clean_shutdown=clean,
                clock=self.clock,
            )
            self._dir_of[tp] = log_dir

    def logs_in(self, log_dir: str) -> list[tuple[TopicPartition, PartitionLog]]:
        """The partitions whose log lives in `log_dir` (one of `log_dirs`)."""
        return [(tp, self.logs[tp]) for tp, directory in self._dir_of.items() if directory == log_dir]

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        """The log dir (one of `log_dirs`) the partition's log lives in, None if it has none here."""
        return self._dir_of.get((topic, partition))

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get((topic, partition))

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        tp = (topic, partition)
        existing = self.logs.get(tp)
        if existing is not None:
            return existing
        # The log dir holding the fewest partitions gets the new one.
        counts = {d: 0 for d in self.log_dirs}
        for d in self._dir_of.values():
            counts[d] += 1
        log_dir = min(self.log_dirs, key=lambda d: counts[d])
        path = os.path.join(log_dir, f"{topic}-{partition}")
        log = PartitionLog.open(path, config or self.default_config, self.fs, clock=self.clock)
        self.fs.fsync_dir(log_dir)
        self.logs[tp] = log
        self._dir_of[tp] = log_dir
        return log

    def move_stray_log(self, topic: str, partition: int) -> str | None:
        """Close the log and rename its directory `<topic>-<partition>.<id>-stray` (Kafka 3.7's rule): out of
        the broker's sight, never deleted. Returns the new path (None if there is no such log)."""
        tp = (topic, partition)
        log = self.logs.pop(tp, None)
        log_dir = self._dir_of.pop(tp, None)
        if log is None or log_dir is None:
            return None
        log.close()
        stray = os.path.join(log_dir, f"{topic}-{partition}.{uuid.uuid4().hex}{STRAY_SUFFIX}")
        self.fs.rename(log.directory, stray)
        self.fs.fsync_dir(log_dir)
        return stray

    def delete_log(self, topic: str, partition: int) -> None:
        tp = (topic, partition)
        log = self.logs.pop(tp, None)
        log_dir = self._dir_of.pop(tp, None)
        if log is None or log_dir is None:
            return
        log.close_without_flush()
        doomed = os.path.join(log_dir, f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
        self.fs.rename(log.directory, doomed)
        self.fs.fsync_dir(log_dir)
        self.fs.rmtree(doomed)
        self.checkpoint()

    def checkpoint(self) -> None:
        """Write high watermarks, recovery points and log start offsets of every log dir."""
        for log_dir in self.log_dirs:
            mine = sorted((tp, log) for tp, log in self.logs.items() if self._dir_of[tp] == log_dir)
            self._checkpoint(log_dir, HIGH_WATERMARK_FILE).write(
                (t, p, log.high_watermark) for (t, p), log in mine
            )
            self._checkpoint(log_dir, RECOVERY_POINT_FILE).write(
                (t, p, log.recovery_point) for (t, p), log in mine
            )
            self._checkpoint(log_dir, LOG_START_FILE).write(
                (t, p, log.log_start_offset) for (t, p), log in mine
            )
            self._write_cleaner_offsets(log_dir)

    def _write_cleaner_offsets(self, log_dir: str) -> None:
        compacted = sorted((tp, log) for tp, log in self.logs.items()
                           if self._dir_of[tp] == log_dir and "compact" in log.config.cleanup_policy)
        self._checkpoint(log_dir, CLEANER_OFFSET_FILE).write(
            (t, p, log.first_dirty_offset) for (t, p), log in compacted
        )

    def flush_all(self) -> None:
        """Flush every log, then record the new recovery points."""
        for log in self.logs.values():
            log.flush()
        self.checkpoint()

    def maintain(self, now_ms: int | None = None) -> None:
        """Periodic work: flush.ms and retention for every log, then checkpoints."""
        now = self.clock() if now_ms is None else now_ms
        for log in self.logs.values():
            log.maybe_flush(now)
            log.apply_retention(now)
        self.checkpoint()

    # --- cleaning ---------------------------------------------------------------------------------

    def cleanings(self, io_max_bytes_per_second: float = math.inf, force: bool = False
                  ) -> Iterator[tuple[TopicPartition, Cleaning]]:
        """The cleanings due now, dirtiest log first, each planned when the iteration reaches it (on this thread):
        logs whose cleanup.policy holds compact, whose dirty ratio reaches their min.cleanable.dirty.ratio, or whose
        last cleaning kept a tombstone that has expired since; with `force`, every compacted log with something to
        clean. Run each, then give it to `finish_cleaning`, before taking the next."""
        now = self.clock()
        due = []
        for tp, partition_log in self.logs.items():
            if "compact" not in partition_log.config.cleanup_policy or partition_log.offline:
                continue
            cleanable = cleanable_range(partition_log)
            min_ratio = partition_log.config.min_cleanable_dirty_ratio
            dirty = cleanable.dirty_bytes > 0 and cleanable.dirty_ratio >= min_ratio
            if force or dirty or self._tombstones_expire.get(tp, LONG_MAX) <= now:
                due.append((cleanable.dirty_ratio, tp, partition_log))
        for _, tp, partition_log in sorted(due, key=lambda item: -item[0]):
            if self.logs.get(tp) is partition_log and not partition_log.offline:  # not deleted meanwhile
                self._cleaning = plan(partition_log, io_max_bytes_per_second)
                if self._cleaning is not None:
                    yield tp, self._cleaning

    def finish_cleaning(self, tp: TopicPartition, cleaning: Cleaning) -> CleanerStats | None:
        """After `cleaning.run`: swap the cleaned segments in and log what was done; None if nothing was (the run
        failed: WARNING; or the log changed meanwhile)."""
        self._cleaning = None
        name = f"{tp[0]}-{tp[1]}"
        if self.logs.get(tp) is not cleaning.log:  # deleted or moved away while it ran
            cleaning.discard()
            return None
        stats = cleaning.swap()
        if stats is None:
            if cleaning.error is not None:
                logger.warning("cleaning %s failed, its log stays as it was: %s", name, cleaning.error)
            else:
                logger.info("cleaning %s discarded: the log was truncated or taken offline meanwhile", name)
            return None
        expire = cleaning.tombstones_expire_ms
        if expire is None:
            self._tombstones_expire.pop(tp, None)
        else:
            self._tombstones_expire[tp] = expire
        self._write_cleaner_offsets(self._dir_of[tp])
        mib = 1 << 20
        logger.info("cleaned %s below offset %d: %d segments into %d, %.1f MB of log (read %.1f MB, wrote %.1f MB), "
                    "%d of %d records removed, in %.2f s (%.1f MB/s)", name, cleaning.end, stats.segments_read,
                    stats.segments_written, stats.log_bytes / mib, stats.bytes_read / mib, stats.bytes_written / mib,
                    stats.records_removed, stats.records_read, stats.seconds, stats.mb_per_second)
        return stats

    def clean_now(self, io_max_bytes_per_second: float = math.inf) -> list[CleanerStats]:
        """A cleaning pass at once, in this thread, of every compacted log with something to clean, whatever its
        dirty ratio (tests, tools)."""
        done = []
        for tp, cleaning in self.cleanings(io_max_bytes_per_second, force=True):
            cleaning.run()
            if (stats := self.finish_cleaning(tp, cleaning)) is not None:
                done.append(stats)
        return done

    @staticmethod
    def count_partition_dirs(log_dirs: list[str]) -> int:
        """How many partition directories the log dirs hold (before opening any): a start can tell whether the
        open-files limit allows them."""
        return sum(parse_dir_name(name) is not None for log_dir in log_dirs if os.path.isdir(log_dir)
                   for name in os.listdir(log_dir) if os.path.isdir(os.path.join(log_dir, name)))

    def open_files(self) -> int:
        """File descriptors the logs hold: each segment keeps its .log, .index and .timeindex open."""
        return FILES_PER_SEGMENT * sum(len(log.segments) for log in self.logs.values())

    def lose_unflushed_data(self) -> None:
        """A power cut, played on purpose (a fault hook): every log is cut back to its recovery point, the offset
        up to which it was fsynced; nothing else is written, so the next open recovers as after a crash."""
        for log in self.logs.values():
            if log.recovery_point < log.log_end_offset:
                log.truncate_to(max(log.recovery_point, log.log_start_offset))

    def shutdown(self) -> None:
        """Clean shutdown: stop the cleaning in progress, close every log, write checkpoints, then the marker."""
        if self._cleaning is not None:
            self._cleaning.abort()
        for log in self.logs.values():
            log.close()
        self.checkpoint()
        for log_dir in self.log_dirs:
            # A log taken offline by a storage error must be recovered: no marker for its dir.
            if not any(log.offline for tp, log in self.logs.items() if self._dir_of[tp] == log_dir):
                self.fs.write_atomic(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE), b"")
