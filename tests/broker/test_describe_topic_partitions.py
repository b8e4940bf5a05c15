"""DescribeTopicPartitions (75, KIP-966) over a broker's socket: every topic or those named, in name order, paged by
ResponsePartitionLimit with NextCursor, and kafka-python's describe_topic_partitions reading the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient

from epoch_broker import testing
from epoch_broker.client.blocking import BlockingKafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import describe_topic_partitions as messages

Q = messages.REQUEST


def pages(client: BlockingKafkaClient, names: list[str], limit: int) -> list[Any]:
    """Every answer of a paged description, following NextCursor."""
    answers, cursor = [], None
    while True:
        answer = client.request(messages.API, 0, Q.cls(topics=[Q.TopicRequest(name=n) for n in names],
                                                       response_partition_limit=limit, cursor=cursor))
        answers.append(answer)
        if answer.next_cursor is None:
            return answers
        cursor = Q.Cursor(topic_name=answer.next_cursor.topic_name, partition_index=answer.next_cursor.partition_index)


def seen(answers: list[Any]) -> list[tuple[str, int]]:
    return [(t.name, p.partition_index) for a in answers for t in a.topics for p in t.partitions]


def test_pages_cover_every_partition_once_in_order(tmp_path: Path) -> None:
    with testing.broker(data_dir=tmp_path) as started, BlockingKafkaClient.connect(started.bootstrap_servers) as c:
        started.create_topic("b", partitions=3)
        started.create_topic("a", partitions=2)
        everything = [("a", 0), ("a", 1), ("b", 0), ("b", 1), ("b", 2)]
        (whole,) = pages(c, ["b", "a"], 2000)
        assert seen([whole]) == everything
        assert all(p.leader_id == 0 and p.leader_epoch >= 0 and p.replica_nodes == [0] and p.isr_nodes == [0]
                   and p.eligible_leader_replicas == p.last_known_elr == [] and p.error_code == ErrorCode.NONE
                   for t in whole.topics for p in t.partitions)
        paged = pages(c, ["a", "b"], 2)
        assert seen(paged) == everything and [len(seen([a])) for a in paged] == [2, 2, 1]
        # a topic ending exactly at the limit: the cursor names the next topic's first partition
        assert (paged[0].next_cursor.topic_name, paged[0].next_cursor.partition_index) == ("b", 0)
        assert seen(pages(c, [], 3))[:5] == everything  # every topic (__consumer_offsets may follow)
        (unknown,) = pages(c, ["nope", "bad name", "a"], 10)
        assert [(t.name, t.error_code, len(t.partitions)) for t in unknown.topics] == [
            ("a", ErrorCode.NONE, 2), ("bad name", ErrorCode.INVALID_TOPIC_EXCEPTION, 0),
            ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0)]


def test_a_cursor_outside_the_topics_named_or_with_a_negative_partition_is_an_invalid_request(tmp_path: Path) -> None:
    with testing.broker(data_dir=tmp_path) as started, BlockingKafkaClient.connect(started.bootstrap_servers) as c:
        started.create_topic("a", partitions=2)

        def ask(names: list[str], topic: str, partition: int) -> list[tuple[str, int, int]]:
            answer = c.request(messages.API, 0, Q.cls(topics=[Q.TopicRequest(name=n) for n in names],
                                                      cursor=Q.Cursor(topic_name=topic, partition_index=partition)))
            return [(t.name, t.error_code, len(t.partitions)) for t in answer.topics]

        assert ask(["a"], "a", 1) == [("a", ErrorCode.NONE, 1)]
        assert ask(["a"], "b", 0) == [("a", ErrorCode.INVALID_REQUEST, 0)]
        assert ask(["a"], "a", -1) == [("a", ErrorCode.INVALID_REQUEST, 0)]
        assert ask([], "a", 1)[0] == ("a", ErrorCode.NONE, 1)  # all topics: any cursor topic will do


def test_kafka_python_describes_topic_partitions_page_by_page(tmp_path: Path) -> None:
    with testing.broker(data_dir=tmp_path) as started:
        started.create_topic("orders", partitions=4)
        admin = KafkaAdminClient(bootstrap_servers=started.bootstrap_servers)
        try:
            first = admin.describe_topic_partitions(["orders"], response_partition_limit=3)
            assert [p["partition_index"] for p in first["topics"][0]["partitions"]] == [0, 1, 2]
            assert first["next_cursor"]["topic_name"] == "orders"
            rest = admin.describe_topic_partitions(["orders"], response_partition_limit=3,
                                                   cursor=first["next_cursor"])
            assert [p["partition_index"] for p in rest["topics"][0]["partitions"]] == [3]
            assert rest["next_cursor"] is None
        finally:
            admin.close()
