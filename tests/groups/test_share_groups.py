"""Share groups (KIP-932) with confluent-kafka's ShareConsumer against a real broker process.

- Three members on one partition share its records: every record is delivered once, and each member gets some.
- Explicit acknowledgements: RELEASE delivers a record again with delivery count 2, REJECT never again; a poison
  record released at every delivery is archived at `group.share.delivery.count.limit`.
- A member that stops acknowledging loses its records when their acquisition locks expire: another member gets
  them, with the delivery count moved on.
- A read_committed share group (`share.isolation.level`) gets committed records only, and nothing past an open
  transaction until it ends.
- A group id is one type: a consumer-protocol heartbeat or a classic JoinGroup to a share group's id is refused
  with GROUP_ID_NOT_FOUND, as Kafka; ShareGroupDescribe and ListGroups (type "share") describe it.
The consumers are polled by the test's own thread, one after another (a librdkafka handle is used by one thread).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from epoch_broker.client.blocking import BlockingKafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import consumer_group_heartbeat, join_group, list_groups, share_group_describe
from tests.helpers import BrokerProcess, start_broker, wait_for_sync

DELIVERY_LIMIT = 3
BROKER_OVERRIDES = {"offsets.topic.num.partitions": "1", "group.share.heartbeat.interval.ms": "500",
                    "group.share.session.timeout.ms": "10000", "group.share.record.lock.duration.ms": "15000",
                    "group.share.delivery.count.limit": str(DELIVERY_LIMIT)}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory.mktemp("share-groups"), BROKER_OVERRIDES)
    yield process
    process.stop()


@pytest.fixture
def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def new_topic(admin: AdminClient, partitions: int = 1) -> str:
    name = unique("queue")
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def new_group(admin: AdminClient, **group_configs: str) -> str:
    """A share group id reading from the earliest record, with these group configs set too (dots as
    underscores)."""
    group = unique("share")
    configs = {"share.auto.offset.reset": "earliest", **{k.replace("_", "."): v for k, v in group_configs.items()}}
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET) for key, value in configs.items()])
    admin.incremental_alter_configs([resource])[resource].result(30)
    return group


def produce(bootstrap: str, topic: str, count: int, per_batch: int = 10) -> list[bytes]:
    """`count` records in log batches of `per_batch` (a flush each)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = [f"{topic}-{i}".encode() for i in range(count)]
    for i, value in enumerate(values):
        producer.produce(topic, value)
        if (i + 1) % per_batch == 0:
            producer.flush(30)
    assert producer.flush(30) == 0
    return values


def share_consumer(bootstrap: str, group: str, topic: str, **extra: Any) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **extra})
    consumer.subscribe([topic])
    return consumer


def records(consumer: ShareConsumer, timeout_s: float = 0.3) -> list[Any]:
    polled = consumer.poll(timeout_s) or []
    errors = [m.error() for m in polled if m.error() is not None]
    assert not errors, errors
    return list(polled)


def test_three_members_on_one_partition_share_its_records(broker: BrokerProcess, admin: AdminClient) -> None:
    topic, group = new_topic(admin), new_group(admin)
    consumers = [share_consumer(broker.bootstrap, group, topic, **{"max.poll.records": 10}) for _ in range(3)]
    try:
        sent = produce(broker.bootstrap, topic, 300)
        received: list[list[bytes]] = [[] for _ in consumers]

        def all_received() -> object:
            for mine, consumer in zip(received, consumers, strict=True):
                mine += [m.value() for m in records(consumer)]
            return sum(map(len, received)) >= len(sent)

        wait_for_sync(all_received, timeout=90, what="the three members to receive all 300 records")
        everything = [value for mine in received for value in mine]
        assert sorted(everything) == sorted(sent)  # each record once: none lost, none delivered twice
        assert all(received), [len(mine) for mine in received]  # every member had a share
    finally:
        for consumer in consumers:
            consumer.close()


