"""For test authors (issue 16): `epoch_broker.testing` and its pytest plugin, as a user meets them.

- The plugin's option reaches every fixture (examples/test_with_epoch_broker.py runs against the built wheel in
  tests/test_packaging.py).
- An in-process broker leaves no thread, file descriptor or port behind, and two in one process share nothing.
- The subprocess broker and the cluster work through the same calls.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from epoch_broker.broker.faults import REPLICATION_PAUSED
from epoch_broker.testing import broker, cluster, unique_name
from tests.helpers import not_yet, wait_for_sync


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_the_plugins_option_sets_a_config_key_for_every_fixture(tmp_path: Path) -> None:
    (tmp_path / "test_option.py").write_text(
        "def test_it(kafka_broker, kafka_broker_session):\n"
        "    for started in (kafka_broker, kafka_broker_session.broker):\n"
        "        assert started.server.config.num_partitions == 4\n"
        "    assert kafka_broker.bootstrap_servers != kafka_broker_session.bootstrap_servers\n")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "--kafka-broker-config", "num.partitions=4", "test_option.py"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout[-3000:]
    bad = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "--kafka-broker-config", "num.partitions", "test_option.py"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "expected KEY=VALUE" in bad.stdout + bad.stderr


def test_an_in_process_broker_leaves_no_thread_file_or_port_behind() -> None:
    with broker():  # the first one may set up what a process keeps once (uvloop's wake-up pipe)
        pass
    threads, fds = set(threading.enumerate()), _open_fds()
    with broker() as started:
        port = started.port
        data_dir = started.data_dir
        started.create_topic("t", partitions=2)
        assert not _bindable(port)
    assert set(threading.enumerate()) == threads
    assert _open_fds() <= fds
    assert _bindable(port) and not data_dir.exists()


def test_two_in_process_brokers_share_no_state() -> None:
    with broker() as first, broker(num_partitions=3) as second:
        assert first.bootstrap_servers != second.bootstrap_servers
        first.create_topic("only-in-first")
        second.create_topic("only-in-second")
        assert set(_topics(first.bootstrap_servers)) == {"only-in-first"}
        assert set(_topics(second.bootstrap_servers)) == {"only-in-second"}
        first.server.faults.replication_paused = True  # one broker's fault hooks are its own
        assert not second.server.faults.replication_paused
        assert (first.server.config.num_partitions, second.server.config.num_partitions) == (1, 3)


def _topics(bootstrap: str) -> list[str]:
    from confluent_kafka.admin import AdminClient

    return [name for name in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
            if not name.startswith("__")]


async def test_async_with_and_a_subprocess_broker_that_restarts_from_disk() -> None:
    async with broker(in_process=False) as started:
        topic = started.create_topic(unique_name())
        producer = Producer({"bootstrap.servers": started.bootstrap_servers})
        producer.produce(topic, b"kept")
        assert producer.flush(30) == 0
        first_pid = started.pid
        started.restart()
        assert started.pid != first_pid
        consumer = Consumer({"bootstrap.servers": started.bootstrap_servers, "group.id": "g",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        try:
            message = consumer.poll(30)
            assert message is not None and message.value() == b"kept"
        finally:
            consumer.close()


def test_a_subprocess_broker_on_metrics_port_0_serves_metrics_at_its_url_across_a_restart() -> None:
    """docs/testing.md's `metrics.listener` with port 0 also for `in_process=False`: the URL names the port the process
    bound, and a restart binds the same one."""

    def scrape(url: str) -> str:
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
            assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            return answer.read().decode()

    with broker(in_process=False, metrics_listener="http://127.0.0.1:0") as started:
        url = started.metrics_url
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0")
        topic = started.create_topic(unique_name())
        assert f'topic="{topic}"' in scrape(url)
        started.restart()
        assert started.metrics_url == url
        assert "kafka_network_requestmetrics_requests_total" in scrape(url)


def test_a_bad_config_fails_the_start_with_the_brokers_own_message() -> None:
    with pytest.raises(Exception, match=r"log\.retention\.ms"), broker(log_retention_ms="soon"):
        pass


@pytest.mark.slow
def test_the_cluster_elects_faults_and_restarts_through_one_object() -> None:
    with cluster(3) as started:
        topic = started.create_topic("replicated", partitions=1)
        leader = started.leader(topic, 0)
        follower = next(node for node in started.state(topic, 0).isr if node != leader)
        assert started.elect(topic, 0, leader=follower) == "elected"
        assert started.leader(topic, 0) == follower
        assert started.fault(leader, REPLICATION_PAUSED, "true") == "applied"
        producer = Producer({"bootstrap.servers": started.bootstrap_servers, "acks": "1"})
        producer.produce(topic, b"past the paused replica")
        assert producer.flush(30) == 0
        started.wait_for_isr(topic, 0, 2)  # the paused replica, behind, falls out of the ISR (Kafka's rule)
        started.fault(leader, REPLICATION_PAUSED, None)
        started.wait_for_isr(topic, 0, 3)
        started.pause(follower)
        started.resume(follower)
        started.kill(follower)
        assert started.leader(topic, 0, other_than=follower) != follower
        started.restart(follower)
        started.wait_for_isr(topic, 0, 3)


def test_a_transactional_producer_commits_against_the_fixture_broker() -> None:
    """The test kit's broker serves transactions as it starts (one `__transaction_state` partition, made on the
    first FindCoordinator): exactly-once code is tested as it runs against Kafka."""
    with broker() as started:
        topic = started.create_topic("payments")
        producer = Producer({"bootstrap.servers": started.bootstrap_servers, "transactional.id": "tx"})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(topic, value=b"committed")
        producer.commit_transaction(30)
        consumer = Consumer({"bootstrap.servers": started.bootstrap_servers, "group.id": "reader",
                             "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        try:
            def polled() -> object:
                message = consumer.poll(0.5)
                return (message,) if message is not None else not_yet("nothing polled")

            (message,) = wait_for_sync(polled, 30, interval=0, what="the committed record, read_committed")
            assert message.error() is None and message.value() == b"committed"
        finally:
            consumer.close()
