"""Storage benchmark: PartitionLog.append_as_leader against plain sequential writes of the same
bytes, at 16 KiB and 1 MiB batches, and read + os.sendfile to a loopback socket.

The baseline writes the already-built batches with os.pwrite, one write per batch, to a fresh file:
the most a Python process can get from the page cache. The append path adds what the broker must do:
frame and CRC-check every batch, stamp offset and epoch, write, maintain indexes and epoch cache.
Two modes: page cache only (Kafka's default flush policy; the harshest comparison, as it exposes
every microsecond of Python) and durable (one fsync at the end of each run, inside the timing).
Each figure is the best of --runs, alternating which side goes first.
Run: ``.venv/bin/python -m bench.bench_storage [--mib N] [--runs N]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import tempfile
import threading
import time

from epoch_broker.protocol.records import build_batch
from epoch_broker.storage.log import LogConfig, PartitionLog


def make_batch(batch_bytes: int) -> bytearray:
    record = os.urandom(1000)
    count = max(1, batch_bytes // 1030)
    return build_batch([(None, record, [], 1_700_000_000_000)] * count)


def baseline(path: str, buf: bytearray, total: int, durable: bool) -> float:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    position = 0
    os.sync()  # start from a quiet page cache: the previous run's writeback skews the next one
    start = time.perf_counter()
    while position < total:
        os.pwrite(fd, buf, position)
        position += len(buf)
    if durable:
        os.fsync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    os.remove(path)
    return position / elapsed


def appends(directory: str, buf: bytearray, total: int, durable: bool) -> tuple[float, PartitionLog]:
    log = PartitionLog.open(directory, LogConfig())
    written = 0
    os.sync()
    start = time.perf_counter()
    while written < total:
        log.append_as_leader(buf, 1)
        written += len(buf)
    if durable:
        log.flush()
    return written / (time.perf_counter() - start), log


def sendfile_read(log: PartitionLog, fetch_bytes: int) -> float:
    server = socket.create_server(("127.0.0.1", 0))
    out = socket.create_connection(server.getsockname())
    inbound, _ = server.accept()
    received = [0]

    def drain() -> None:
        while chunk := inbound.recv(1 << 20):
            received[0] += len(chunk)

    thread = threading.Thread(target=drain)
    thread.start()
    offset = log.log_start_offset
    sent = 0
    start = time.perf_counter()
    while offset < log.log_end_offset:
        result = log.read(offset, fetch_bytes)
        for piece in result.slices:
            done = 0
            while done < piece.size:
                done += os.sendfile(out.fileno(), piece.fd, piece.position + done, piece.size - done)
        sent += result.size
        offset = result.next_offset
    out.shutdown(socket.SHUT_WR)
    thread.join()
    elapsed = time.perf_counter() - start
    for s in (out, inbound, server):
        s.close()
    assert received[0] == sent
    return sent / elapsed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=128, help="MiB written per measurement")
    parser.add_argument("--runs", type=int, default=7, help="repetitions; the best run is reported")
    args = parser.parse_args(argv)
    total = args.mib << 20
    root = tempfile.mkdtemp(prefix="bench-storage-")
    try:
        log = None
        for durable in (False, True):
            mode = "durable (fsync at the end, timed)" if durable else "page cache (no fsync)"
            print(f"\n{mode}\n{'batch':>8} {'plain write MB/s':>17} {'append MB/s':>12} {'ratio':>6}")
            for label, size in (("16 KiB", 16 << 10), ("1 MiB", 1 << 20)):
                buf = make_batch(size)
                best_plain = best_append = 0.0
                for run in range(args.runs):
                    if log is not None:
                        log.close()
                        shutil.rmtree(log.directory)
                    plain_path = os.path.join(root, f"plain-{run}")
                    log_path = os.path.join(root, f"log-{size}-{run}")
                    # Alternate the order so neither side always follows the other's writeback.
                    if run % 2:
                        rate, log = appends(log_path, buf, total, durable)
                        best_plain = max(best_plain, baseline(plain_path, buf, total, durable))
                    else:
                        best_plain = max(best_plain, baseline(plain_path, buf, total, durable))
                        rate, log = appends(log_path, buf, total, durable)
                    best_append = max(best_append, rate)
                ratio = best_append / best_plain
                print(f"{label:>8} {best_plain / 1e6:>17.0f} {best_append / 1e6:>12.0f} {ratio:>6.2f}")
        assert log is not None
        rate = sendfile_read(log, 1 << 20)
        print(f"\nread + sendfile (1 MiB fetches of the last log) to loopback: {rate / 1e6:.0f} MB/s")
        log.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
