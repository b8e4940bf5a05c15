"""Asynchronous offset commits pipelined on one connection take effect in the order sent, on a 3-broker cluster
where each commit waits for its replicated `__consumer_offsets` append (issue 17.8: the committed offset read
back was 29, 10 or 33 of 50, and went backwards). Kafka handles one request per connection at a time."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from tests.cluster.support import Cluster, create_topic
from tests.helpers import not_yet, wait_for_sync

pytestmark = pytest.mark.slow

TOPIC = "commits"
COMMITS = 200
ROUNDS = 20


def wait_answered(consumer: Consumer, answered: list[KafkaError | None], count: int) -> None:
    """Until `count` commits are answered (their callbacks run in poll)."""
    def all_answered() -> object:
        consumer.poll(0.05)
        return len(answered) >= count or not_yet(f"{len(answered)} commits answered")

    wait_for_sync(all_answered, 60, interval=0, what=f"{count} commits answered")


@pytest.mark.cluster(brokers=3)
async def test_pipelined_asynchronous_commits_leave_the_last_one_committed(cluster: Cluster) -> None:
    await create_topic(cluster, TOPIC)
    answered: list[KafkaError | None] = []
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "ordered-commits",
                         "enable.auto.commit": False, "log_level": 2,
                         "on_commit": lambda error, partitions: partitions[0].offset > 0 and answered.append(error)})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        # A synchronous commit first: the group's coordinator is found and loaded. (While it loads, commits
        # are answered COORDINATOR_LOAD_IN_PROGRESS and librdkafka retries them in its own order, against
        # Kafka as here: that reordering is the client's.)
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, 0)], asynchronous=False)  # not counted in `answered`
        committed_after_round = []
        for round_number in range(ROUNDS):
            base = round_number * COMMITS
            for offset in range(base + 1, base + COMMITS + 1):  # no waiting between them: they pipeline
                consumer.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=True)
            wait_answered(consumer, answered, (round_number + 1) * COMMITS)
            [committed] = consumer.committed([TopicPartition(TOPIC, 0)], timeout=30)
            committed_after_round.append(committed.offset)
        assert [error for error in answered if error is not None] == []
        assert committed_after_round == [(r + 1) * COMMITS for r in range(ROUNDS)]
    finally:
        consumer.close()
