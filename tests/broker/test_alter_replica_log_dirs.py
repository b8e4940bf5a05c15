"""AlterReplicaLogDirs (34) over a broker's socket, with Kafka's per-partition answers, and kafka-python's
alter_replica_log_dirs moving a replica to the dir it is in (a no-op answered NONE)."""

from __future__ import annotations

from pathlib import Path

from kafka import KafkaAdminClient
from kafka.errors import NoError
from kafka.structs import TopicPartitionReplica

from epoch_broker import testing
from epoch_broker.client.blocking import BlockingKafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import alter_replica_log_dirs as messages

Q = messages.REQUEST


def test_each_partition_is_answered_as_kafka_answers_it(tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    config = {"log.dirs": f"{first},{second}"}
    with (testing.broker(data_dir=tmp_path / "meta", config=config) as started,
          BlockingKafkaClient.connect(started.bootstrap_servers) as client):
        started.create_topic("t", partitions=1)
        home = started.server.log_manager.log_dir_of("t", 0)
        other = str(second) if home == str(first) else str(first)

        def answer(path: str, topic: str, partition: int) -> int:
            response = client.request(messages.API, 2, Q.cls(dirs=[Q.AlterReplicaLogDir(path=path, topics=[
                Q.AlterReplicaLogDirTopic(name=topic, partitions=[partition])])]))
            (result,) = response.results
            return result.partitions[0].error_code

        assert answer(home, "t", 0) == ErrorCode.NONE
        assert answer(str(tmp_path / "elsewhere"), "t", 0) == ErrorCode.LOG_DIR_NOT_FOUND
        assert answer(home, "t", 7) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert answer(home, "nope", 0) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert answer(other, "t", 0) == ErrorCode.KAFKA_STORAGE_ERROR  # a move between dirs is not done here
        assert started.server.log_manager.log_dir_of("t", 0) == home


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
