"""The share group offset admin APIs (KIP-932): DescribeShareGroupOffsets, AlterShareGroupOffsets and
DeleteShareGroupOffsets against a real broker process, with confluent-kafka's ShareConsumer consuming.

confluent-kafka 2.16's AdminClient has no call for these APIs (Kafka's Java Admin has listShareGroupOffsets,
alterShareGroupOffsets and deleteShareGroupOffsets), so the requests go through this project's own client.

- Describe after consuming: the share-partition start offset, its leader epoch, and (v1) the lag: the high
  watermark less the start less the records past it already acknowledged.
- Alter on an empty group to an earlier offset: a new member gets the records from there again.
- Alter and delete on a group with a member are refused (NON_EMPTY_GROUP); other group types and unknown groups
  and topics get Kafka's errors.
- Delete: the group starts afresh from share.auto.offset.reset.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, ConsumerGroupTopicPartitions, ShareConsumer, TopicPartition
from confluent_kafka.admin import AdminClient

from epoch_broker.client.blocking import BlockingKafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import (
    alter_share_group_offsets,
    delete_share_group_offsets,
    describe_share_group_offsets,
    list_groups,
)
from tests.groups.test_share_groups import BROKER_OVERRIDES, new_group, new_topic, produce, records, share_consumer
from tests.helpers import BrokerProcess, start_broker, wait_for_sync


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory.mktemp("share-group-offsets"), BROKER_OVERRIDES)
    yield process
    process.stop()


@pytest.fixture
def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[BlockingKafkaClient]:
    """The group coordinator itself (offsets.topic.num.partitions is 1, one broker)."""
    connected = BlockingKafkaClient.connect(broker.bootstrap)
    yield connected
    connected.close()


def describe(client: BlockingKafkaClient, group: str, topics: dict[str, list[int]] | None,
             version: int = 1) -> Any:
    q = describe_share_group_offsets.REQUEST
    asked = None if topics is None else [q.DescribeShareGroupOffsetsRequestTopic(topic_name=name, partitions=parts)
                                         for name, parts in topics.items()]
    return client.request(describe_share_group_offsets.API, version, q.cls(groups=[
        q.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=asked)])).groups[0]


def starts(described: Any) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (start offset, lag) of a described group."""
    return {(t.topic_name, p.partition_index): (p.start_offset, p.lag) for t in described.topics for p in t.partitions}


def alter(client: BlockingKafkaClient, group: str, offsets: dict[str, dict[int, int]]) -> Any:
    q = alter_share_group_offsets.REQUEST
    return client.request(alter_share_group_offsets.API, 0, q.cls(group_id=group, topics=[
        q.AlterShareGroupOffsetsRequestTopic(topic_name=name, partitions=[
            q.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=offset)
            for p, offset in partitions.items()])
        for name, partitions in offsets.items()]))


def delete(client: BlockingKafkaClient, group: str, topics: list[str]) -> Any:
    q = delete_share_group_offsets.REQUEST
    return client.request(delete_share_group_offsets.API, 0, q.cls(
        group_id=group, topics=[q.DeleteShareGroupOffsetsRequestTopic(topic_name=name) for name in topics]))


def when_empty(attempt: Any) -> Any:
    """`attempt()`'s answer once the group's last member has left (NON_EMPTY_GROUP until its leave is seen)."""
    return wait_for_sync(lambda: (a := attempt()).error_code != ErrorCode.NON_EMPTY_GROUP and a, timeout=30,
                         what="the group to be empty")


def consume_all(consumer: ShareConsumer, count: int) -> list[bytes]:
    """`count` records, accepted (implicit acknowledgement: sent by commit_sync, else only at the next poll)."""
    received: list[bytes] = []
    wait_for_sync(lambda: received.extend(m.value() for m in records(consumer)) or len(received) >= count,
                  timeout=60, what=f"{count} records")
    consumer.commit_sync(30)
    return received


