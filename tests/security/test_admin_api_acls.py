"""Authorization of AlterReplicaLogDirs, DescribeQuorum and DescribeTopicPartitions on a broker with Kafka's
authorizer, through kafka-python 3.0's admin client over SASL: ALTER on the cluster to move replicas, DESCRIBE on
the cluster to describe the quorum (admin, the super user, may), and DescribeTopicPartitions answering only the
topics a principal may describe, the others refused after them and never named by the cursor."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ACL, ACLOperation, ACLPermissionType, NewTopic, ResourcePattern, ResourceType
from kafka.errors import ClusterAuthorizationFailedError, NoError
from kafka.structs import TopicPartitionReplica

from epoch_broker import testing
from epoch_broker.protocol.errors import ErrorCode
from tests.security.test_acls import CONFIG, LISTENER, PASSWORDS  # the SASL listener with Kafka's authorizer


@pytest.fixture(scope="module")
def broker() -> Iterator[testing.Broker]:
    with testing.broker(config=CONFIG) as started:
        yield started


@contextmanager
def admin_as(broker: testing.Broker, user: str) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.address(LISTENER), security_protocol=LISTENER,
                              sasl_mechanism="PLAIN", sasl_plain_username=user, sasl_plain_password=PASSWORDS[user])
    try:
        yield client
    finally:
        client.close()


def create_topics(broker: testing.Broker, *names: str) -> None:
    with admin_as(broker, "admin") as admin:
        admin.create_topics([NewTopic(name, 2, 1) for name in names])
    testing.wait_until(lambda: set(names) <= set(broker.server.metadata.topics_by_name), "the topics created")


def test_moving_replicas_needs_alter_on_the_cluster(broker: testing.Broker) -> None:
    create_topics(broker, "moved")
    (home,) = broker.server.log_manager.log_dirs
    replica = TopicPartitionReplica("moved", 0, 0)
    with admin_as(broker, "alice") as alice:
        assert alice.alter_replica_log_dirs({replica: home}) == {replica: ClusterAuthorizationFailedError}
    with admin_as(broker, "admin") as admin:
        assert admin.alter_replica_log_dirs({replica: home}) == {replica: NoError}


def test_describing_the_quorum_needs_describe_on_the_cluster(broker: testing.Broker) -> None:
    with admin_as(broker, "alice") as alice, pytest.raises(ClusterAuthorizationFailedError):
        alice.describe_metadata_quorum()
    with admin_as(broker, "admin") as admin:
        (partition,) = admin.describe_metadata_quorum()["topics"][0]["partitions"]
    assert partition["error"] is None and partition["leader_id"] == 0


def test_topic_partitions_are_described_only_where_the_principal_may_describe_the_topic(
        broker: testing.Broker) -> None:
    names = [testing.unique_name(f"{letter}-dtp") for letter in "abcd"]
    a, b, c, d = sorted(names)
    create_topics(broker, *names)
    with admin_as(broker, "admin") as admin:
        admin.create_acls([ACL("User:alice", "*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW,
                               ResourcePattern(ResourceType.TOPIC, name)) for name in (b, d)])
    with admin_as(broker, "alice") as alice:
        first = alice.describe_topic_partitions(names, response_partition_limit=2)
        # b fills the page; the next page starts at d, the next topic alice may describe; a and c come last
        assert [(t["name"], t["error_code"], len(t["partitions"])) for t in first["topics"]] == [
            (b, ErrorCode.NONE, 2), (a, ErrorCode.TOPIC_AUTHORIZATION_FAILED, 0),
            (c, ErrorCode.TOPIC_AUTHORIZATION_FAILED, 0)]
        assert (first["next_cursor"]["topic_name"], first["next_cursor"]["partition_index"]) == (d, 0)
        rest = alice.describe_topic_partitions(names, response_partition_limit=2, cursor=first["next_cursor"])
        assert [(t["name"], t["error_code"], len(t["partitions"])) for t in rest["topics"]] == [(d, ErrorCode.NONE, 2)]
        assert rest["next_cursor"] is None
        every = alice.describe_topic_partitions([])
        assert {t["name"] for t in every["topics"]} & set(names) == {b, d}
