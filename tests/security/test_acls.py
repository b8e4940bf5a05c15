"""ACLs enforced on the client APIs, as Kafka's StandardAuthorizer and KafkaApis decide, seen through real clients:
confluent-kafka 2.16 (librdkafka) admin clients and producers, kafka-python 3.0 consumers (and its admin client
where librdkafka hides the broker's error).

One in-process broker with a SASL_PLAINTEXT listener only: PLAIN users admin, alice and bob, Kafka's standard
authorizer, and admin as the super user (the broker's own login too). Each test creates its topics and groups
under names of its own and grants its ACLs only for its duration (`granted`), so no test depends on another's.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePatternFilter
from kafka.admin import ResourceType as KafkaPythonResourceType
from kafka.errors import ClusterAuthorizationFailedError, GroupAuthorizationFailedError, TopicAuthorizationFailedError

from epoch_broker import testing
from tests.helpers import not_yet, wait_for_sync

pytestmark = pytest.mark.interop

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
# username/password: the broker's own login (its inter-broker client), as admin, the super user
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" '
        + " ".join(f'user_{user}="{password}"' for user, password in PASSWORDS.items()) + ";")
LISTENER = "SASL_PLAINTEXT"
CONFIG = {
    "listeners": f"{LISTENER}://127.0.0.1:0",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
    "fault.hooks.enable": "true",
}
TIMEOUT_S = 30.0  # the bound on every wait: generous, for a loaded 2-core machine
ALICE, BOB = "User:alice", "User:bob"
# Kafka's CLUSTER resource (type 4) in ACLs: librdkafka names its type BROKER
CLUSTER, CLUSTER_NAME = ResourceType.BROKER, "kafka-cluster"
FAULT_KEY = "fault.replication.paused"
T = TypeVar("T")


@pytest.fixture(scope="module")
def broker() -> Iterator[testing.Broker]:
    with testing.broker(config=CONFIG) as started:
        yield started


# -- clients ------------------------------------------------------------------------------------------------------

def librdkafka_config(broker: testing.Broker, user: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.address(LISTENER), "security.protocol": LISTENER, "sasl.mechanisms": "PLAIN",
            "sasl.username": user, "sasl.password": PASSWORDS[user], **extra}


def admin_client(broker: testing.Broker, user: str) -> AdminClient:
    """An AdminClient logged in as `user`. It has no close: librdkafka destroys it with its last reference,
    failing the futures still pending, so a caller keeps it until its answers are in."""
    return AdminClient(librdkafka_config(broker, user))


def result(future: Future[T]) -> T:
    return future.result(TIMEOUT_S)


def refusal(future: Future[Any]) -> int:
    """The error code an admin call's future fails with (it must fail)."""
    with pytest.raises(KafkaException) as refused:
        result(future)
    return refused.value.args[0].code()


def allow(resource_type: ResourceType, name: str, principal: str, operation: AclOperation,
          pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)


def deny(resource_type: ResourceType, name: str, principal: str, operation: AclOperation,
         pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, "*", operation, AclPermissionType.DENY)


def exactly(binding: AclBinding) -> AclBindingFilter:
    return AclBindingFilter(binding.restype, binding.name, binding.resource_pattern_type, binding.principal,
                            binding.host, binding.operation, binding.permission_type)


@contextmanager
def granted(broker: testing.Broker, *bindings: AclBinding) -> Iterator[None]:
    """The ACLs exist (created by admin) for the duration of the block, and are deleted after it."""
    admin = admin_client(broker, "admin")
    for future in admin.create_acls(list(bindings)).values():
        result(future)
    try:
        yield
    finally:
        for future in admin.delete_acls([exactly(b) for b in bindings]).values():
            result(future)


def create_topics(broker: testing.Broker, *names: str) -> None:
    admin = admin_client(broker, "admin")
    for future in admin.create_topics([NewTopic(name, 1, 1) for name in names]).values():
        result(future)


def produce_outcomes(broker: testing.Broker, user: str, topics: list[str],
                     **extra: Any) -> dict[str, KafkaError | None]:
    """One record to each topic as `user`: its delivery error (None: acknowledged)."""
    outcomes: dict[str, KafkaError | None] = {}
    producer = Producer(librdkafka_config(broker, user, **{"message.timeout.ms": 20000, **extra}))
    try:
        for topic in topics:
            producer.produce(topic, b"x", on_delivery=lambda error, message: outcomes.update({message.topic(): error}))
        assert producer.flush(TIMEOUT_S) == 0, "records still queued after the flush"
    finally:
        producer.close()
    return outcomes


def error_codes(outcomes: dict[str, KafkaError | None]) -> dict[str, int | None]:
    return {topic: None if error is None else error.code() for topic, error in outcomes.items()}


