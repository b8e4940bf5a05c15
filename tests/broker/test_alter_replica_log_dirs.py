"""AlterReplicaLogDirs (34) over a broker's socket, with Kafka's per-partition answers (also for a partition whose
replica is on another broker of a cluster), and kafka-python's alter_replica_log_dirs moving a replica to the dir it
is in (a no-op answered NONE)."""

from __future__ import annotations

from pathlib import Path

from kafka import KafkaAdminClient
from kafka.errors import NoError
from kafka.structs import TopicPartitionReplica

from epoch_broker import testing
from epoch_broker.client.blocking import BlockingKafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import alter_replica_log_dirs as messages
from epoch_broker.protocol.messages import describe_log_dirs

Q = messages.REQUEST


def answers(client: BlockingKafkaClient, moves: list[tuple[str, str, int]]) -> list[tuple[str, int, int]]:
    """(topic, partition, error code) per partition answered, for moves given as (dir, topic, partition)."""
    response = client.request(messages.API, 2, Q.cls(dirs=[Q.AlterReplicaLogDir(path=path, topics=[
        Q.AlterReplicaLogDirTopic(name=topic, partitions=[partition])]) for path, topic, partition in moves]))
    return [(t.topic_name, p.partition_index, p.error_code) for t in response.results for p in t.partitions]


def test_each_partition_is_answered_as_kafka_answers_it(tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    config = {"log.dirs": f"{first},{second}"}
    with (testing.broker(data_dir=tmp_path / "meta", config=config) as started,
          BlockingKafkaClient.connect(started.bootstrap_servers) as client):
        started.create_topic("t", partitions=1)
        home = started.server.log_manager.log_dir_of("t", 0)
        other = str(second) if home == str(first) else str(first)

        def answer(path: str, topic: str, partition: int) -> int:
            ((_, _, error),) = answers(client, [(path, topic, partition)])
            return error

        assert answer(home, "t", 0) == ErrorCode.NONE
        assert answer(str(tmp_path / "elsewhere"), "t", 0) == ErrorCode.LOG_DIR_NOT_FOUND
        assert answer(home, "t", 7) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert answer(home, "nope", 0) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert answer(other, "t", 0) == ErrorCode.KAFKA_STORAGE_ERROR  # a move between dirs is not done here
        assert started.server.log_manager.log_dir_of("t", 0) == home
        assert answer(home, "x" * 220, 0) == ErrorCode.INVALID_TOPIC_EXCEPTION  # Kafka's future dir name: too long
        # a partition named under two dirs is answered once, for the last (Kafka reads a map)
        assert answers(client, [(str(tmp_path / "elsewhere"), "t", 0), (home, "t", 0)]) == [("t", 0, ErrorCode.NONE)]


def test_a_partition_whose_replica_is_on_another_broker_is_answered_replica_not_available() -> None:
    with testing.cluster(2) as cluster, BlockingKafkaClient.connect(cluster.address(0)) as client:
        cluster.create_topic("spread", partitions=2, replication_factor=1)
        replicas = {p: cluster.state("spread", p).replicas for p in range(2)}
        (here,) = [p for p, nodes in replicas.items() if nodes == (0,)]
        (elsewhere,) = [p for p, nodes in replicas.items() if nodes == (1,)]
        described = client.request(describe_log_dirs.API, 4, describe_log_dirs.REQUEST.cls(topics=None))
        (home,) = [d.log_dir for d in described.results if any(t.name == "spread" for t in d.topics)]
        assert answers(client, [(home, "spread", elsewhere), (home, "spread", here)]) == [
            ("spread", elsewhere, ErrorCode.REPLICA_NOT_AVAILABLE), ("spread", here, ErrorCode.NONE)]


def test_kafka_python_moves_a_replica_to_its_own_log_dir(tmp_path: Path) -> None:
    with testing.broker(data_dir=tmp_path) as started:
        started.create_topic("orders", partitions=2)
        admin = KafkaAdminClient(bootstrap_servers=started.bootstrap_servers)
        try:
            (described,) = admin.describe_log_dirs()
            replica = TopicPartitionReplica("orders", 0, described["broker"])
            result = admin.alter_replica_log_dirs({replica: described["log_dirs"][0]["log_dir"]})
            assert result == {replica: NoError}
        finally:
            admin.close()
