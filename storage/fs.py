"""The file-system seam: every byte storage/ writes goes through a FileSystem.

Rules:
- Storage code never calls ``os`` for writes directly; it calls these methods, so a
  FaultyFileSystem can tear a write, lose what was not fsynced, fail an fsync or run out of space.
- Every FileSystem carries ``DiskFaults``: switches a running broker turns on from outside
  (broker/faults.py: ``fault.disk.full``, ``fault.disk.fsync.failing``). Off, they cost one attribute read.
- File handles are plain OS file descriptors, so reads can use ``os.pread`` and ``os.sendfile``.
- ``write_atomic`` is the one way to replace a small file (checkpoints, snapshots, markers):
  temp file, fsync, rename over the target, fsync the directory.
"""

from __future__ import annotations

import errno
import os
import shutil
from dataclasses import dataclass


class SimulatedCrash(Exception):
    """Raised by FaultyFileSystem where the process would have died (torn write)."""


@dataclass(slots=True)
class DiskFaults:
    """Disk failures switched on at run time: a full disk (writes fail with ENOSPC, nothing of them written)
    and a failing disk (fsync fails with EIO)."""

    full: bool = False
    fsync_failing: bool = False


class FileSystem:
    """The real file system."""

    def __init__(self, disk_faults: DiskFaults | None = None) -> None:
        self.disk_faults = disk_faults or DiskFaults()

    def open(self, path: str, *, create: bool = True) -> int:
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        return os.open(path, flags, 0o644)

    def close(self, fd: int) -> None:
        os.close(fd)

    def write(self, fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
        """Write all of ``data`` at ``position`` (looping over short writes)."""
        if self.disk_faults.full:
            raise OSError(errno.ENOSPC, "injected: no space left on device (fault.disk.full)")
        view = memoryview(data)
        while view:
            written = os.pwrite(fd, view, position)
            view = view[written:]
            position += written

    def fsync(self, fd: int) -> None:
        if self.disk_faults.fsync_failing:
            raise OSError(errno.EIO, "injected fsync failure (fault.disk.fsync.failing)")
        os.fsync(fd)

    def truncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def size(self, fd: int) -> int:
        return os.fstat(fd).st_size

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def remove(self, path: str) -> None:
        os.remove(path)

    def rmtree(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def read_file(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def write_atomic(self, path: str, data: bytes) -> None:
        """Replace ``path`` with ``data`` so a crash leaves either the old or the new content."""
        tmp = path + ".tmp"
        fd = self.open(tmp)
        try:
            self.truncate(fd, 0)
            self.write(fd, data, 0)
            self.fsync(fd)
        finally:
            self.close(fd)
        self.rename(tmp, path)
        self.fsync_dir(os.path.dirname(path) or ".")


@dataclass
class _Tracked:
    path: str
    synced_size: int


class FaultyFileSystem(FileSystem):
    """A real file system with injectable faults, for crash tests and drills.

    Model of durability: a file's durable length is its length at its last fsync (0 if never
    synced); ``crash()`` cuts every file written since back to that length, as a power loss would.
    Renames and directory entries are treated as durable at once (ext4's rename-over behaviour),
    which keeps the model simple and is what write_atomic relies on anyway after its fsyncs.
    """

    def __init__(self) -> None:
        super().__init__()
        self.tear_next_write_at: int | None = None  # bytes of the next write that reach disk
        self.space_left: int | None = None  # bytes that still fit; None means unlimited
        self._fds: dict[int, _Tracked] = {}
        self._dirty: dict[str, int] = {}  # path -> durable size, for files written since fsync

    def open(self, path: str, *, create: bool = True) -> int:
        existed = os.path.exists(path)
        fd = super().open(path, create=create)
        if not existed:
            self._dirty.setdefault(path, 0)
        self._fds[fd] = _Tracked(path, self._dirty.get(path, os.fstat(fd).st_size))
        return fd

    def close(self, fd: int) -> None:
        self._fds.pop(fd, None)
        super().close(fd)

    def write(self, fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
        tracked = self._fds[fd]
        self._dirty.setdefault(tracked.path, tracked.synced_size)
        data = memoryview(data)
        if self.space_left is not None:
            if len(data) > self.space_left:
                # A full disk takes the bytes that fit, then refuses the rest.
                super().write(fd, data[: self.space_left], position)
                self.space_left = 0
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self.space_left -= len(data)
        if self.tear_next_write_at is not None:
            keep, self.tear_next_write_at = self.tear_next_write_at, None
            super().write(fd, data[:keep], position)
            raise SimulatedCrash(f"torn write: {keep} of {len(data)} bytes reached the disk")
        super().write(fd, data, position)

    def truncate(self, fd: int, size: int) -> None:
        tracked = self._fds[fd]
        durable = self._dirty.get(tracked.path, tracked.synced_size)
        self._dirty[tracked.path] = min(durable, size)
        super().truncate(fd, size)

    def fsync(self, fd: int) -> None:
        super().fsync(fd)
        tracked = self._fds[fd]
        tracked.synced_size = os.fstat(fd).st_size
        self._dirty.pop(tracked.path, None)
        for other in self._fds.values():
            if other.path == tracked.path:
                other.synced_size = tracked.synced_size

    def rename(self, src: str, dst: str) -> None:
        super().rename(src, dst)
        if src in self._dirty:
            self._dirty[dst] = self._dirty.pop(src)
        else:
            self._dirty.pop(dst, None)

    def remove(self, path: str) -> None:
        super().remove(path)
        self._dirty.pop(path, None)

    def crash(self) -> None:
        """Lose every byte not fsynced. Call after the code under test has dropped its handles."""
        for fd in list(self._fds):
            super().close(fd)
        self._fds.clear()
        for path, durable in self._dirty.items():
            if os.path.exists(path) and os.path.getsize(path) > durable:
                os.truncate(path, durable)
        self._dirty.clear()
        self.tear_next_write_at = None
        self.disk_faults.fsync_failing = False
        self.space_left = None