def kafka_python_config(broker: testing.Broker, user: str) -> dict[str, Any]:
    return {"bootstrap_servers": broker.address(LISTENER), "security_protocol": LISTENER, "sasl_mechanism": "PLAIN",
            "sasl_plain_username": user, "sasl_plain_password": PASSWORDS[user]}


@contextmanager
def kafka_python_admin(broker: testing.Broker, user: str) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(**kafka_python_config(broker, user))
    try:
        yield client
    finally:
        client.close()


def kafka_python_read(broker: testing.Broker, user: str, topic: str, group: str, count: int) -> list[bytes]:
    """`count` records of `topic` read as `user` in `group` with kafka-python; its errors are raised."""
    consumer = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", **kafka_python_config(broker, user))
    values: list[bytes] = []

    def read() -> object:
        for records in consumer.poll(timeout_ms=500).values():
            values.extend(record.value for record in records)
        return len(values) >= count or not_yet(f"{len(values)} read")

    try:
        wait_for_sync(read, TIMEOUT_S, interval=0, what=f"{count} records of {topic} read as {user}")
    finally:
        consumer.close()
    return values


def unique(prefix: str) -> str:
    return testing.unique_name(prefix)


# -- topics ---------------------------------------------------------------------------------------------------------

def test_a_literal_write_acl_lets_alice_write_that_topic_and_no_other(broker: testing.Broker) -> None:
    writable, describable, unknown_to_her = unique("a"), unique("b"), unique("c")
    create_topics(broker, writable, describable, unknown_to_her)
    with granted(broker, allow(ResourceType.TOPIC, writable, ALICE, AclOperation.WRITE),
                 allow(ResourceType.TOPIC, describable, ALICE, AclOperation.DESCRIBE)):
        outcomes = produce_outcomes(broker, "alice", [writable, describable, unknown_to_her])
    refused = KafkaError.TOPIC_AUTHORIZATION_FAILED
    # `describable` is refused by Produce itself, `unknown_to_her` already by Metadata
    assert error_codes(outcomes) == {writable: None, describable: refused, unknown_to_her: refused}
    admin = admin_client(broker, "admin")
    ends = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.latest() for topic in (writable, describable)})
    assert {tp.topic: result(future).offset for tp, future in ends.items()} == {writable: 1, describable: 0}


def test_reading_needs_read_on_the_topic_and_on_the_group(broker: testing.Broker) -> None:
    topic, group = unique("read"), unique("readers")
    create_topics(broker, topic)
    assert error_codes(produce_outcomes(broker, "admin", [topic])) == {topic: None}
    with granted(broker, allow(ResourceType.TOPIC, topic, ALICE, AclOperation.READ)):
        with pytest.raises(GroupAuthorizationFailedError):
            kafka_python_read(broker, "alice", topic, group, 1)
        with granted(broker, allow(ResourceType.GROUP, group, ALICE, AclOperation.READ)):
            assert kafka_python_read(broker, "alice", topic, group, 1) == [b"x"]
    # bob may join the group and see the topic, but not read it
    with granted(broker, allow(ResourceType.GROUP, group, BOB, AclOperation.READ),
                 allow(ResourceType.TOPIC, topic, BOB, AclOperation.DESCRIBE)), (
            pytest.raises(TopicAuthorizationFailedError)):
        kafka_python_read(broker, "bob", topic, group, 1)


def test_a_prefixed_acl_covers_every_topic_whose_name_starts_with_the_prefix(broker: testing.Broker) -> None:
    prefix = unique("logs") + "-"
    inside, also_inside, outside = prefix + "app", prefix + "db", unique("metrics")
    create_topics(broker, inside, also_inside, outside)
    with granted(broker, allow(ResourceType.TOPIC, prefix, ALICE, AclOperation.WRITE, ResourcePatternType.PREFIXED)):
        outcomes = produce_outcomes(broker, "alice", [inside, also_inside, outside])
    assert error_codes(outcomes) == {inside: None, also_inside: None, outside: KafkaError.TOPIC_AUTHORIZATION_FAILED}


def test_a_deny_acl_beats_an_allow_acl(broker: testing.Broker) -> None:
    prefix = unique("shared") + "-"
    open_topic, secret = prefix + "open", prefix + "secret"
    create_topics(broker, open_topic, secret)
    with granted(broker, allow(ResourceType.TOPIC, prefix, ALICE, AclOperation.ALL, ResourcePatternType.PREFIXED),
                 deny(ResourceType.TOPIC, secret, ALICE, AclOperation.WRITE)):
        outcomes = produce_outcomes(broker, "alice", [open_topic, secret])
        # a DENY implies nothing: she still sees the topic she may not write
        alice = admin_client(broker, "alice")
        assert secret in alice.list_topics(timeout=TIMEOUT_S).topics
    assert error_codes(outcomes) == {open_topic: None, secret: KafkaError.TOPIC_AUTHORIZATION_FAILED}


