"""Compaction in a replicated cluster, on real processes: every replica cleans its own log, and a follower that was
away while the leader compacted, and missed a leader change, truncates by leader epoch (KIP-101's
OffsetsForLeaderEpoch, answered from the epoch cache, which cleaning never changes) and catches up from the
compacted log: elected in turn, each replica serves the latest value of every key, at increasing offsets."""

from __future__ import annotations

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from tests.cluster.support import Cluster
from tests.helpers import not_yet, wait_for_sync

pytestmark = pytest.mark.slow

TOPIC = "accounts"
KEYS = 50
CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01"}


def produce(bootstrap: str, round_: int, count: int) -> dict[bytes, bytes]:
    """`count` updates over KEYS keys, acks=all; the last value of each key."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    latest: dict[bytes, bytes] = {}
    for i in range(count):
        key, value = b"key-%d" % (i % KEYS), b"round-%d-update-%d" % (round_, i)
        producer.produce(TOPIC, value, key=key)
        latest[key] = value
        producer.poll(0)
    assert producer.flush(60) == 0
    return latest


def read_all(bootstrap: str) -> list[tuple[int, bytes, bytes]]:
    """(offset, key, value) of every record from offset 0 to the high watermark, as the leader serves them."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        records: list[tuple[int, bytes, bytes]] = []

        def read() -> object:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                records.append((message.offset(), message.key(), message.value()))
            return (records and records[-1][0] >= high - 1) or not_yet(
                f"{len(records)} records read, up to offset {records[-1][0] if records else None}")

        wait_for_sync(read, 60, interval=0, what=f"every record up to the high watermark {high}")
        return records
    finally:
        consumer.close()


def compacted_view(records: list[tuple[int, bytes, bytes]]) -> dict[bytes, bytes]:
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets)), "offsets strictly increase"
    return {key: value for _, key, value in records}


@pytest.mark.cluster(overrides={"log.cleaner.backoff.ms": "200"})
def test_a_follower_away_during_compaction_and_a_leader_change_truncates_by_epoch_and_catches_up(
        cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=CONFIGS)
    cluster.wait_for_isr(TOPIC, 0, 3)
    latest = produce(cluster.bootstrap, 1, 3000)
    first_leader = cluster.leader(TOPIC)
    away = next(r for r in cluster.state(TOPIC, 0).replicas if r != first_leader)
    cluster.kill(away)
    cluster.kill(first_leader)  # the third replica leads, in the next leader epoch
    new_leader = cluster.leader(TOPIC, other_than=first_leader)
    latest |= produce(cluster.bootstrap, 2, 3000)
    # the new leader compacts: a read from 0 finds fewer records than were written
    def compacted() -> object:
        records = read_all(cluster.bootstrap)
        return records if len(records) < 6000 else not_yet(f"{len(records)} records read")

    records = wait_for_sync(compacted, 60, interval=0.2, what="a read from 0 finding fewer than the 6000 written")
    assert compacted_view(records) == latest
    cluster.restart(away)
    cluster.restart(first_leader)
    cluster.wait_for_isr(TOPIC, 0, 3)
    for replica in (away, first_leader, new_leader):
        cluster.elect(TOPIC, 0, leader=replica)
        testing_leader = cluster.leader(TOPIC)
        assert testing_leader == replica
        assert compacted_view(read_all(cluster.bootstrap)) == latest, f"replica {replica}"