def test_describe_after_consuming_shows_the_start_offset_its_leader_epoch_and_the_lag(
        broker: BrokerProcess, admin: AdminClient, client: BlockingKafkaClient) -> None:
    topic, group = new_topic(admin), new_group(admin)
    sent = produce(broker.bootstrap, topic, 10, per_batch=10)
    consumer = share_consumer(broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        held: list[Any] = []
        wait_for_sync(lambda: held.extend(records(consumer)) or len(held) >= len(sent), timeout=60,
                      what="the ten records")
        for message in held:  # 0-3 and 6-9 accepted, 4 and 5 released
            released = message.offset() in (4, 5)
            consumer.acknowledge(message, AcknowledgeType.RELEASE if released else AcknowledgeType.ACCEPT)
        consumer.commit_sync(30)

        described = wait_for_sync(lambda: (d := describe(client, group, None)).topics and d, timeout=30,
                                  what="the group's share-partition described")  # commit_sync: written
        assert described.error_code == ErrorCode.NONE
        partition = described.topics[0].partitions[0]
        # the start moved past 0-3; 6-9 are done, so of the ten records the released 4 and 5 are the lag
        assert (described.topics[0].topic_name, partition.partition_index, partition.start_offset,
                partition.leader_epoch, partition.lag) == (topic, 0, 4, 0, 2)
        # named partitions: one the topic does not have, and a topic that does not exist: no state, no error
        named = describe(client, group, {topic: [0, 1], "no-such-topic": [0]})
        assert starts(named) == {(topic, 0): (4, 2), (topic, 1): (-1, -1), ("no-such-topic", 0): (-1, -1)}
        assert [t.topic_id for t in named.topics if t.topic_name == "no-such-topic"] == [bytes(16)]
        assert describe(client, group, {topic: [0]}, version=0).topics[0].partitions[0].start_offset == 4
        # as Kafka, a group without share state is no error: it has nothing to describe
        assert (describe(client, "no-such-group", None).error_code, describe(client, "no-such-group", None).topics) \
            == (ErrorCode.NONE, [])
    finally:
        consumer.close()


def test_alter_on_an_empty_group_to_an_earlier_offset_delivers_the_records_again_from_there(
        broker: BrokerProcess, admin: AdminClient, client: BlockingKafkaClient) -> None:
    topic, group = new_topic(admin), new_group(admin)
    sent = produce(broker.bootstrap, topic, 10, per_batch=10)
    first = share_consumer(broker.bootstrap, group, topic)
    try:
        assert sorted(consume_all(first, len(sent))) == sorted(sent)
    finally:
        first.close()
    wait_for_sync(lambda: starts(describe(client, group, {topic: [0]}))[(topic, 0)][0] == 10, timeout=30,
                  what="the acknowledgements of the ten records")

    altered = when_empty(lambda: alter(client, group, {topic: {0: 3}}))
    assert altered.error_code == ErrorCode.NONE
    assert [(t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in altered.responses] \
        == [(topic, [(0, ErrorCode.NONE)])]
    assert starts(describe(client, group, {topic: [0]})) == {(topic, 0): (3, 7)}

    later = produce(broker.bootstrap, topic, 2)
    second = share_consumer(broker.bootstrap, group, topic)
    try:
        again = consume_all(second, 9)
        assert sorted(again) == sorted(sent[3:] + later)  # from offset 3 on, each record once
    finally:
        second.close()


def test_alter_takes_effect_for_the_next_member_without_new_records(
        broker: BrokerProcess, admin: AdminClient, client: BlockingKafkaClient) -> None:
    topic, group = new_topic(admin), new_group(admin)
    sent = produce(broker.bootstrap, topic, 5, per_batch=5)
    first = share_consumer(broker.bootstrap, group, topic)
    try:
        consume_all(first, len(sent))
    finally:
        first.close()
    wait_for_sync(lambda: starts(describe(client, group, {topic: [0]}))[(topic, 0)][0] == 5, timeout=30,
                  what="the acknowledgements of the five records")
    assert when_empty(lambda: alter(client, group, {topic: {0: 0}})).error_code == ErrorCode.NONE
    second = share_consumer(broker.bootstrap, group, topic)
    try:
        # The leader let the share-partition go when the group's last session ended, as Kafka's leader does when
        # the group turns empty: the next member's fetch reads the altered state.
        received: list[bytes] = []
        wait_for_sync(lambda: received.extend(m.value() for m in records(second)) or len(received) >= len(sent),
                      timeout=30, what="the records again after the alter, with no new record produced")
        assert sorted(received) == sorted(sent)
    finally:
        second.close()


def test_alter_and_delete_are_refused_to_a_group_with_members_and_to_other_group_types(
        broker: BrokerProcess, admin: AdminClient, client: BlockingKafkaClient) -> None:
    topic, group = new_topic(admin), new_group(admin)
    produce(broker.bootstrap, topic, 3, per_batch=3)
    member = share_consumer(broker.bootstrap, group, topic)
    try:
        consume_all(member, 3)  # it is in the group
        refused = alter(client, group, {topic: {0: 0}})
        assert (refused.error_code, refused.error_message, refused.responses) == (
            ErrorCode.NON_EMPTY_GROUP, "The group is not empty.", [])
        assert delete(client, group, [topic]).error_code == ErrorCode.NON_EMPTY_GROUP
        assert starts(describe(client, group, {topic: [0]})) == {(topic, 0): (3, 0)}  # kept
    finally:
        member.close()

    classic = new_group(admin)  # an offset commit by the admin makes a classic group of that id
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(classic, [TopicPartition(topic, 0, 1)])])[
        classic].result(30)
    for answer in (alter(client, classic, {topic: {0: 0}}), delete(client, classic, [topic])):
        assert (answer.error_code, answer.error_message) == (
            ErrorCode.GROUP_ID_NOT_FOUND, f"Group {classic} is not a share group.")
    unknown = new_group(admin)
    assert (delete(client, unknown, [topic]).error_code, delete(client, unknown, [topic]).error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND, f"Group {unknown} not found.")

    # An alter of an unknown group makes it an empty share group; a missing topic or partition is an error.
    made = alter(client, unknown, {topic: {0: 1, 5: 0}, "no-such-topic": {0: 0}})
    assert [(t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in made.responses] == [
        (topic, [(0, ErrorCode.NONE), (5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]),
        ("no-such-topic", [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])]
    listed = client.request(list_groups.API, 5, list_groups.REQUEST.cls(states_filter=[], types_filter=["share"]))
    assert [(g.group_type, g.group_state) for g in listed.groups if g.group_id == unknown] == [("share", "Empty")]


def test_delete_makes_the_group_start_afresh_from_share_auto_offset_reset(
        broker: BrokerProcess, admin: AdminClient, client: BlockingKafkaClient) -> None:
    topic, group = new_topic(admin), new_group(admin)  # share.auto.offset.reset earliest
    sent = produce(broker.bootstrap, topic, 6, per_batch=6)
    first = share_consumer(broker.bootstrap, group, topic)
    try:
        consume_all(first, len(sent))
    finally:
        first.close()
    wait_for_sync(lambda: starts(describe(client, group, {topic: [0]}))[(topic, 0)][0] == 6, timeout=30,
                  what="the acknowledgements of the six records")

    deleted = when_empty(lambda: delete(client, group, [topic, "no-such-topic"]))
    assert (deleted.error_code, [(t.topic_name, t.error_code) for t in deleted.responses]) == (
        ErrorCode.NONE, [(topic, ErrorCode.NONE), ("no-such-topic", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])
    assert describe(client, group, None).topics == []  # no start offset set any more
    assert starts(describe(client, group, {topic: [0]})) == {(topic, 0): (-1, -1)}
    again = delete(client, group, [topic])
    assert [(t.error_code, t.error_message) for t in again.responses] == [
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete.")]

    later = produce(broker.bootstrap, topic, 2)
    second = share_consumer(broker.bootstrap, group, topic)
    try:
        assert sorted(consume_all(second, len(sent) + len(later))) == sorted(sent + later)  # earliest: all again
    finally:
        second.close()
