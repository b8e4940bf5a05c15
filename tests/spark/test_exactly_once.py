"""The exactly-once sink (`exactlyOnce=true`, spark/transactions.py) against a real broker process: what a
read_committed consumer (confluent-kafka) reads back, the commit log, fencing of an earlier attempt, a
micro-batch run again after a restart, a non-deterministic rerun caught, and a broker that refuses
transactions refused before any task runs. Task, executor and driver failures are in test_exactly_once_failures.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, ResourcePatternType
from confluent_kafka.admin import ResourceType as AclResourceType

from epoch_broker.spark.kafka import Cluster, KafkaClientError
from epoch_broker.spark.sink import (
    DEFAULT_COMMIT_LOG_TOPIC,
    Columns,
    IdempotentProducer,
    WriteCommit,
    check_transactions,
    end_transactions,
    parse_sink_options,
    write_exactly_once,
)
from epoch_broker.spark.transactions import CoordinatorRefused, Transaction, transactional_id
from tests.helpers import BrokerProcess, start_broker
from tests.spark.support import create, produce, read_back

pytestmark = pytest.mark.slow

VALUE_ONLY = Columns(value=0, key=None, topic=None, partition=None, headers=None)


def progress(bootstrap: str) -> list[dict[str, Any]]:
    """The commit log's committed records, decoded."""
    return [json.loads(value) for _, value, _, _ in read_back(bootstrap, DEFAULT_COMMIT_LOG_TOPIC, 1)]


def values(frame_rows: list[tuple[bytes | None, bytes, int, int]]) -> list[bytes]:
    return sorted(value for _, value, _, _ in frame_rows)


def test_a_batch_write_commits_each_task_in_one_transaction_with_its_progress(spark: Any,
                                                                              broker: BrokerProcess) -> None:
    topic = "eos-batch"
    create(broker.bootstrap, topic, 3)
    rows = [(f"k{i}".encode(), f"v{i:03}".encode()) for i in range(300)]
    (spark.createDataFrame(rows, "key binary, value binary").repartition(3).write.format("kafka-epoch")
     .mode("append").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic)
     .option("exactlyOnce", "true").option("kafka.batch.size", "500").save())
    committed = read_back(broker.bootstrap, topic, 3)
    assert values(committed) == sorted(value for _, value in rows)
    assert read_back(broker.bootstrap, topic, 3, "read_uncommitted") == committed
    # one record per task: the sink drawn for this write, batch 0, each Spark partition, its rows
    records = [p for p in progress(broker.bootstrap) if p["batch"] == 0 and p["rows"] > 0]
    sinks = {p["sink"] for p in records}
    assert len(records) == 3 and len(sinks) == 1
    assert sorted(p["partition"] for p in records) == [0, 1, 2] and sum(p["rows"] for p in records) == 300


