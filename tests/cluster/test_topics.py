"""Topic administration in a cluster, on real processes, through a stock admin client: brokers forward
CreateTopics, CreatePartitions and DeleteTopics to the controller (Metadata names the answering broker as the
controller, as KRaft brokers do), replicas are spread over the brokers, and a deleted topic's logs go from every
broker that hosted them.
"""

from __future__ import annotations

from collections import Counter

from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.cluster.support import Cluster, partition_dir, produce, wait_for, wait_state

TOPIC = "spread"


def admin_call(futures: dict) -> None:
    for future in futures.values():
        assert future.result(15) is None


async def test_topics_are_spread_grown_and_deleted_on_every_broker_through_a_stock_admin_client(
        cluster: Cluster) -> None:
    """CreateTopics with a replication factor spreads replicas and leaders over the brokers; CreatePartitions
    adds partitions that get leaders; DeleteTopics removes the topic from the metadata and its logs from every
    broker."""
    client = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin_call(client.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=3)]))
    for partition in range(3):
        await wait_state(cluster, TOPIC, lambda s: len(s.isr) == 3, partition=partition,
                         what=f"{TOPIC}-{partition} with an ISR of 3")
    states = await cluster.metadata()
    assert Counter(states[(TOPIC, p)].leader for p in range(3)) == Counter({0: 1, 1: 1, 2: 1})
    assert all(sorted(states[(TOPIC, p)].replicas) == [0, 1, 2] for p in range(3))
    for partition in range(3):
        leader = states[(TOPIC, partition)].leader
        answer = await produce(cluster, leader, TOPIC, b"x", partition=partition)
        assert answer.error_code == 0, answer

    admin_call(client.create_partitions([NewPartitions(TOPIC, 5)]))
    for partition in (3, 4):
        state = await wait_state(cluster, TOPIC, lambda s: s.leader >= 0 and len(s.isr) == 3, partition=partition,
                                 what=f"new partition {TOPIC}-{partition} led with an ISR of 3")
        assert sorted(state.replicas) == [0, 1, 2]

    hosted = [partition_dir(cluster, node, TOPIC, p) for node in range(3) for p in range(5)]
    assert all(path.is_dir() for path in hosted)
    admin_call(client.delete_topics([TOPIC]))
    await wait_for(lambda: _gone(cluster), what="the topic gone from every broker's metadata")
    await wait_for(lambda: not any(path.exists() for path in hosted), what="every replica's log deleted")


async def _gone(cluster: Cluster) -> bool:
    for node in range(3):
        if any(topic == TOPIC for topic, _ in (await cluster.metadata_of(node)).partitions):
            return False
    return True



async def test_topic_configs_altered_through_any_broker_reach_every_broker(cluster: Cluster) -> None:
    """Topic configs altered through a broker go through the controller: kafka-python's alter_configs sets
    min.insync.replicas=3, every broker's DescribeConfigs shows it, and the leader enforces it (a replica down:
    acks=all gets NOT_ENOUGH_REPLICAS); confluent-kafka's incremental_alter_configs sets it back to 2, then
    APPENDs compact to cleanup.policy (the controller decides the new list from the broker default, delete)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    from kafka.admin import ConfigResource as KafkaPythonResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    client = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin_call(client.create_topics([NewTopic("configured", num_partitions=1, replication_factor=3)]))
    state = await wait_state(cluster, "configured", lambda s: len(s.isr) == 3, what="an ISR of 3")
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        admin.alter_configs([KafkaPythonResource(ConfigResourceType.TOPIC, "configured",
                                                 configs={"min.insync.replicas": "3"})])
    finally:
        admin.close()
    for node in range(3):
        one = AdminClient({"bootstrap.servers": cluster.broker(node).address})
        await wait_for(lambda one=one: _config(one, "min.insync.replicas") == "3", what=f"broker {node} describing it")

    follower = next(r for r in state.replicas if r != state.leader)
    cluster.kill(follower)
    await wait_state(cluster, "configured", lambda s: follower not in s.isr, what="the ISR without the killed one")
    refused = await produce(cluster, state.leader, "configured", b"needs three")
    assert refused.error_code == 19  # NOT_ENOUGH_REPLICAS

    resource = ConfigResource(ConfigResource.Type.TOPIC, "configured", incremental_configs=[
        ConfigEntry("min.insync.replicas", "2", incremental_operation=AlterConfigOpType.SET)])
    admin_call(client.incremental_alter_configs([resource]))
    accepted = await wait_for(lambda: _produced(cluster, state.leader), what="acks=all accepted with 2 in sync")
    assert accepted.error_code == 0

    appended = ConfigResource(ConfigResource.Type.TOPIC, "configured", incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    admin_call(client.incremental_alter_configs([appended]))
    for node in (n for n in range(3) if n != follower):
        one = AdminClient({"bootstrap.servers": cluster.broker(node).address})
        await wait_for(lambda one=one: _config(one, "cleanup.policy") == "delete,compact",
                       what=f"broker {node} describing cleanup.policy delete,compact")


def _config(client: AdminClient, key: str) -> str | None:
    from confluent_kafka.admin import ConfigResource

    (future,) = client.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "configured")]).values()
    return future.result(15)[key].value


async def _produced(cluster: Cluster, leader: int) -> object:
    answer = await produce(cluster, leader, "configured", b"two are enough")
    return answer if answer.error_code == 0 else None