def test_metadata_hides_the_topics_alice_may_not_describe(broker: testing.Broker) -> None:
    seen, hidden = unique("seen"), unique("hidden")
    create_topics(broker, seen, hidden)
    alice = admin_client(broker, "alice")
    with granted(broker, allow(ResourceType.TOPIC, seen, ALICE, AclOperation.DESCRIBE)):
        listed = alice.list_topics(timeout=TIMEOUT_S).topics
        assert seen in listed and hidden not in listed
        named = alice.list_topics(topic=hidden, timeout=TIMEOUT_S).topics[hidden]
        assert named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED and not named.partitions
        described = result(alice.describe_topics(TopicCollection([seen]), include_authorized_operations=True)[seen])
        assert set(described.authorized_operations) == {AclOperation.DESCRIBE}
    assert seen not in alice.list_topics(timeout=TIMEOUT_S).topics  # the ACL is gone, and the topic with it


def test_auto_creation_needs_create_on_the_cluster_or_the_topic(broker: testing.Broker) -> None:
    refused, created = unique("auto-refused"), unique("auto-created")
    with granted(broker, allow(ResourceType.TOPIC, refused, ALICE, AclOperation.WRITE),
                 allow(ResourceType.TOPIC, created, ALICE, AclOperation.WRITE),
                 allow(ResourceType.TOPIC, created, ALICE, AclOperation.CREATE)):
        outcomes = produce_outcomes(broker, "alice", [refused, created])
    assert error_codes(outcomes) == {refused: KafkaError.TOPIC_AUTHORIZATION_FAILED, created: None}
    assert refused not in broker.server.metadata.topics_by_name and created in broker.server.metadata.topics_by_name


def test_an_idempotent_producer_needs_idempotent_write_or_write_on_some_topic(broker: testing.Broker) -> None:
    topic = unique("idempotent")
    create_topics(broker, topic)
    idempotent = {"enable.idempotence": True}
    with granted(broker, allow(ResourceType.TOPIC, topic, ALICE, AclOperation.WRITE),
                 allow(ResourceType.TOPIC, topic, BOB, AclOperation.DESCRIBE)):
        # KIP-679: WRITE on a topic is enough for a producer id
        assert error_codes(produce_outcomes(broker, "alice", [topic], **idempotent)) == {topic: None}
        producer = Producer(librdkafka_config(broker, "bob", **idempotent))
        try:
            producer.produce(topic, b"x")
            with pytest.raises(KafkaException) as failed:
                producer.flush(TIMEOUT_S)
            error = failed.value.args[0]
            assert error.fatal() and error.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        finally:
            producer.close()


# -- the cluster and groups -----------------------------------------------------------------------------------------

def test_alice_may_not_create_topics_or_acls_without_permission_on_the_cluster(broker: testing.Broker) -> None:
    existing, wanted, hers = unique("existing"), unique("wanted"), unique("hers")
    create_topics(broker, existing)
    alice = admin_client(broker, "alice")
    assert refusal(alice.create_topics([NewTopic(wanted, 1, 1)])[wanted]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert refusal(alice.delete_topics([existing])[existing]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    binding = allow(ResourceType.TOPIC, existing, ALICE, AclOperation.ALL)
    assert refusal(alice.create_acls([binding])[binding]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # librdkafka answers a refused DescribeAcls with an empty list: kafka-python raises the broker's error
    with kafka_python_admin(broker, "alice") as kafka_python, pytest.raises(ClusterAuthorizationFailedError):
        kafka_python.describe_acls(ACLFilter(None, "*", ACLOperation.ANY, ACLPermissionType.ANY, ResourcePatternFilter(
            KafkaPythonResourceType.ANY, None, ACLResourcePatternType.ANY)))
    broker_configs = ConfigResource(ResourceType.BROKER, "0")
    assert refusal(alice.describe_configs([broker_configs])[broker_configs]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    with granted(broker, allow(ResourceType.TOPIC, hers, ALICE, AclOperation.CREATE)):
        result(alice.create_topics([NewTopic(hers, 1, 1)])[hers])  # CREATE on that one topic
        assert refusal(alice.create_topics([NewTopic(wanted, 1, 1)])[wanted]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with granted(broker, allow(CLUSTER, CLUSTER_NAME, ALICE, AclOperation.CREATE)):
        result(alice.create_topics([NewTopic(wanted, 1, 1)])[wanted])  # CREATE on the cluster: any topic
    assert {hers, wanted} <= set(broker.server.metadata.topics_by_name)


def test_group_apis_need_acls_on_the_group(broker: testing.Broker) -> None:
    topic, group = unique("committed"), unique("group")
    create_topics(broker, topic)
    admin, alice = admin_client(broker, "admin"), admin_client(broker, "alice")
    committed = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 0)])
    result(admin.alter_consumer_group_offsets([committed])[group])  # an empty group with one committed offset

    def listed(client: AdminClient) -> set[str]:
        return {g.group_id for g in result(client.list_consumer_groups()).valid}

    assert group in listed(admin) and group not in listed(alice)
    assert refusal(alice.describe_consumer_groups([group])[group]) == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert refusal(alice.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]) == (
        KafkaError.GROUP_AUTHORIZATION_FAILED)
    with granted(broker, allow(ResourceType.GROUP, group, ALICE, AclOperation.DESCRIBE)):
        assert group in listed(alice)
        offsets = result(alice.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group])
        assert offsets.topic_partitions == []  # she may see the group, not the topic it committed on
        assert refusal(alice.delete_consumer_groups([group])[group]) == KafkaError.GROUP_AUTHORIZATION_FAILED
    with granted(broker, allow(CLUSTER, CLUSTER_NAME, ALICE, AclOperation.DESCRIBE)):
        assert group in listed(alice)  # DESCRIBE on the cluster lists every group
    result(admin.delete_consumer_groups([group])[group])


