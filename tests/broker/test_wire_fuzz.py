"""A structure-aware fuzzer on the wire (issue 17): seeded frames for every API and version the broker
advertises, from valid requests (test_roundtrip's samples) mutated by bit flips, overwrites, truncation,
extension and wrong versions, written to a real broker process over several connections.

Asserted: the broker answers or closes the connection for every frame, and afterwards it is alive (answers
Metadata), logged no traceback, its memory stayed bounded, and every batch in its logs is valid (rejected
input never reached a log). CI replays 100,000 frames; `make test-nightly` replays 1,000,000 (FUZZ_FRAMES
and FUZZ_SEED override both; a failure prints the seed to replay).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import struct
import time
from pathlib import Path

import psutil
import pytest

from epoch_broker.client.aio import KafkaClient
from epoch_broker.protocol.headers import encode_request_header
from epoch_broker.protocol.messages import APIS, metadata
from epoch_broker.protocol.record_scan import scan_records
from epoch_broker.protocol.records import batch_body, iter_batches, validate_batch
from tests.helpers import BrokerProcess, start_broker
from tests.protocol.test_roundtrip import sample

CI_FRAMES = 100_000
NIGHTLY_FRAMES = 1_000_000
CONNECTIONS = 8
# A mutated request may legitimately wait long (a Fetch whose max_wait_ms became 2^31, a JoinGroup waiting for
# a rebalance): after this the fuzzer gives up on it and its connection, and the broker must still answer a
# probe at once; only APIs that can wait may be abandoned.
PATIENCE_S = 2.0
MAY_WAIT = {0, 1, 11, 14}  # Produce (acks=all), Fetch, JoinGroup, SyncGroup
RSS_GROWTH_LIMIT = 200 << 20


def seeds(served: dict[int, tuple[int, int]]) -> list[tuple[int, int, bytes]]:
    """(api key, version, valid request body) for every advertised API and version."""
    found = []
    for key, (low, high) in sorted(served.items()):
        api = APIS[key]
        for version in range(low, high + 1):
            for variant in ("values", "empties"):
                body = sample(api.request, api.request.fields, api.request.cls, version, variant, itertools.count(1))
                if hasattr(body, "max_wait_ms"):
                    body.max_wait_ms = 0  # no long polls: the fuzzer measures input handling, not waiting
                if hasattr(body, "timeout_ms"):
                    body.timeout_ms = 0
                found.append((key, version, api.request.encode(body, version)))
    return found


def mutate(rng: random.Random, key: int, version: int, body: bytes, correlation_id: int) -> bytes:
    """One framed request: the seed as it is (a quarter of them), or mutated."""
    api = APIS[key]
    choice = rng.randrange(8)
    if choice == 1 and body:  # bit flips
        data = bytearray(body)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        body = bytes(data)
    elif choice == 2 and body:  # overwrite a run with extreme values (lengths, counts)
        data = bytearray(body)
        at = rng.randrange(len(data))
        data[at:at + 4] = rng.choice([b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\0\0\0\0"])
        body = bytes(data)
    elif choice == 3:  # truncated
        body = body[:rng.randrange(len(body) + 1)]
    elif choice == 4:  # extended
        body = body + rng.randbytes(rng.randint(1, 64))
    elif choice == 5:  # random bytes
        body = rng.randbytes(rng.randint(0, 256))
    elif choice == 6:  # a version next to the served ones
        version = rng.choice([version - 1, version + 1, 99, -1])
    header = encode_request_header(key, version & 0x7FFF, correlation_id, "fuzz",
                                   api.request_header_version(version) if version in api.versions else 1)
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


async def worker(port: int, frames: list[bytes], counts: dict[str, int], waited: list[int]) -> None:
    """Send each frame and wait for its answer or the connection's end (then reconnect)."""
    reader = writer = None
    for frame in frames:
        if writer is None:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert reader is not None
        writer.write(frame)
        try:
            size_bytes = await asyncio.wait_for(reader.readexactly(4), PATIENCE_S)
            (size,) = struct.unpack(">i", size_bytes)
            await asyncio.wait_for(reader.readexactly(size), PATIENCE_S)
            counts["answered"] += 1
            continue
        except (asyncio.IncompleteReadError, ConnectionError):
            counts["closed"] += 1
        except TimeoutError:
            counts["waiting"] += 1
            waited.append(struct.unpack_from(">h", frame, 4)[0])
        writer.close()
        reader = writer = None
    if writer is not None:
        writer.close()


