"""kafkajs 2.2.4 (Node) against a broker process, driven through tests/interop/js/flow.js.

kafkajs has no assign(): its "assign + seek" flow is a group consumer plus seek(), so these tests
also need FindCoordinator/JoinGroup/SyncGroup from the broker. Its headers are an object, so a
repeated header name keeps its values together: records here group repeated names (h1, h1, h2).
The node packages are installed by `.ci/run` (npm ci in tests/interop/js).
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.helpers import wait_for_sync
from tests.interop.support import (
    ACKS,
    CODECS,
    Rec,
    Target,
    assert_records,
    make_records,
    run_flow,
    topic_name,
)

pytestmark = pytest.mark.interop


def b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode()


def unb64(s: str | None) -> bytes | None:
    return None if s is None else base64.b64decode(s)


def kafkajs(broker: Target, *steps: dict[str, Any], timeout: float = 90) -> list[Any]:
    """Run flow.js with these steps; return one result per step or fail with kafkajs' error."""
    return run_flow({"brokers": [broker.bootstrap], "steps": list(steps)}, timeout)


def grouped(recs: list[Rec]) -> list[Rec]:
    """kafkajs cannot interleave header names; keep each name's values together, in order."""
    out = []
    for r in recs:
        names = list(dict.fromkeys(n for n, _ in r.headers))
        out.append(Rec(r.key, r.value, tuple((n, v) for name in names for n, v in r.headers if n == name),
                       r.timestamp))
    return out


def encode(recs: list[Rec]) -> list[dict[str, Any]]:
    return [{"key": b64(r.key), "value": b64(r.value), "headers": [[n, b64(v)] for n, v in r.headers],
             "timestamp": r.timestamp} for r in recs]


def decode(msgs: list[dict[str, Any]]) -> list[Rec]:
    return [Rec(key=unb64(m["key"]), value=unb64(m["value"]),
                headers=tuple((n, unb64(v) or b"") for n, v in m["headers"]), timestamp=m["timestamp"])
            for m in msgs]


def create(name: str, partitions: int = 1) -> dict[str, Any]:
    return {"op": "create", "topic": name, "partitions": partitions}


def produce(name: str, recs: list[Rec], **opts: Any) -> dict[str, Any]:
    return {"op": "produce", "topic": name, "records": encode(recs), **opts}


def consume(name: str, count: int, offset: int | None = None) -> dict[str, Any]:
    return {"op": "consume", "topic": name, "count": count, "offset": offset, "group": topic_name("kjs-g"),
            "timeoutMs": 45000}


def test_metadata_describes_the_cluster_and_a_topic(broker: Target) -> None:
    name = topic_name("kjs-meta")
    _, md = kafkajs(broker, create(name, 2), {"op": "metadata", "topics": [name]})
    host, port = broker.bootstrap.rsplit(":", 1)
    assert [(b["host"], b["port"]) for b in md["cluster"]["brokers"]] == [(host, int(port))]
    [topic] = md["topics"]
    node = md["cluster"]["brokers"][0]["nodeId"]
    assert sorted((p["partitionId"], p["leader"]) for p in topic["partitions"]) == [(0, node), (1, node)]


def test_create_topic_then_delete_it(broker: Target) -> None:
    name = topic_name("kjs-create")
    created, listed = kafkajs(broker, create(name, 3), {"op": "listTopics"})
    assert created is True and name in listed
    [after_delete] = kafkajs(broker, {"op": "delete", "topic": name})
    if name in after_delete:  # the delete's own listing may still show it
        wait_for_sync(lambda: name not in kafkajs(broker, {"op": "listTopics"})[0], 10, interval=0.2,
                      what=f"topic {name} gone after its delete")


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", ACKS)
def test_produce_then_consume_from_the_beginning(broker: Target, acks: str, codec: str) -> None:
    name = topic_name(f"kjs-{acks}-{codec}")
    recs = grouped(make_records(30, name))
    _, sent, got = kafkajs(broker, create(name), produce(name, recs, acks=acks, codec=codec), consume(name, 30))
    if acks != "0":
        assert [(s["partition"], s["baseOffset"]) for s in sent] == [(0, "0")]
    assert_records(decode(got), recs)


def test_idempotent_produce(broker: Target) -> None:
    name = topic_name("kjs-idem")
    recs = grouped(make_records(50, name))
    _, _, got = kafkajs(broker, create(name), produce(name, recs, idempotent=True, codec="gzip"), consume(name, 50))
    assert_records(decode(got), recs)


def test_group_consumer_seeks_to_a_middle_offset(broker: Target) -> None:
    name = topic_name("kjs-seek")
    recs = grouped(make_records(20, name))
    _, _, got = kafkajs(broker, create(name), produce(name, recs), consume(name, 13, offset=7))
    assert [m["offset"] for m in got] == list(range(7, 20))
    assert_records(decode(got), recs[7:])


def test_list_offsets_earliest_latest_and_by_timestamp(broker: Target) -> None:
    name = topic_name("kjs-offsets")
    recs = grouped(make_records(10, name))
    ts = [recs[4].timestamp, recs[4].timestamp + 1, -2]  # -2: EARLIEST
    _, _, offsets = kafkajs(broker, create(name), produce(name, recs), {"op": "offsets", "topic": name,
                                                                        "timestamps": ts})
    [latest] = offsets["latest"]
    assert (latest["partition"], latest["low"], latest["high"], latest["offset"]) == (0, "0", "10", "10")
    assert [o[0]["offset"] for o in offsets["byTimestamp"]] == ["4", "5", "0"]
