"""Consumer groups with real clients against a real broker process (issue 5).

For each of confluent-kafka (classic, and KIP-848's `group.protocol=consumer`), kafka-python, aiokafka and
kafkajs, one scenario on a 6-partition topic, every
consumer its own process (tests/groups/worker.py, tests/groups/js/worker.js): three consumers share the
partitions; a fourth joins and the partitions spread over four; one leaves cleanly (at once); one is killed
with SIGKILL and its partitions move once its session times out; every record is consumed and committed
exactly once across the group; after a broker restart a new consumer resumes at the committed offsets.
The admin checks (committed leader epoch, DescribeGroups, DeleteGroups) use confluent-kafka's clients.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers import BrokerProcess, holds_sync, start_broker, wait_for_sync

HERE = Path(__file__).resolve().parent
NODE_MODULES = HERE.parents[1] / "tests" / "interop" / "js" / "node_modules"
SESSION_MS = 6000
PARTITIONS = 6
CLIENTS = ["confluent", "confluent-consumer", "kafka-python", "aiokafka", "kafkajs"]
# A short initial rebalance delay: consumers started together still form one generation, quickly.
# The consumer protocol's session is the broker's (group.consumer.session.timeout.ms), the same as the others', and
# so is its heartbeat interval (the test kit's 500 ms, as the classic workers').
BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "300", "offsets.topic.num.partitions": "5",
                    "group.consumer.session.timeout.ms": str(SESSION_MS), "group.consumer.heartbeat.interval.ms": "500"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory.mktemp("groups"), BROKER_OVERRIDES)
    yield process
    process.stop()


class Worker:
    """One consumer process and what it reported."""

    def __init__(self, client: str, bootstrap: str, topic: str, group: str) -> None:
        if client == "kafkajs":
            if shutil.which("node") is None or not (NODE_MODULES / "kafkajs").is_dir():
                pytest.skip("node or tests/interop/js/node_modules/kafkajs is missing")
            command = ["node", str(HERE / "js" / "worker.js"), bootstrap, topic, group, str(SESSION_MS)]
            env = {**os.environ, "NODE_PATH": str(NODE_MODULES)}
        else:
            command = [sys.executable, str(HERE / "worker.py"), client, bootstrap, topic, group, str(SESSION_MS)]
            env = dict(os.environ)
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, text=True)
        self.assignment: list[int] = []
        self.first_assignment_ms: int | None = None
        self.committed: list[tuple[int, int, str]] = []
        self.closed = False
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            event = json.loads(line)
            with self.lock:
                if event["e"] == "assigned":
                    self.assignment = event["p"]
                    if event["p"] and self.first_assignment_ms is None:
                        self.first_assignment_ms = event["ms"]
                elif event["e"] == "committed":
                    self.committed.append((event["p"], event["o"], event["v"]))
                elif event["e"] == "closed":
                    self.closed = True

    def close(self) -> None:
        """A clean leave (LeaveGroup), and wait for the process to exit."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("close\n")
        self.proc.stdin.flush()
        self.proc.wait(30)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def shares_all_partitions(workers: list[Worker]) -> Callable[[], bool]:
    """Every partition owned by exactly one of `workers`, and each of them owns at least one."""
    def check() -> bool:
        owned = [p for w in workers for p in w.assignment]
        return sorted(owned) == list(range(PARTITIONS)) and all(w.assignment for w in workers)
    return check


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the futures are done
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(30)


def committed_values(workers: list[Worker]) -> list[str]:
    return [v for w in workers for _, _, v in w.committed]


