"""The process's open-files limit, shared between partition logs and client connections.

Rules:
- At start the soft limit (ulimit -n) is raised to the hard limit, as far as the system allows.
- Logs come first: a start whose logs alone would not fit (with `HEADROOM` left for checkpoints, the metadata
  store, the controller connection) stops with one line naming the limit and what it should be.
- A new log is opened only while it fits beside the logs and the connections open now; a connection is
  accepted only while it fits beside the logs: a flood of idle connections can no longer make checkpoint
  writes fail, and a topic with too many partitions for this broker leaves them offline here, with an
  ERROR, rather than a broker that cannot open files.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable

from epoch_broker.storage.log_manager import FILES_PER_SEGMENT

HEADROOM = 128  # checkpoints (tmp + rename), the metadata store, the controller link, snapshots, logs rolling
RECOUNT_S = 1.0  # the logs' open files are counted again at most once a second for connection checks


def raise_open_files_limit() -> int:
    """Raise the soft open-files limit to the hard one; returns the limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass  # keep the soft limit we have
    return soft


class FileBudget:
    def __init__(self, limit: int, log_files: Callable[[], int], connections: Callable[[], int]) -> None:
        self.limit = limit
        self.log_files = log_files
        self.connections = connections
        self._counted_at = -RECOUNT_S
        self._log_files = 0

    def logs_fit(self, files: int | None = None) -> str | None:
        """None if the logs' open files (by default: those open now) fit the limit with headroom, else the one
        line to stop with."""
        files = self.log_files() if files is None else files
        if files + HEADROOM <= self.limit:
            return None
        return (f"the partition logs hold {files} open files and the open-files limit (ulimit -n) is {self.limit}: "
                f"raise it to at least {files + HEADROOM + 1024}")

    def connections_allowed(self) -> int:
        now = time.monotonic()
        if now - self._counted_at >= RECOUNT_S:
            self._counted_at, self._log_files = now, self.log_files()
        return self.limit - HEADROOM - self._log_files

    def can_open_log(self) -> bool:
        self._counted_at = -RECOUNT_S  # the next connection check counts again
        return self.log_files() + self.connections() + FILES_PER_SEGMENT + HEADROOM <= self.limit
