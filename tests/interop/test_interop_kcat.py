"""kcat 1.7.1 from Debian (librdkafka 2.0.2, Produce v7 / Fetch v11 / ListOffsets v2 / Metadata v4).

What kcat cannot do, and how these tests cover the flow instead:
- no admin API: topics are created by Metadata auto-creation (kcat -L -t on an unknown topic) or,
  where a partition count matters, by confluent-kafka's AdminClient; there is no kcat delete.
- no per-message timestamp or headers on produce: every line gets the same -H headers, and its
  timestamp is set by librdkafka at send time, so it is checked against the send window.
  Records with chosen timestamps (for ListOffsets by time) are written by confluent-kafka.
- Tansu's ApiVersions v3 answer stops librdkafka 2.0.2 connecting ("Read underflow"); ours, feature flags
  included (a broker claiming 4.x), does not (tests/broker/test_kafka_releases.py).
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers import not_yet, wait_for_sync
from tests.interop.support import ACKS, CODECS, Rec, Target, assert_records, kcat_bin, make_records, topic_name

pytestmark = pytest.mark.interop

HEADERS: tuple[tuple[str, bytes], ...] = (("h1", b"one"), ("h2", b"two=2"), ("h1", b"again"))


def kcat(broker: Target, *args: str, stdin: bytes | None = None, timeout: float = 30) -> str:
    proc = subprocess.run([kcat_bin(), "-b", broker.bootstrap, *args], input=stdin, capture_output=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"kcat {' '.join(args)} exited {proc.returncode}: {proc.stderr.decode()[-2000:]}"
    return proc.stdout.decode()


def kcat_records(broker: Target, n: int, tag: str) -> list[Rec]:
    """Printable records (kcat reads lines, key TAB value) that all carry HEADERS."""
    return [Rec(r.key, r.value, HEADERS, 0) for r in make_records(n, tag, text_only=True)]


def kcat_produce(broker: Target, topic: str, recs: list[Rec], *extra: str) -> tuple[int, int]:
    lines = b"".join((r.key or b"") + b"\t" + (r.value or b"") + b"\n" for r in recs)
    headers = [a for name, value in HEADERS for a in ("-H", f"{name}={value.decode()}")]
    start = int(time.time() * 1000)
    kcat(broker, "-P", "-t", topic, "-p", "0", "-K", "\t", *headers, *extra, stdin=lines)
    return start, int(time.time() * 1000)


def kcat_consume(broker: Target, topic: str, n: int, offset: str = "beginning") -> list[Rec]:
    """kcat -C -p 0 -o OFFSET: an assign + seek consumer (no group), JSON envelope per message."""
    out = kcat(broker, "-C", "-t", topic, "-p", "0", "-o", offset, "-c", str(n), "-e", "-J")
    msgs = [json.loads(line) for line in out.splitlines() if line.strip()]
    return [Rec(key=None if m["key"] is None else m["key"].encode(),
                value=None if m["payload"] is None else m["payload"].encode(),
                headers=tuple((h[i], h[i + 1].encode()) for h in [m.get("headers") or []]
                              for i in range(0, len(h), 2)),
                timestamp=m["ts"]) for m in msgs]


def metadata(broker: Target, topic: str | None = None) -> dict[str, Any]:
    args = ["-L", "-J"] + (["-t", topic] if topic else [])
    return dict(json.loads(kcat(broker, *args)))


def auto_create(broker: Target, topic: str) -> None:
    """kcat has no admin API: a Metadata request naming the topic auto-creates it."""
    def created() -> object:
        md = metadata(broker, topic)
        t = next((t for t in md["topics"] if t["topic"] == topic), None)
        if t and not t.get("error") and t["partitions"] and all(p["leader"] >= 0 for p in t["partitions"]):
            return True
        return not_yet(t)

    wait_for_sync(created, 10, interval=0.1, what=f"topic {topic} auto-created, its partitions led")


def test_metadata_lists_the_broker_and_auto_creates_a_topic(broker: Target) -> None:
    name = topic_name("kcat-meta")
    auto_create(broker, name)
    md = metadata(broker, name)
    host, port = broker.bootstrap.rsplit(":", 1)
    assert [b["name"] for b in md["brokers"]] == [f"{host}:{port}"]
    [topic] = [t for t in md["topics"] if t["topic"] == name]
    assert [(p["partition"], p["leader"]) for p in topic["partitions"]] == [(0, md["brokers"][0]["id"])]


def test_metadata_shows_a_topic_created_by_another_client(broker: Target) -> None:
    # kcat has no CreateTopics/DeleteTopics; this is the "create topic" flow as kcat sees it
    name = topic_name("kcat-create")
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    a.create_topics([NewTopic(name, num_partitions=3, replication_factor=1)])[name].result(15)
    md = metadata(broker, name)
    [topic] = [t for t in md["topics"] if t["topic"] == name]
    assert sorted(p["partition"] for p in topic["partitions"]) == [0, 1, 2]
    a.delete_topics([name])[name].result(15)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", ACKS)
def test_produce_then_consume_from_the_beginning(broker: Target, acks: str, codec: str) -> None:
    name = topic_name(f"kcat-{acks}-{codec}")
    auto_create(broker, name)
    recs = kcat_records(broker, 30, name)
    window = kcat_produce(broker, name, recs, "-X", f"acks={acks}", "-z", codec)
    assert_records(kcat_consume(broker, name, len(recs)), recs, ts_window=window)


def test_idempotent_produce(broker: Target) -> None:
    name = topic_name("kcat-idem")
    auto_create(broker, name)
    recs = kcat_records(broker, 50, name)
    window = kcat_produce(broker, name, recs, "-X", "enable.idempotence=true", "-z", "snappy")
    assert_records(kcat_consume(broker, name, len(recs)), recs, ts_window=window)


def test_consume_from_a_middle_offset(broker: Target) -> None:
    name = topic_name("kcat-seek")
    auto_create(broker, name)
    recs = kcat_records(broker, 20, name)
    window = kcat_produce(broker, name, recs)
    assert_records(kcat_consume(broker, name, 13, offset="7"), recs[7:], ts_window=window)
    # a negative -o is relative to the end: kcat asks ListOffsets LATEST, then seeks
    assert_records(kcat_consume(broker, name, 5, offset="-5"), recs[15:], ts_window=window)


def test_list_offsets_earliest_latest_and_by_timestamp(broker: Target) -> None:
    name = topic_name("kcat-offsets")
    auto_create(broker, name)
    recs = make_records(10, name)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50})
    for r in recs:  # kcat cannot set timestamps: write the records with chosen ones via confluent-kafka
        p.produce(name, value=r.value, key=r.key, timestamp=r.timestamp, partition=0)
    assert p.flush(20) == 0

    def query(ts: int) -> int:
        # kcat -Q: offsets_for_times, one "topic [partition] offset N" line (-J: JSON)
        out = json.loads(kcat(broker, "-Q", "-J", "-t", f"{name}:0:{ts}"))
        return int(out[name]["0"]["offset"]) if name in out else int(out["0"]["offset"])

    assert query(recs[4].timestamp) == 4
    assert query(recs[4].timestamp + 1) == 5
    assert query(-2) == 0  # EARLIEST
    assert query(-1) == 10  # LATEST
