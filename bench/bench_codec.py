"""Codec benchmark: microseconds per operation for the four messages on the broker's hot paths.

- decode a Produce v9 request carrying one 1 MiB record batch (the records stay a view into the frame),
- decode a Fetch v12 request for 10 partitions,
- encode a Fetch v12 response for 10 partitions of 1 MiB record slices (slices passed through as parts),
- encode a Metadata v12 response for 100 partitions.

Run: `.venv/bin/python -m bench.bench_codec`.
"""

from __future__ import annotations

import sys
import timeit
from collections.abc import Callable

from epoch_broker.protocol.messages import fetch, metadata, produce
from epoch_broker.protocol.records import build_batch

MiB = 1024 * 1024


def _produce_frame() -> tuple[bytes, int]:
    value = b"x" * (MiB - 200)
    batch = bytes(build_batch([(None, value, [], 0)]))
    req = produce.REQUEST.cls(
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            produce.REQUEST.TopicProduceData(
                name="bench", partition_data=[produce.REQUEST.PartitionProduceData(index=0, records=batch)]
            )
        ],
    )
    return produce.REQUEST.encode(req, 9), 9


def _fetch_request_frame() -> tuple[bytes, int]:
    partitions = [
        fetch.REQUEST.FetchPartition(
            partition=i, current_leader_epoch=3, fetch_offset=1000 * i, partition_max_bytes=MiB
        )
        for i in range(10)
    ]
    req = fetch.REQUEST.cls(
        max_wait_ms=500, min_bytes=1, topics=[fetch.REQUEST.FetchTopic(topic="bench", partitions=partitions)]
    )
    return fetch.REQUEST.encode(req, 12), 12


def _fetch_response() -> object:
    records = memoryview(bytearray(MiB))
    partitions = [
        fetch.RESPONSE.PartitionData(partition_index=i, high_watermark=10_000, log_start_offset=0, records=records)
        for i in range(10)
    ]
    return fetch.RESPONSE.cls(responses=[fetch.RESPONSE.FetchableTopicResponse(topic="bench", partitions=partitions)])


def _metadata_response() -> object:
    r = metadata.RESPONSE
    partitions = [
        r.MetadataResponsePartition(
            partition_index=i, leader_id=i % 3, leader_epoch=7, replica_nodes=[0, 1, 2], isr_nodes=[0, 1, 2]
        )
        for i in range(100)
    ]
    brokers = [r.MetadataResponseBroker(node_id=n, host="127.0.0.1", port=9092 + n) for n in range(3)]
    return r.cls(
        brokers=brokers,
        cluster_id="bench",
        controller_id=0,
        topics=[r.MetadataResponseTopic(name="bench", topic_id=b"\x01" * 16, partitions=partitions)],
    )


def measure(fn: Callable[[], object], min_time: float = 0.3) -> float:
    """Microseconds per call: best of 5 repeats, each running long enough to be stable."""
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    number = max(number, int(number * min_time / 0.2))
    return min(timer.repeat(5, number)) / number * 1e6


def run() -> list[tuple[str, float]]:
    produce_frame, pv = _produce_frame()
    fetch_frame, fv = _fetch_request_frame()
    fetch_resp = _fetch_response()
    meta_resp = _metadata_response()
    decoded = produce.REQUEST.decode(produce_frame, pv)
    records = decoded.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is not None, "records must be a view, not a copy"
    return [
        ("decode Produce v9, one 1 MiB batch", measure(lambda: produce.REQUEST.decode(produce_frame, pv))),
        ("decode Fetch v12 request, 10 partitions", measure(lambda: fetch.REQUEST.decode(fetch_frame, fv))),
        (
            "encode Fetch v12 response, 10 x 1 MiB slices (parts)",
            measure(lambda: fetch.RESPONSE.encode_parts(fetch_resp, 12)),
        ),
        ("encode Metadata v12 response, 100 partitions", measure(lambda: metadata.RESPONSE.encode(meta_resp, 12))),
    ]


def main() -> None:
    print("codec benchmark (microseconds per operation, best of 5)")
    for name, micros in run():
        print(f"  {name:<55} {micros:10.1f} us")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
