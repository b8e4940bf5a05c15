"""Child process of the SIGKILL crash test: appends deterministic batches to one partition forever.

Batch number i always holds the same records (see ``records_for``), so the parent can check that the
recovered log is a prefix of the endless sequence. The epoch rises every 7 batches; every append
may roll segments (small segment.bytes); the LogManager checkpoints now and then.
"""

from __future__ import annotations

import random
import sys

from epoch_broker.protocol.records import build_batch
from epoch_broker.storage.log import LogConfig
from epoch_broker.storage.log_manager import LogManager

CONFIG = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=1024)


def records_for(i: int) -> list[tuple[bytes, bytes, list[tuple[str, bytes]], int]]:
    size = 20_000 if i % 5 == 0 else 100
    return [(b"%d" % i, bytes([i % 251]) * size, [("i", b"%d" % i)], 1_000 + i)] * (1 + i % 3)


def epoch_for(i: int) -> int:
    return i // 7


def batches_below(offset: int) -> int:
    """How many of the sequence's batches end at ``offset`` (always a batch boundary)."""
    count = end = 0
    while end < offset:
        end += 1 + count % 3
        count += 1
    return count


def main(log_dir: str, seed: int) -> None:
    rng = random.Random(seed)
    manager = LogManager.open([log_dir], CONFIG)
    log = manager.get_or_create_log("crash", 0)
    count = batches_below(log.log_end_offset)
    print("ready", flush=True)
    while True:
        n = rng.randint(1, 3)
        buf = bytearray()
        for i in range(count, count + n):
            if epoch_for(i) != epoch_for(count):
                break
            buf += build_batch(records_for(i))
            n = i - count + 1
        log.append_as_leader(buf, epoch_for(count))
        count += n
        if rng.random() < 0.1:
            log.flush()
        if rng.random() < 0.1:
            manager.checkpoint()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