def test_a_micro_batch_run_again_after_a_restart_writes_its_rows_once(spark: Any, broker: BrokerProcess,
                                                                      tmp_path: Path) -> None:
    """The issue's case: the driver died after the sink wrote and before Spark recorded the batch (its entry in
    the checkpoint's commits/ gone), so the batch runs again. At-least-once writes it twice; exactly once, once."""
    source = "eos-stream-in"
    create(broker.bootstrap, source, 2)
    produce(broker.bootstrap, source, [f"r{i:03}".encode() for i in range(500)], 2)

    def copy(output: str, exactly_once: bool) -> None:
        checkpoint = tmp_path / output
        for run in range(2):
            query = (spark.readStream.format("kafka-epoch").option("kafka.bootstrap.servers", broker.bootstrap)
                     .option("subscribe", source).load().select("key", "value")
                     .writeStream.format("kafka-epoch").option("kafka.bootstrap.servers", broker.bootstrap)
                     .option("topic", output).option("exactlyOnce", str(exactly_once).lower())
                     .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
            assert query.awaitTermination(120), "the availableNow query did not finish"
            assert query.exception() is None
            if run == 0:
                assert [p["batchId"] for p in query.recentProgress] == [0]
                shutil.rmtree(checkpoint / "commits")  # batch 0 written, not recorded: the next run runs it again

    for output, exactly_once in (("eos-stream-out", True), ("alo-stream-out", False)):
        create(broker.bootstrap, output, 2)
        copy(output, exactly_once)
    expected = [f"r{i:03}".encode() for i in range(500)]
    assert values(read_back(broker.bootstrap, "eos-stream-out", 2)) == expected
    assert values(read_back(broker.bootstrap, "alo-stream-out", 2)) == sorted(expected * 2)


def test_a_new_attempt_fences_the_old_one_and_a_committed_task_writes_nothing_again(broker: BrokerProcess) -> None:
    topic, sink = "eos-fencing", "fencing-sink"
    create(broker.bootstrap, topic, 1)
    options = parse_sink_options({"kafka.bootstrap.servers": broker.bootstrap, "topic": topic,
                                  "exactlyOnce": "true", "kafka.delivery.timeout.ms": "20000"})
    check_transactions(options, sink)

    def attempt(batch: int, rows: int) -> WriteCommit:
        data = pa.record_batch([pa.array([f"{batch}-{i}".encode() for i in range(rows)], pa.binary())],
                               names=["value"])
        return write_exactly_once(options, VALUE_ONLY, iter([data]), sink, batch, 0)

    def committed() -> list[bytes]:
        return values(read_back(broker.bootstrap, topic, 1))

    # an attempt that wrote 10 rows and never finished (its executor hangs)
    with Cluster(broker.bootstrap, 10, 20) as cluster:
        cluster.refresh()
        old = Transaction(cluster, transactional_id(options.transactional_id_prefix, sink, 0), 60_000)
        old.init()
        producer = IdempotentProducer(cluster, options, old)
        for i in range(10):
            producer.append(topic, 0, None, f"old-{i}".encode(), [])
        producer.send(everything=True)
        first = attempt(7, 20)  # the next attempt fences it and aborts its transaction
        assert first.records == {(topic, 0): 20} and first.transactional_id == old.transactional_id
        with pytest.raises(CoordinatorRefused, match=r"EndTxn .*PRODUCER_FENCED"):
            old.end(commit=True)
        old.close()
    assert committed() == []  # the task's transaction waits for the driver
    end_transactions(options, [first, None], commit=True)
    assert committed() == sorted(f"7-{i}".encode() for i in range(20))
    assert len(read_back(broker.bootstrap, topic, 1, "read_uncommitted")) == 30  # the aborted 10 are in the log

    again = attempt(7, 20)  # (batch 7, partition 0) committed: nothing written again, nothing to commit
    assert again.records == {} and again.transactional_id is None
    with pytest.raises(KafkaClientError, match="committed 20 rows, and this attempt has 21: the query is not "
                                               "deterministic"):
        attempt(7, 21)

    end_transactions(options, [attempt(8, 5)], commit=False)  # a job that failed elsewhere: its tasks' aborted
    fenced = attempt(9, 3)
    end_transactions(options, [attempt(9, 4)], commit=True)  # a later attempt of the task fenced the first
    with pytest.raises(KafkaClientError, match="the task's transaction was aborted before the driver committed it"):
        end_transactions(options, [fenced], commit=True)
    assert committed() == sorted([f"7-{i}".encode() for i in range(20)] + [f"9-{i}".encode() for i in range(4)])


@pytest.fixture(scope="module")
def refusing_broker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A broker whose ACLs deny this (anonymous) client every transactional id of the sink's prefix, and allow
    everything else (no ACL found: allowed)."""
    process = start_broker(tmp_path_factory.mktemp("refusing"), {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true", "offsets.topic.num.partitions": "1"})
    admin = AdminClient({"bootstrap.servers": process.bootstrap})
    deny = AclBinding(AclResourceType.TRANSACTIONAL_ID, "epoch-spark-", ResourcePatternType.PREFIXED,
                      "User:ANONYMOUS", "*", AclOperation.ALL, AclPermissionType.DENY)
    for future in admin.create_acls([deny]).values():
        future.result(30)
    yield process
    process.stop()


def test_a_broker_refusing_transactions_is_refused_with_one_error_before_any_task(spark: Any,
                                                                                  refusing_broker: BrokerProcess
                                                                                  ) -> None:
    topic = "eos-refused"
    create(refusing_broker.bootstrap, topic, 1)
    writer = (spark.range(5).selectExpr("CAST(id AS STRING) AS value").write.format("kafka-epoch").mode("append")
              .option("kafka.bootstrap.servers", refusing_broker.bootstrap).option("topic", topic)
              .option("exactlyOnce", "true"))
    refused = (r"kafka-epoch: exactlyOnce=true needs Kafka transactions, which the broker refuses this client: "
               r"FindCoordinator for transactional id 'epoch-spark-[0-9a-f]{32}-0': "
               r"TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
    with pytest.raises(Exception, match=refused) as raised:
        writer.save()
    assert "Failed to initialize Python data source writer" in str(raised.value)  # planning, not a task
    assert read_back(refusing_broker.bootstrap, topic, 1, "read_uncommitted") == []
    writer.option("exactlyOnce", "false").save()  # the broker takes plain writes
    assert len(read_back(refusing_broker.bootstrap, topic, 1)) == 5
