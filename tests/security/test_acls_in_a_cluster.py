"""ACLs in a 3-broker cluster: stored by the controller, so every broker answers and enforces the same ones, and
they survive a SIGKILL of the controller and a broker's restart. Replication (the brokers' own login, the
cluster secret) is not held back by ACLs written for clients.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from epoch_broker.client.aio import KafkaClient
from epoch_broker.drill import launcher
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import describe_acls
from tests.cluster.support import Cluster, create_topic, start_cluster, wait_for

pytestmark = pytest.mark.slow

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "allow.everyone.if.no.acl.found": "true"}  # clients are User:ANONYMOUS on the PLAINTEXT listeners
# Once a topic has an ACL, what no ACL allows is denied: everything is allowed on it, but writing
ALLOW_ALL = AclBinding(ResourceType.TOPIC, "locked", ResourcePatternType.LITERAL, "User:*", "*", AclOperation.ALL,
                       AclPermissionType.ALLOW)
DENY_WRITE = AclBinding(ResourceType.TOPIC, "locked", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                        AclOperation.WRITE, AclPermissionType.DENY)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    started = start_cluster(tmp_path_factory.mktemp("acls"), 3, AUTHORIZER)
    try:
        yield started
    finally:
        started.stop()


def produce_error(bootstrap: str, topic: str) -> KafkaError | None:
    """The delivery outcome of one acks=all record (None: acknowledged)."""
    outcome: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 30000})
    producer.produce(topic, b"x", on_delivery=lambda error, _m: outcome.append(error))
    producer.flush(40)
    assert len(outcome) == 1
    return outcome[0]


async def bindings_on(address: str) -> list[tuple[str, str, int, int]]:
    """(resource, principal, operation, permission) of every ACL, as this one broker answers DescribeAcls."""
    request = describe_acls.REQUEST.cls(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                                        principal_filter=None, host_filter=None, operation=1, permission_type=1)
    async with await KafkaClient.connect(address) as client:
        answer = await client.request(describe_acls.API, 3, request)
    assert answer.error_code == ErrorCode.NONE, answer
    return [(r.resource_name, a.principal, a.operation, a.permission_type) for r in answer.resources for a in r.acls]


async def every_broker_has(cluster: Cluster, expected: list[tuple[str, str, int, int]]) -> bool:
    return all([await bindings_on(cluster.broker(node).address) == expected for node in (0, 1, 2)])


async def test_acls_are_the_same_on_every_broker_and_survive_controller_and_broker_restarts(cluster: Cluster) -> None:
    await create_topic(cluster, "locked", replication_factor=3)
    await create_topic(cluster, "open", replication_factor=3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for binding, created in admin.create_acls([ALLOW_ALL, DENY_WRITE]).items():
        assert created.result(30) is None, binding
    denied = [("locked", "User:*", AclOperation.ALL.value, AclPermissionType.ALLOW.value),
              ("locked", "User:ANONYMOUS", AclOperation.WRITE.value, AclPermissionType.DENY.value)]
    await wait_for(lambda: every_broker_has(cluster, denied), what="the ACL on every broker")

    error = await asyncio.to_thread(produce_error, cluster.bootstrap, "locked")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert await asyncio.to_thread(produce_error, cluster.bootstrap, "open") is None  # replicated to all 3

    cluster.restart(launcher.CONTROLLER_NODE_ID, hard=True)  # SIGKILL: the ACL is in its fsynced metadata log
    leader = (await cluster.metadata())[("locked", 0)].leader
    cluster.restart(leader)  # the broker rebuilds its ACLs from the controller's records
    await wait_for(lambda: every_broker_has(cluster, denied), what="the ACL on every broker after the restarts")
    error = await asyncio.to_thread(produce_error, cluster.bootstrap, "locked")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    assert sorted(map(str, admin.delete_acls([everything])[everything].result(30))) == sorted(
        map(str, [ALLOW_ALL, DENY_WRITE]))
    await wait_for(lambda: every_broker_has(cluster, []), what="no ACL left on any broker")
    assert await asyncio.to_thread(produce_error, cluster.bootstrap, "locked") is None
