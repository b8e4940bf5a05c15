"""KIP-848 consumer groups (`group.protocol=consumer`) with real confluent-kafka clients against a real broker process.

What `test_clients.py` does not cover already (sharing, joining, leaving, a SIGKILLed member, exactly-once commits
and a broker restart are there): static members restarting within their session, regex subscriptions picking up
new topics, the `range` and `uniform` assignors, an unknown assignor, commits with a stale member epoch, the group
type in AdminClient's describe and list, classic and consumer groups side by side, and a group id moving between
the two protocols. Consumers run in this process, each polled by its own thread (a librdkafka handle is used by
that thread only); what a test waits for is read from what the threads recorded.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    KafkaError,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from epoch_broker.client.blocking import BlockingKafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import consumer_group_describe as describe_messages
from epoch_broker.protocol.messages import offset_commit
from tests.helpers import BrokerProcess, start_broker, wait_for_sync

SESSION_MS = 6000
# Three offsets partitions so groups of one test spread over them; the session is the broker's (the consumer
# protocol has no client-side session.timeout.ms); members heartbeat every 500 ms as with the test kit's
# defaults (start_broker starts from `serve`'s, Kafka's 5 s), so each reconciliation step takes half a second.
BROKER_OVERRIDES = {"offsets.topic.num.partitions": "3", "group.consumer.session.timeout.ms": str(SESSION_MS),
                    "group.consumer.heartbeat.interval.ms": "500"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory.mktemp("consumer-protocol"), BROKER_OVERRIDES)
    yield process
    process.stop()


@pytest.fixture
def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def create_topics(admin: AdminClient, *topics: str, partitions: int = 2) -> None:
    for future in admin.create_topics([NewTopic(t, partitions, 1) for t in topics]).values():
        future.result(30)


def produce(bootstrap: str, topic: str, count: int, partitions: int = 2, prefix: str = "v") -> list[str]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    values = [f"{prefix}{i}" for i in range(count)]
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=i % partitions)
    assert producer.flush(30) == 0
    return values


class Member:
    """One confluent-kafka consumer polled by its own thread: what it owns (incremental callbacks with the consumer
    protocol, eager ones with classic), the records it read, the errors poll gave it. `close()` leaves (a static
    member's close is a temporary leave, epoch -2)."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], *, protocol: str = "consumer",
                 commit: bool = False, config: dict[str, Any] | None = None) -> None:
        settings: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                                    "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 500,
                                    **(config or {})}
        if protocol == "consumer":
            settings["group.protocol"] = "consumer"
        self.consumer = Consumer(settings)
        self.protocol = protocol
        self.commit = commit
        self.owned: set[tuple[str, int]] = set()
        self.records: list[tuple[str, int, int, str]] = []  # topic, partition, offset, value
        self.errors: list[KafkaError] = []
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._closed = threading.Event()
        self.consumer.subscribe(topics, on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _assigned(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        with self.lock:
            if self.protocol != "consumer":
                self.owned.clear()  # classic eager: the assignment is the whole set
            self.owned.update((p.topic, p.partition) for p in partitions)

    def _revoked(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        with self.lock:
            self.owned.difference_update((p.topic, p.partition) for p in partitions)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                message = self.consumer.poll(0.1)
                if message is None:
                    continue
                if (error := message.error()) is not None:
                    with self.lock:
                        self.errors.append(error)
                    continue
                if self.commit:
                    self.consumer.commit(message=message, asynchronous=False)
                with self.lock:
                    self.records.append((str(message.topic()), int(message.partition() or 0),
                                         int(message.offset() or 0), bytes(message.value() or b"").decode()))
        finally:
            self.consumer.close()
            self._closed.set()

    def close(self) -> None:
        self._stop.set()
        assert self._closed.wait(30), "the consumer did not close"

    def owns(self) -> set[tuple[str, int]]:
        with self.lock:
            return set(self.owned)

    def values(self) -> list[str]:
        with self.lock:
            return [value for _, _, _, value in self.records]

    def errors_seen(self) -> list[KafkaError]:
        with self.lock:
            return list(self.errors)

    def error_codes(self) -> list[int]:
        return [error.code() for error in self.errors_seen()]


@pytest.fixture
def members() -> Iterator[list[Member]]:
    """Consumers a test starts, closed at its end whatever happened."""
    started: list[Member] = []
    yield started
    for member in started:
        if not member._closed.is_set():
            member.close()


def partitions_of(topic: str, n: int) -> set[tuple[str, int]]:
    return {(topic, p) for p in range(n)}


def describe(admin: AdminClient, group: str) -> Any:
    (future,) = admin.describe_consumer_groups([group]).values()
    return future.result(10)


def described_assignments(admin: AdminClient, group: str) -> dict[str, set[tuple[str, int]]]:
    """member id -> its assignment, as AdminClient describes it."""
    return {m.member_id: {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions}
            for m in describe(admin, group).members}


def consumer_group_describe(bootstrap: str, group: str) -> Any:
    """ConsumerGroupDescribe v1 by the project's own client: what AdminClient does not show (member epochs, the
    subscribed regex). The broker is the group's coordinator (the only broker)."""
    request = describe_messages.REQUEST
    with BlockingKafkaClient.connect(bootstrap) as client:
        answer = client.request(describe_messages.API, 1, request.cls(group_ids=[group]))
    (described,) = answer.groups
    assert described.error_code == ErrorCode.NONE, described
    return described


# -- 1. static members ------------------------------------------------------------------------------------------

def test_a_static_member_that_restarts_within_its_session_gets_its_partitions_back_and_nobody_else_moves(
        broker: BrokerProcess, admin: AdminClient, members: list[Member]) -> None:
    topic, group = unique("static"), unique("g-static")
    create_topics(admin, topic, partitions=4)
    everyone = partitions_of(topic, 4)
    members += [Member(broker.bootstrap, group, [topic], config={"group.instance.id": f"instance-{i}"})
                for i in range(2)]
    wait_for_sync(lambda: members[0].owns() | members[1].owns() == everyone and all(m.owns() for m in members), 30,
                  what="two static members to share the partitions")
    wait_for_sync(lambda: describe(admin, group).state == ConsumerGroupState.STABLE, 30, what="a stable group")
    stayed, before = members[0].owns(), members[1].owns()

    # Close (member epoch -2, a temporary leave): its partitions wait for it, the other keeps only its own.
    def unchanged(condition: Callable[[], Any]) -> Callable[[], Any]:
        def check() -> Any:
            assert members[0].owns() == stayed, "the other member's assignment changed while the static one was away"
            return condition()
        return check

    members[1].close()
    # The coordinator holds the member at epoch -2 (a temporary leave) with its assignment, until it returns.
    away = wait_for_sync(unchanged(lambda: [m for m in consumer_group_describe(broker.bootstrap, group).members
                                            if m.instance_id == "instance-1" and m.member_epoch == -2]), 10,
                         what="the closed static member held at epoch -2")
    assert {(tp.topic_name, p) for tp in away[0].assignment.topic_partitions for p in tp.partitions} == before
    restarted_at = time.monotonic()
    members.append(Member(broker.bootstrap, group, [topic], config={"group.instance.id": "instance-1"}))
    wait_for_sync(unchanged(lambda: members[2].owns() == before), 30,
                  what="the restarted instance to get its partitions back")
    assert time.monotonic() - restarted_at < SESSION_MS / 1000, "the partitions came back only after the session"
    assert members[0].owns() == stayed
    assigned = described_assignments(admin, group)
    assert sorted(map(sorted, assigned.values())) == sorted([sorted(stayed), sorted(before)])
    assert {m.group_instance_id for m in describe(admin, group).members} == {"instance-0", "instance-1"}


# -- 2. regex subscriptions -------------------------------------------------------------------------------------

def test_a_regex_subscription_picks_up_a_topic_created_after_the_member_joined_and_skips_names_it_does_not_match(
        broker: BrokerProcess, admin: AdminClient, members: list[Member]) -> None:
    """librdkafka sends a `^`-prefixed subscription as SubscribedTopicRegex (ConsumerGroupHeartbeat v1), each
    pattern in parentheses (several are joined by `|`), which the broker matches against whole topic names:
    `orders` is not `orders-.*`."""
    base = unique("orders")
    create_topics(admin, base, f"{base}-eu")
    produce(broker.bootstrap, base, 4, prefix="plain")
    produce(broker.bootstrap, f"{base}-eu", 4, prefix="eu")
    group = unique("g-regex")
    members.append(Member(broker.bootstrap, group, [f"^{base}-.*"]))
    (member,) = members
    wait_for_sync(lambda: member.owns() == partitions_of(f"{base}-eu", 2), 30, what="the matching topic's partitions")
    (described,) = consumer_group_describe(broker.bootstrap, group).members
    assert (described.subscribed_topic_regex, described.subscribed_topic_names) == (f"(^{base}-.*)", [])

    create_topics(admin, f"{base}-us")  # after the join; the client does not subscribe again
    us = produce(broker.bootstrap, f"{base}-us", 4, prefix="us")
    wait_for_sync(lambda: member.owns() == partitions_of(f"{base}-eu", 2) | partitions_of(f"{base}-us", 2), 30,
                  what="the topic created later")
    wait_for_sync(lambda: set(us) <= set(member.values()), 30, what="the new topic's records")
    assert not any(value.startswith("plain") for value in member.values())


# -- 3. the assignors -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("assignor", ["range", "uniform"])
def test_both_server_assignors_spread_two_topics_over_two_members_as_they_should(
        broker: BrokerProcess, admin: AdminClient, members: list[Member], assignor: str) -> None:
    """range co-partitions (a member gets partition p of every topic); uniform balances."""
    first, second, group = unique("left"), unique("right"), unique(f"g-{assignor}")
    create_topics(admin, first, second)
    everything = partitions_of(first, 2) | partitions_of(second, 2)
    members += [Member(broker.bootstrap, group, [first, second], config={"group.remote.assignor": assignor})
                for _ in range(2)]
    wait_for_sync(lambda: members[0].owns() | members[1].owns() == everything
                  and not members[0].owns() & members[1].owns() and all(m.owns() for m in members), 30,
                  what="two members sharing both topics")
    owned = [m.owns() for m in members]
    assert [len(o) for o in owned] == [2, 2]
    if assignor == "range":
        for o in owned:
            (p,) = {partition for _, partition in o}
            assert o == {(first, p), (second, p)}
    assert describe(admin, group).partition_assignor == assignor


# -- 4. an unknown assignor -------------------------------------------------------------------------------------

def test_an_unknown_server_assignor_fails_with_unsupported_assignor(
        broker: BrokerProcess, admin: AdminClient, members: list[Member]) -> None:
    topic = unique("unknown-assignor")
    create_topics(admin, topic)
    members.append(Member(broker.bootstrap, unique("g-sticky"), [topic], config={"group.remote.assignor": "sticky"}))
    error, *_ = wait_for_sync(members[0].errors_seen, 30, what="an error from poll")
    # librdkafka makes the heartbeat's UNSUPPORTED_ASSIGNOR a fatal consumer error: poll gives a _FATAL event whose
    # text names the error (librdkafka's text for code 112); the code itself is rd_kafka_fatal_error's, which
    # confluent-kafka does not expose.
    assert error.code() == KafkaError._FATAL, error
    assert "ConsumerGroupHeartbeat fatal error: Broker: The assignor or its version range is not supported" in \
        error.str(), error
    assert not members[0].owns()


# -- 5. commits with a stale member epoch -----------------------------------------------------------------------

def test_an_offset_commit_with_a_stale_member_epoch_is_refused_and_with_the_members_epoch_accepted(
        broker: BrokerProcess, admin: AdminClient, members: list[Member]) -> None:
    topic, group = unique("stale"), unique("g-stale")
    create_topics(admin, topic)
    members.append(Member(broker.bootstrap, group, [topic]))
    wait_for_sync(lambda: members[0].owns() == partitions_of(topic, 2), 30, what="the member's assignment")
    (member,) = wait_for_sync(lambda: (d := consumer_group_describe(broker.bootstrap, group)).group_state == "Stable"
                              and d.members, 30, what="a stable group")
    (admin_member,) = describe(admin, group).members
    assert admin_member.member_id == member.member_id and member.member_epoch > 0

    def commit(epoch: int, offset: int) -> int:
        request = offset_commit.REQUEST
        with BlockingKafkaClient.connect(broker.bootstrap) as client:
            answer = client.request(offset_commit.API, 9, request.cls(
                group_id=group, generation_id_or_member_epoch=epoch, member_id=member.member_id,
                topics=[request.OffsetCommitRequestTopic(name=topic, partitions=[
                    request.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                         committed_metadata="")])]))
        ((partition,),) = [t.partitions for t in answer.topics]
        return partition.error_code

    assert commit(member.member_epoch - 1, 1) == ErrorCode.STALE_MEMBER_EPOCH
    assert commit(member.member_epoch, 2) == ErrorCode.NONE
    (offsets,) = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    assert {(tp.topic, tp.partition): tp.offset for tp in offsets.result(10).topic_partitions}[(topic, 0)] == 2


# -- 6. the group type in AdminClient ---------------------------------------------------------------------------

def test_admin_describes_and_lists_consumer_and_classic_groups_by_type(
        broker: BrokerProcess, admin: AdminClient, members: list[Member]) -> None:
    topic, modern, classic = unique("typed"), unique("g-modern"), unique("g-classic")
    create_topics(admin, topic)
    members += [Member(broker.bootstrap, modern, [topic]), Member(broker.bootstrap, modern, [topic]),
                Member(broker.bootstrap, classic, [topic], protocol="classic")]
    wait_for_sync(lambda: all(m.owns() for m in members), 30, what="every member to hold a partition")

    described = wait_for_sync(lambda: (d := describe(admin, modern)).state == ConsumerGroupState.STABLE and d, 30,
                              what="a stable consumer group")
    assert described.type == ConsumerGroupType.CONSUMER
    assert len(described.members) == 2
    assert sorted(tp.partition for m in described.members for tp in m.assignment.topic_partitions) == [0, 1]
    assert describe(admin, classic).type == ConsumerGroupType.CLASSIC

    def listed(types: set[ConsumerGroupType]) -> set[str]:
        return {g.group_id for g in admin.list_consumer_groups(types=types).result(10).valid}

    assert modern in listed({ConsumerGroupType.CONSUMER}) and classic not in listed({ConsumerGroupType.CONSUMER})
    assert classic in listed({ConsumerGroupType.CLASSIC}) and modern not in listed({ConsumerGroupType.CLASSIC})
    types = {g.group_id: g.type for g in admin.list_consumer_groups().result(10).valid}
    assert (types[modern], types[classic]) == (ConsumerGroupType.CONSUMER, ConsumerGroupType.CLASSIC)


# -- 7. classic and consumer groups side by side ----------------------------------------------------------------

def test_a_consumer_group_and_a_kafka_python_classic_group_on_one_topic_each_read_every_record(
        broker: BrokerProcess, admin: AdminClient, members: list[Member], caplog: pytest.LogCaptureFixture) -> None:
    from kafka import KafkaConsumer

    caplog.set_level(logging.DEBUG, logger="kafka")  # kafka-python's own account, shown if it reads too little

    topic = unique("both")
    create_topics(admin, topic)
    values = produce(broker.bootstrap, topic, 40)
    modern = unique("g-modern")
    members += [Member(broker.bootstrap, modern, [topic]) for _ in range(2)]
    read_classic: list[str] = []
    stop = threading.Event()

    def classic() -> None:
        consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=unique("g-kafka-python"),
                                 auto_offset_reset="earliest", enable_auto_commit=False)
        try:
            while not stop.is_set():
                for batch in consumer.poll(timeout_ms=100).values():
                    read_classic.extend(record.value.decode() for record in batch)
        finally:
            consumer.close()

    thread = threading.Thread(target=classic, daemon=True)
    thread.start()
    try:
        wait_for_sync(lambda: set(read_classic) == set(values), 30, what="the classic group to read every record")
        wait_for_sync(lambda: set(members[0].values() + members[1].values()) == set(values), 30,
                      what="the consumer group to read every record")
    finally:
        stop.set()
        thread.join(30)


# -- 8. one group id, two protocols -----------------------------------------------------------------------------

def test_a_classic_join_to_a_group_with_consumer_protocol_members_fails_with_group_id_not_found(
        broker: BrokerProcess, admin: AdminClient, members: list[Member]) -> None:
    topic, group = unique("mixed"), unique("g-mixed")
    create_topics(admin, topic)
    members.append(Member(broker.bootstrap, group, [topic]))
    wait_for_sync(lambda: members[0].owns() == partitions_of(topic, 2), 30,
                  what="the consumer-protocol member's partitions")
    members.append(Member(broker.bootstrap, group, [topic], protocol="classic"))
    wait_for_sync(members[1].errors_seen, 30, what="an error for the classic member")
    assert KafkaError.GROUP_ID_NOT_FOUND in members[1].error_codes(), members[1].errors
    assert not members[1].owns() and members[0].owns() == partitions_of(topic, 2)


def test_an_empty_classic_group_is_taken_over_by_a_consumer_protocol_member_which_resumes_from_its_offsets(
        broker: BrokerProcess, admin: AdminClient, members: list[Member]) -> None:
    topic, group = unique("upgrade"), unique("g-upgrade")
    create_topics(admin, topic)
    first = produce(broker.bootstrap, topic, 10, prefix="first")
    members.append(Member(broker.bootstrap, group, [topic], protocol="classic", commit=True))
    wait_for_sync(lambda: sorted(members[0].values()) == sorted(first), 30, what="the classic consumer's records")
    members[0].close()
    assert describe(admin, group).type == ConsumerGroupType.CLASSIC

    then = produce(broker.bootstrap, topic, 10, prefix="then")
    members.append(Member(broker.bootstrap, group, [topic]))
    wait_for_sync(lambda: sorted(members[1].values()) == sorted(then), 30,
                  what="the records after the committed offsets")
    assert not set(members[1].values()) & set(first)
    assert describe(admin, group).type == ConsumerGroupType.CONSUMER
