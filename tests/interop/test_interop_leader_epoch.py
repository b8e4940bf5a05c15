"""Leader epochs as real clients see them across a broker restart (KIP-101/320 on one broker).

Each start of the broker bumps every partition's leader epoch. Records written before the restart
keep the epoch they were stamped with; records written after carry the new one. Clients that keep
consuming across the restart must get through the epoch change: librdkafka validates its position
with OffsetForLeaderEpoch v2, kafka-python sends Fetch v12 with current_leader_epoch and
last_fetched_epoch and handles FENCED_LEADER_EPOCH by refreshing metadata.
Needs a restartable broker, so it runs only against ours (not Tansu).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kafka.protocol.consumer import FetchRequest

from tests.helpers import not_yet, wait_for_sync
from tests.interop.support import Target, make_records, run_target, topic_name

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    with run_target(tmp_path_factory.mktemp("epoch-broker")) as target:
        if target.restart_fn is None:
            pytest.fail(f"the leader-epoch interop test needs a restartable broker, not {target.kind}")
        yield target


def produce(broker: Target, topic: str, n: int, tag: str) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for r in make_records(n, tag):
        p.produce(topic, key=r.key, value=r.value, headers=list(r.headers), timestamp=r.timestamp, partition=0)
    assert p.flush(20) == 0


def poll_n(c: Consumer, n: int, timeout: float = 30) -> list[Message]:
    out: list[Message] = []

    def read() -> object:
        m = c.poll(0.5)
        if m is not None:
            assert m.error() is None, m.error()
            out.append(m)
        return len(out) >= n or not_yet(f"{len(out)} read")

    wait_for_sync(read, timeout, interval=0, what=f"{n} records")
    return out


def poll_kp(c: KafkaConsumer, n: int, timeout: float = 30) -> list[int]:
    offsets: list[int] = []

    def read() -> object:
        for msgs in c.poll(timeout_ms=500).values():
            offsets.extend(m.offset for m in msgs)
        return len(offsets) >= n or not_yet(f"{len(offsets)} read")

    wait_for_sync(read, timeout, interval=0, what=f"{n} records")
    return offsets


def test_epoch_rises_on_restart_and_consumers_read_across_it(broker: Target) -> None:
    name = topic_name("epoch")
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    a.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(15)
    produce(broker, name, 5, "before")

    ck = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic_name("g"), "enable.auto.commit": False})
    ck.assign([TopicPartition(name, 0, OFFSET_BEGINNING)])
    kp = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    tp = KpTopicPartition(name, 0)
    kp.assign([tp])
    kp.seek_to_beginning(tp)
    try:
        before = poll_n(ck, 5)
        assert [m.offset() for m in before] == [0, 1, 2, 3, 4]
        [epoch0] = {m.leader_epoch() for m in before}
        assert epoch0 is not None and epoch0 >= 0
        assert poll_kp(kp, 5) == [0, 1, 2, 3, 4]
        # kafka-python caps Fetch at v12: current_leader_epoch plus last_fetched_epoch (KIP-320/595)
        fetch_version = kp._client.api_version(FetchRequest, max_version=12)

        broker.restart()
        produce(broker, name, 5, "after")

        # both consumers were positioned at offset 5 with the old epoch; they must carry on
        after = poll_n(ck, 5)
        assert [m.offset() for m in after] == [5, 6, 7, 8, 9]
        [epoch1] = {m.leader_epoch() for m in after}
        assert epoch1 is not None and epoch1 > epoch0, f"epoch did not rise on restart: {epoch0} -> {epoch1}"
        assert poll_kp(kp, 5) == [5, 6, 7, 8, 9], f"kafka-python (Fetch v{fetch_version}) stopped at the restart"
        assert fetch_version == 12
    finally:
        ck.close()
        kp.close()

    # a fresh consumer sees both epochs, each on the records stamped with it
    fresh = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic_name("g"),
                      "enable.auto.commit": False})
    fresh.assign([TopicPartition(name, 0, OFFSET_BEGINNING)])
    try:
        msgs = poll_n(fresh, 10)
        assert [(m.offset(), m.leader_epoch()) for m in msgs] == (
            [(o, epoch0) for o in range(5)] + [(o, epoch1) for o in range(5, 10)])
        # KIP-232: the committed offset carries the leader epoch of the record consumed (OffsetCommit v6+)
        fresh.commit(message=msgs[6], asynchronous=False)
        [committed] = fresh.committed([TopicPartition(name, 0)], timeout=10)
        assert (committed.offset, committed.leader_epoch) == (7, epoch1)
    finally:
        fresh.close()

    # KIP-101: the partition's leader-epoch-checkpoint names each epoch with its start offset
    assert broker.data_dir is not None
    [checkpoint] = broker.data_dir.rglob(f"{name}-0/leader-epoch-checkpoint")
    lines = checkpoint.read_text().split("\n")
    assert lines[0] == "0"  # format version
    entries = [tuple(map(int, line.split())) for line in lines[2:2 + int(lines[1])]]
    assert entries[-2:] == [(epoch0, 0), (epoch1, 5)], checkpoint.read_text()