def test_release_redelivers_reject_archives_and_a_poison_record_stops_at_the_delivery_limit(
        broker: BrokerProcess, admin: AdminClient) -> None:
    topic, group = new_topic(admin), new_group(admin)
    consumer = share_consumer(broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        accepted, released, rejected, poison = produce(broker.bootstrap, topic, 4, per_batch=4)
        deliveries: dict[bytes, list[int]] = {}

        def handle(messages: list[Any]) -> None:
            for message in messages:
                value = message.value()
                deliveries.setdefault(value, []).append(message.delivery_count())
                if value == accepted or (value == released and len(deliveries[value]) > 1):
                    kind = AcknowledgeType.ACCEPT
                elif value == rejected:
                    kind = AcknowledgeType.REJECT
                else:
                    kind = AcknowledgeType.RELEASE  # the poison record every time, the released one once
                consumer.acknowledge(message, kind)
            if messages:
                consumer.commit_sync(30)

        wait_for_sync(lambda: handle(records(consumer)) or len(deliveries.get(poison, [])) >= DELIVERY_LIMIT,
                      timeout=60, what="the poison record's deliveries up to the limit")
        deadline = time.monotonic() + 3  # nothing more may come: the poison record is archived, the rest done
        while time.monotonic() < deadline:
            handle(records(consumer))
        assert deliveries == {accepted: [1], released: [1, 2], rejected: [1],
                              poison: list(range(1, DELIVERY_LIMIT + 1))}
    finally:
        consumer.close()


def test_a_member_that_stops_acknowledging_loses_its_records_when_their_locks_expire(
        broker: BrokerProcess, admin: AdminClient) -> None:
    topic, group = new_topic(admin), new_group(admin, share_record_lock_duration_ms="2000")
    holder = share_consumer(broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    other = None
    try:
        sent = produce(broker.bootstrap, topic, 5, per_batch=5)
        held: list[Any] = []
        wait_for_sync(lambda: held.extend(records(holder)) or len(held) == len(sent), timeout=60,
                      what="the first member to hold every record")
        # it never acknowledges them (a stuck process): after the lock, another member gets them
        other = share_consumer(broker.bootstrap, group, topic)
        taken: list[Any] = []
        wait_for_sync(lambda: taken.extend(records(other)) or len(taken) >= len(sent), timeout=60,
                      what="the second member to get the records whose locks expired")
        assert sorted(m.value() for m in taken) == sorted(sent)
        assert {m.delivery_count() for m in taken} == {2}
    finally:
        holder.close()
        if other is not None:
            other.close()


def test_a_share_groups_id_is_refused_to_the_other_protocols_and_described_as_a_share_group(
        broker: BrokerProcess, admin: AdminClient) -> None:
    topic, group = new_topic(admin, partitions=2), new_group(admin)
    consumers = [share_consumer(broker.bootstrap, group, topic) for _ in range(3)]
    client = BlockingKafkaClient.connect(broker.bootstrap)
    try:
        def described() -> Any:
            for consumer in consumers:
                records(consumer, 0.1)
            answer = client.request(share_group_describe.API, 1, share_group_describe.REQUEST.cls(
                group_ids=[group], include_authorized_operations=False)).groups[0]
            stable = (answer.error_code == ErrorCode.NONE and len(answer.members) == 3
                      and all(m.member_epoch == answer.assignment_epoch == answer.group_epoch
                              for m in answer.members))
            return answer if stable else None

        answer = wait_for_sync(described, timeout=60, what="three share members assigned at the group epoch")
        assert (answer.group_state, answer.assignor_name) == ("Stable", "simple")
        # three members, two partitions: each member gets one, so one partition is shared
        assigned = sorted(p for m in answer.members for tp in m.assignment.topic_partitions for p in tp.partitions)
        assert assigned == [0, 0, 1] or assigned == [0, 1, 1]
        assert {tp.topic_name for m in answer.members for tp in m.assignment.topic_partitions} == {topic}

        listed = client.request(list_groups.API, 5, list_groups.REQUEST.cls(states_filter=[], types_filter=["share"]))
        assert [(g.group_id, g.group_type, g.group_state) for g in listed.groups if g.group_id == group] == [
            (group, "share", "Stable")]

        heartbeat = client.request(consumer_group_heartbeat.API, 1, consumer_group_heartbeat.REQUEST.cls(
            group_id=group, member_id=uuid.uuid4().hex, member_epoch=0, rebalance_timeout_ms=30_000,
            subscribed_topic_names=[topic], topic_partitions=[]))
        assert heartbeat.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        joined = client.request(join_group.API, 5, join_group.REQUEST.cls(
            group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
            protocol_type="consumer", protocols=[join_group.REQUEST.JoinGroupRequestProtocol(name="range",
                                                                                            metadata=b"")]))
        assert joined.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    finally:
        client.close()
        for consumer in consumers:
            consumer.close()


def test_a_read_committed_share_group_gets_committed_records_only_and_waits_for_an_open_transaction(
        broker: BrokerProcess, admin: AdminClient) -> None:
    topic, group = new_topic(admin), new_group(admin, share_isolation_level="read_committed")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique("txn")})
    producer.init_transactions(30)
    for outcome in ("aborted", "committed"):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, f"{outcome}-{i}".encode())
        producer.flush(30)
        if outcome == "aborted":
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    producer.begin_transaction()  # left open: what follows it waits for its end
    producer.produce(topic, b"open-0")
    producer.flush(30)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, b"after-open")
    plain.flush(30)
    consumer = share_consumer(broker.bootstrap, group, topic)
    try:
        got: list[bytes] = []
        wait_for_sync(lambda: got.extend(m.value() for m in records(consumer)) or len(got) >= 3, timeout=60,
                      what="the committed records")
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            got += [m.value() for m in records(consumer)]
        assert got == [b"committed-0", b"committed-1", b"committed-2"]
        producer.commit_transaction(30)
        wait_for_sync(lambda: got.extend(m.value() for m in records(consumer)) or len(got) >= 5, timeout=60,
                      what="the records after the transaction's commit")
        assert got[3:] == [b"open-0", b"after-open"]
    finally:
        consumer.close()