@pytest.mark.parametrize("client", CLIENTS)
def test_a_group_shares_rebalances_survives_a_kill_and_resumes_after_a_restart(
    broker: BrokerProcess, client: str
) -> None:
    topic, group = f"groups-{client}-{uuid.uuid4().hex[:6]}", f"g-{client}-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic)
    produced = [f"a{i}" for i in range(60)]
    produce(broker.bootstrap, topic, produced)
    workers: list[Worker] = []
    try:
        # Three consumers share the six partitions; the first join is well under the session timeout.
        workers = [Worker(client, broker.bootstrap, topic, group) for _ in range(3)]
        wait_for_sync(shares_all_partitions(workers), 30, what="three consumers to share the partitions")
        first_join_ms = min(w.first_assignment_ms for w in workers if w.first_assignment_ms is not None)
        assert first_join_ms < SESSION_MS / 2, f"first assignment after {first_join_ms} ms"

        # A fourth joins: the partitions spread over four.
        workers.append(Worker(client, broker.bootstrap, topic, group))
        wait_for_sync(shares_all_partitions(workers), 30, what="four consumers to share the partitions")

        # One leaves cleanly: the others take its partitions without waiting for its session timeout.
        leaving = workers.pop(0)
        leaving.close()
        left_at = time.monotonic()
        wait_for_sync(shares_all_partitions(workers), 30, what="three consumers after a clean leave")
        took = time.monotonic() - left_at
        assert took < SESSION_MS / 1000, f"rebalance after LeaveGroup took {took:.1f} s"

        # Everything so far is consumed; then one is killed and its partitions move after the session timeout.
        wait_for_sync(lambda: len(committed_values([leaving, *workers])) >= len(produced), 30, what="the first records")
        victim = workers.pop(0)
        victim.kill()
        killed_at = time.monotonic()
        wait_for_sync(lambda: not shares_all_partitions(workers)(), SESSION_MS / 1000 + 10,
                      what="the rebalance to start")
        wait_for_sync(shares_all_partitions(workers), 30, what="two consumers after the kill")
        moved_after = time.monotonic() - killed_at
        assert SESSION_MS / 1000 - 1 < moved_after < SESSION_MS / 1000 + 10, f"moved after {moved_after:.1f} s"
        more = [f"b{i}" for i in range(30)]
        produce(broker.bootstrap, topic, more)
        produced += more
        everyone = [leaving, victim, *workers]
        wait_for_sync(lambda: len(committed_values(everyone)) >= len(produced), 30, what="the records after the kill")
        holds_sync(lambda: len(committed_values(everyone)) == len(produced), 0.5,
                   what="no record committed twice")  # nothing more may arrive
        assert sorted(committed_values(everyone)) == sorted(produced)

        # Stop the group, restart the broker: a new consumer resumes at the committed offsets.
        for w in workers:
            w.close()
        broker.restart()
        after = [f"c{i}" for i in range(24)]
        produce(broker.bootstrap, topic, after)
        resumed = Worker(client, broker.bootstrap, topic, group)
        workers = [resumed]
        wait_for_sync(lambda: len(resumed.committed) >= len(after), 45, what="the records after the restart")
        holds_sync(lambda: len(committed_values([resumed])) == len(after), 0.5,
                   what="no record committed twice after the restart")  # nothing more may arrive
        assert sorted(committed_values([resumed])) == sorted(after)
        resumed.close()
    finally:
        for w in workers:
            if w.proc.poll() is None:
                w.kill()


def test_committed_leader_epoch_describe_and_delete(broker: BrokerProcess) -> None:
    topic, group = f"admin-{uuid.uuid4().hex[:6]}", f"admin-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [f"v{i}" for i in range(12)])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": SESSION_MS})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        consumer.subscribe([topic])
        def a_record() -> Message | None:
            polled = consumer.poll(0.2)
            return polled if polled is not None and not polled.error() else None

        message = wait_for_sync(a_record, 30, what="a record")
        epoch = message.leader_epoch()
        assert epoch is not None and epoch >= 0
        consumer.commit(message=message, asynchronous=False)  # OffsetCommit v9 with the record's leader epoch
        (committed,) = consumer.committed([TopicPartition(topic, message.partition())], timeout=10)
        assert (committed.offset, committed.leader_epoch) == (message.offset() + 1, epoch)

        (description,) = admin.describe_consumer_groups([group]).values()
        described = description.result(10)
        assert described.state.name == "STABLE" and len(described.members) == 1
        assignment = described.members[0].assignment.topic_partitions
        assert sorted(tp.partition for tp in assignment if tp.topic == topic) == list(range(PARTITIONS))

    finally:
        consumer.close()  # leaves the group: DeleteGroups refuses a group with members

    (deleted,) = admin.delete_consumer_groups([group]).values()
    deleted.result(10)
    with contextlib.closing(Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})) as probe:
        (after,) = probe.committed([TopicPartition(topic, message.partition())], timeout=10)
    assert after.offset < 0  # OFFSET_INVALID: the group's offsets are gone
