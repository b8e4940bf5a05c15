"""A cluster whose brokers claim a Kafka release (`kafka.version`) still replicates and fails over: the brokers
talk to each other within the release's versions (a follower fetches by topic name, Fetch v12, from a leader
claiming 2.8 or 3.0; by topic id from 3.1), and to their controller natively."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from epoch_broker import testing


@pytest.mark.parametrize("release", ["2.8", "3.1", "4.0"])
def test_a_cluster_claiming_a_release_replicates_and_fails_over(release: str) -> None:
    with testing.cluster(3, config={"kafka.version": release}) as cluster:
        cluster.create_topic("t", replication_factor=3, config={"min.insync.replicas": "2"})
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for i in range(100):
            producer.produce("t", str(i).encode())
        assert producer.flush(30) == 0
        cluster.wait_for_isr("t", 0, 3)
        old = cluster.leader("t", 0)
        cluster.kill(old)
        cluster.leader("t", 0, other_than=old)
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "g"})
        consumer.assign([TopicPartition("t", 0, 0)])
        values: list[bytes] = []
        for _ in range(30):
            values += [m.value() for m in consumer.consume(100, timeout=2) if m.error() is None]
            if len(values) >= 100:
                break
        consumer.close()
        assert values == [str(i).encode() for i in range(100)]