def test_the_super_user_bypasses_every_acl(broker: testing.Broker) -> None:
    topic, group, created = unique("guarded"), unique("guarded-group"), unique("guarded-new")
    create_topics(broker, topic)
    everyone = "User:*"
    with granted(broker, deny(ResourceType.TOPIC, "*", everyone, AclOperation.ALL),
                 deny(ResourceType.GROUP, "*", everyone, AclOperation.ALL),
                 deny(CLUSTER, CLUSTER_NAME, everyone, AclOperation.ALL)):
        assert error_codes(produce_outcomes(broker, "admin", [topic], **{"enable.idempotence": True})) == {topic: None}
        assert kafka_python_read(broker, "admin", topic, group, 1) == [b"x"]
        admin = admin_client(broker, "admin")
        result(admin.create_topics([NewTopic(created, 1, 1)])[created])
        broker_configs = ConfigResource(ResourceType.BROKER, "0")
        assert result(admin.describe_configs([broker_configs])[broker_configs])
        assert error_codes(produce_outcomes(broker, "alice", [topic])) == {topic: KafkaError.TOPIC_AUTHORIZATION_FAILED}


def test_fault_hooks_need_alter_on_the_cluster_besides_alter_configs(broker: testing.Broker) -> None:
    faults = broker.server.faults

    def pause(client: AdminClient, operation: AlterConfigOpType) -> Future[Any]:
        resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
            ConfigEntry(FAULT_KEY, "true", incremental_operation=operation)])
        return client.incremental_alter_configs([resource])[resource]

    alice = admin_client(broker, "alice")
    with granted(broker, allow(CLUSTER, CLUSTER_NAME, ALICE, AclOperation.ALTER_CONFIGS)):
        assert refusal(pause(alice, AlterConfigOpType.SET)) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    bob = admin_client(broker, "bob")
    assert refusal(pause(bob, AlterConfigOpType.SET)) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert faults.replication_paused is False  # nothing happened
    admin = admin_client(broker, "admin")
    try:
        result(pause(admin, AlterConfigOpType.SET))
        assert faults.replication_paused is True
    finally:
        result(pause(admin, AlterConfigOpType.DELETE))
    assert faults.replication_paused is False


# -- persistence ----------------------------------------------------------------------------------------------------

def test_acls_survive_a_restart(tmp_path: Path) -> None:
    topic, other = unique("kept"), unique("other")
    binding = allow(ResourceType.TOPIC, topic, ALICE, AclOperation.WRITE)
    with testing.broker(config=CONFIG, data_dir=tmp_path) as restarted:
        create_topics(restarted, topic, other)
        admin = admin_client(restarted, "admin")
        result(admin.create_acls([binding])[binding])
        del admin  # closed before the restart (with its last reference)
        restarted.restart()
        everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                      AclPermissionType.ANY)
        admin = admin_client(restarted, "admin")
        assert result(admin.describe_acls(everything)) == [binding]
        outcomes = produce_outcomes(restarted, "alice", [topic, other])
    assert error_codes(outcomes) == {topic: None, other: KafkaError.TOPIC_AUTHORIZATION_FAILED}