async def probe(port: int, stop: asyncio.Event, latencies: list[float]) -> None:
    """Another client asking Metadata every 100 ms while the fuzzer runs: the broker never stalls."""
    async with await KafkaClient.connect(f"127.0.0.1:{port}") as client:
        await client.negotiate()
        while not stop.is_set():
            started = time.monotonic()
            await asyncio.wait_for(client.request(metadata.API, 12, metadata.REQUEST.cls(topics=[])), 10)
            latencies.append(time.monotonic() - started)
            await asyncio.sleep(0.1)  # paces the probe, which waits for nothing: it measures


def stored_batches_are_valid(data_dir: Path) -> int:
    checked = 0
    for segment in data_dir.glob("*/*.log"):
        data = segment.read_bytes()
        for position, header in iter_batches(data):
            validate_batch(data, position, header)
            if not header.is_control:
                scan_records(batch_body(data, position, header), header)
            checked += 1
    return checked


async def fuzz(tmp_path: Path, frames_total: int) -> None:
    seed = int(os.environ.get("FUZZ_SEED", "20261124"))
    frames_total = int(os.environ.get("FUZZ_FRAMES", frames_total))
    print(f"FUZZ_SEED={seed} FUZZ_FRAMES={frames_total}")  # shown on failure: replay with them
    process: BrokerProcess = start_broker(tmp_path, {"auto.create.topics.enable": "false",
                                                     "offsets.topic.num.partitions": "1"})
    try:
        async with await KafkaClient.connect(process.bootstrap) as client:
            served = await client.negotiate()
        rng = random.Random(seed)
        pool = seeds(served)
        frames = [mutate(rng, *rng.choice(pool), correlation_id=i) for i in range(frames_total)]
        baseline = psutil.Process(process.pid).memory_info().rss
        counts = {"answered": 0, "closed": 0, "waiting": 0}
        waited: list[int] = []
        latencies: list[float] = []
        stop = asyncio.Event()
        prober = asyncio.create_task(probe(process.port, stop, latencies))
        started = time.monotonic()
        await asyncio.gather(*(worker(process.port, frames[i::CONNECTIONS], counts, waited)
                               for i in range(CONNECTIONS)))
        stop.set()
        await prober  # raises if a probe went unanswered for 10 s
        print(f"{frames_total} frames in {time.monotonic() - started:.0f} s: {counts}; waiting by API key: "
              f"{sorted(set(waited))}; probe max {max(latencies, default=0) * 1000:.0f} ms")
        assert sum(counts.values()) == frames_total
        assert set(waited) <= MAY_WAIT, f"requests that never ended: API keys {sorted(set(waited) - MAY_WAIT)}"
        assert psutil.Process(process.pid).memory_info().rss - baseline < RSS_GROWTH_LIMIT
        async with await KafkaClient.connect(process.bootstrap) as client:
            await client.negotiate()
            assert (await client.request(metadata.API, 12, metadata.REQUEST.cls(topics=None))).brokers
    finally:
        assert process.stop() == 0, "the broker did not stop cleanly"
    log_text = process.log_path.read_text()
    assert "Traceback" not in log_text and "request failed" not in log_text
    print(f"{stored_batches_are_valid(process.data_dir)} stored batches, all valid")


@pytest.mark.slow
async def test_a_hundred_thousand_fuzzed_frames_leave_the_broker_alive_and_its_logs_valid(tmp_path: Path) -> None:
    await fuzz(tmp_path, CI_FRAMES)


@pytest.mark.nightly
async def test_a_million_fuzzed_frames_leave_the_broker_alive_and_its_logs_valid(tmp_path: Path) -> None:
    await fuzz(tmp_path, NIGHTLY_FRAMES)
