"""ShareFetch and ShareAcknowledge on the wire (KIP-932): share sessions and acknowledgements, driven by hand.

- A session opens with epoch 0 (which may not carry acknowledgements), moves on one epoch per request, and closes
  with -1; a missing session is SHARE_SESSION_NOT_FOUND, a wrong epoch INVALID_SHARE_SESSION_EPOCH, and only a
  ShareFetch opens one.
- A new share-partition starts at the high watermark ("latest"): records appended after it are acquired, in
  whole batches, with their delivery count; a release makes them come back with delivery count 2; records
  acknowledged already (below the share-partition's start) are skipped, and acknowledging records another member
  holds is INVALID_RECORD_STATE, changing nothing.
- Closing the session, or the connection that opened it, releases what the member still holds: another member
  gets it at once, not after the lock.
- /metrics and /api/status show each share-partition's start and end offsets and its in-flight records.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from epoch_broker import testing
from epoch_broker.client.aio import KafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import share_acknowledge, share_fetch
from epoch_broker.protocol.records import iter_batches
from tests.broker.conftest import batch, create_topic, produce_to

F, A = share_fetch.REQUEST, share_acknowledge.REQUEST
ACCEPT, RELEASE = 1, 2


async def fetch(client: KafkaClient, topic_id: bytes, member: str, epoch: int, acks: list[Any] | None = None,
                max_wait_ms: int = 0) -> Any:
    partition = F.FetchPartition(partition_index=0, acknowledgement_batches=acks or [])
    return await client.request(share_fetch.API, 1, F.cls(
        group_id="g", member_id=member, share_session_epoch=epoch, max_wait_ms=max_wait_ms, min_bytes=1,
        max_records=500, batch_size=500, topics=[F.FetchTopic(topic_id=topic_id, partitions=[partition])],
        forgotten_topics_data=[]))


async def acknowledge(client: KafkaClient, topic_id: bytes, member: str, epoch: int, acks: list[Any]) -> Any:
    return await client.request(share_acknowledge.API, 1, A.cls(
        group_id="g", member_id=member, share_session_epoch=epoch, topics=[A.AcknowledgeTopic(
            topic_id=topic_id, partitions=[A.AcknowledgePartition(partition_index=0, acknowledgement_batches=acks)])]))


def ack(first: int, last: int, kind: int) -> Any:
    return F.AcknowledgementBatch(first_offset=first, last_offset=last, acknowledge_types=[kind])


def acquired(response: Any) -> list[tuple[int, int, int]]:
    assert response.error_code == ErrorCode.NONE, response
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for topic in response.responses for p in topic.partitions for a in p.acquired_records]


async def test_share_sessions_acquisition_and_acknowledgements(client: KafkaClient) -> None:
    topic_id = bytes((await create_topic(client, "queue")).topic_id)
    await produce_to(client, "queue", batch(b"before"))  # below the high watermark when the group starts: skipped
    assert (await fetch(client, topic_id, "m1", 3)).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    early_ack = await fetch(client, topic_id, "m1", 0, acks=[ack(0, 0, ACCEPT)])
    assert early_ack.error_code == ErrorCode.INVALID_REQUEST
    assert (await acknowledge(client, topic_id, "m1", 0, [])).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH

    opened = await fetch(client, topic_id, "m1", 0)  # the share-partition starts at the high watermark, 1
    assert (acquired(opened), opened.acquisition_lock_timeout_ms) == ([], 30_000)
    await produce_to(client, "queue", batch(b"a", b"b", b"c"))
    got = await fetch(client, topic_id, "m1", 1, max_wait_ms=5_000)
    assert acquired(got) == [(1, 3, 1)]
    sent = bytes(got.responses[0].partitions[0].records)
    assert [(h.base_offset, h.records_count) for _, h in iter_batches(sent)] == [(1, 3)]
    assert (await fetch(client, topic_id, "m1", 1)).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH

    # offset 1 accepted, 2-3 released: they come back with delivery count 2, and offset 1 is not held any more
    answer = await acknowledge(client, topic_id, "m1", 2, [ack(1, 1, ACCEPT), ack(2, 3, RELEASE)])
    assert [p.error_code for t in answer.responses for p in t.partitions] == [ErrorCode.NONE]
    again = await fetch(client, topic_id, "m1", 3, acks=[ack(1, 1, ACCEPT)])
    assert again.responses[0].partitions[0].acknowledge_error_code == ErrorCode.NONE  # below the start: skipped
    assert acquired(again) == [(2, 3, 2)]

    # another member opens its session: nothing to take while m1 holds 2-3, which it may not acknowledge; m1
    # closes its session, releasing them (their delivery given back, KAFKA-17541), and m2 takes them at once
    other = await fetch(client, topic_id, "m2", 0)
    assert acquired(other) == []
    stolen = await acknowledge(client, topic_id, "m2", 1, [ack(2, 3, ACCEPT)])
    assert [p.error_code for t in stolen.responses for p in t.partitions] == [ErrorCode.INVALID_RECORD_STATE]
    closed = await fetch(client, topic_id, "m1", -1)
    assert closed.error_code == ErrorCode.NONE
    # their second delivery given back on release, this is their second delivery again
    assert acquired(await fetch(client, topic_id, "m2", 2, max_wait_ms=5_000)) == [(2, 3, 2)]
    assert (await fetch(client, topic_id, "m1", 4)).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND


async def test_metrics_and_the_status_show_each_share_partitions_offsets_and_in_flight_records(tmp_path: Any) -> None:
    async with (testing.broker(data_dir=tmp_path, config={"metrics.listener": "http://127.0.0.1:0"}) as started,
                await KafkaClient.connect(started.bootstrap_servers) as client):
        await client.negotiate()
        topic_id = bytes((await create_topic(client, "watched")).topic_id)
        assert acquired(await fetch(client, topic_id, "m1", 0)) == []
        await produce_to(client, "watched", batch(b"a", b"b", b"c"))
        assert acquired(await fetch(client, topic_id, "m1", 1, max_wait_ms=5_000)) == [(0, 2, 1)]
        await acknowledge(client, topic_id, "m1", 2, [ack(0, 0, ACCEPT)])
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for family in started.server.metrics.families() for s in family.samples}
        key = (("group", "g"), ("partition", "0"), ("topic", "watched"))
        assert [samples[(name, key)] for name in (
            "epoch_broker_share_partition_start_offset", "epoch_broker_share_partition_end_offset",
            "kafka_server_sharepartitionmetrics_inflightmessagecount",
            "epoch_broker_share_partition_acquired_records")] == [1, 3, 2, 2]
        with urllib.request.urlopen(f"{started.metrics_url}/api/status", timeout=10) as answer:
            status = json.load(answer)
        assert status["share_partitions"] == [{"group_id": "g", "topic": "watched", "partition": 0, "start_offset": 1,
                                               "end_offset": 3, "in_flight": 2, "acquired": 2, "archived": 0}]


async def test_a_closed_connection_ends_its_share_sessions_and_releases_their_records(broker: Any,
                                                                                      client: KafkaClient) -> None:
    topic_id = bytes((await create_topic(client, "dropped")).topic_id)
    address = f"127.0.0.1:{broker.advertised.port}"
    async with await KafkaClient.connect(address) as first:
        await first.negotiate()
        assert acquired(await fetch(first, topic_id, "m1", 0)) == []
        await produce_to(client, "dropped", batch(b"a", b"b"))
        assert acquired(await fetch(first, topic_id, "m1", 1, max_wait_ms=5_000)) == [(0, 1, 1)]
    # the connection is gone (a crashed consumer): m2 gets the records as soon as the broker has seen it close
    # (before m2's first fetch or during its long poll), not 30 s later when their locks expire
    got = acquired(await fetch(client, topic_id, "m2", 0))
    if not got:
        got = acquired(await fetch(client, topic_id, "m2", 1, max_wait_ms=10_000))
    assert got == [(0, 1, 1)]
