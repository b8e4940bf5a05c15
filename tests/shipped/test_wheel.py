"""The installed wheel, as each kind of user gets it (issue 28): a plain `pip install epoch-broker` serves every
codec to confluent-kafka, kafka-python and kcat, and a share group (issue 34) to confluent-kafka's ShareConsumer; a
test author's venv runs examples/test_with_epoch_broker.py
through the plugin, and `epoch-broker cluster` with a leader-kill drill; the [spark] extra alone reads a topic
holding every codec. Everything runs from a directory outside the checkout (tests/shipped/conftest.py)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer

from epoch_broker.drill import launcher
from epoch_broker.testing import BrokerProcess
from tests.helpers import REPO, free_base_port, not_yet, wait_for_sync
from tests.interop.support import CODECS, kcat_bin
from tests.shipped.conftest import READY_TIMEOUT_S, Venv, produce, read_all, run, share_group_hands_over, user_env

pytestmark = pytest.mark.slow
RECORDS = 20


def values(tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(RECORDS)]


def roundtrip_confluent(bootstrap: str, topic: str, codec: str) -> list[bytes]:
    assert produce(bootstrap, topic, values(topic), codec) == values(topic)
    return read_all(bootstrap, topic, RECORDS, quiet_s=0)


def roundtrip_kafka_python(bootstrap: str, topic: str, codec: str) -> list[bytes]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                             linger_ms=20)
    for future in [producer.send(topic, value) for value in values(topic)]:
        future.get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=10000)
    try:
        return [message.value for message in consumer][:RECORDS]
    finally:
        consumer.close()


def roundtrip_kcat(bootstrap: str, topic: str, codec: str) -> list[bytes]:
    lines = b"".join(value + b"\n" for value in values(topic))
    run([kcat_bin(), "-P", "-b", bootstrap, "-t", topic, "-z", codec, "-X", "linger.ms=20"], 60, input=lines.decode())
    read = run([kcat_bin(), "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-c", str(RECORDS), "-e", "-q"],
               60)
    return [line.encode() for line in read.stdout.splitlines()]


CLIENTS = {"confluent-kafka": roundtrip_confluent, "kafka-python": roundtrip_kafka_python, "kcat": roundtrip_kcat}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", list(CLIENTS))
def test_a_plain_install_serves_every_codec_to_every_client(served: BrokerProcess, client: str, codec: str) -> None:
    topic = f"{client}-{codec}"
    assert CLIENTS[client](served.bootstrap, topic, codec) == values(topic)


def test_a_plain_install_serves_a_share_group_to_the_share_consumer(served: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": served.bootstrap})
    admin.create_topics([NewTopic("share-queue", 3, 1)])["share-queue"].result(30)
    share_group_hands_over(served.bootstrap, "share-queue", 3)


def test_a_users_test_file_runs_on_the_installed_wheel_with_the_plugins_fixtures(user_venv: Venv,
                                                                                tmp_path: Path) -> None:
    """What a test author does: install the package beside pytest and their clients, copy
    examples/test_with_epoch_broker.py into a project of their own, run pytest there. The fixtures come from the
    wheel's `pytest11` entry point (no conftest.py)."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(REPO / "examples" / "test_with_epoch_broker.py", project)
    where = user_venv.python("import epoch_broker.pytest_plugin as p; print(p.__file__)", cwd=project)
    assert where.strip().startswith(str(user_venv.path))
    tests = run([user_venv.bin("python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore"], 600,
                cwd=project, env=user_env())
    assert "4 passed" in tests.stdout
    # the same tests against brokers claiming three Kafka releases (docs/releases.md), clusters included
    matrix = run([user_venv.bin("python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore",
                  "--kafka-versions", "2.8,3.7,4.0"], 600, cwd=project, env=user_env())
    assert "12 passed" in matrix.stdout


def test_the_installed_cluster_command_and_a_leader_kill_drill(user_venv: Venv, tmp_path: Path) -> None:
    """`epoch-broker cluster` in one terminal, `epoch-broker drill leader-kill --cluster DIR` in another."""
    data = tmp_path / "cluster-data"
    base = free_base_port(3)
    log = (tmp_path / "cluster.out").open("w")
    cluster = subprocess.Popen([user_venv.bin("epoch-broker"), "cluster", "--brokers", "3", "--data-dir", data,
                                "--base-port", str(base)], stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, cwd=tmp_path, env=user_env())
    try:
        def running() -> object:
            out = (tmp_path / "cluster.out").read_text()
            assert cluster.poll() is None, out
            return "running; Ctrl-C stops it" in out or not_yet(out[-3000:])

        wait_for_sync(running, 3 * READY_TIMEOUT_S, interval=0.2, what="`epoch-broker cluster` running")
        report = tmp_path / "report"
        drill = run([user_venv.bin("epoch-broker"), "drill", "leader-kill", "--seed", "5", "--duration", "10",
                     "--cluster", data, "--out", report], 300, cwd=tmp_path, env=user_env())
        assert "PASS" in drill.stdout
        assert json.loads((report / "report.json").read_text())["check"]["passed"] is True
        assert cluster.poll() is None  # a drill attached to a cluster leaves it running
    finally:
        cluster.send_signal(signal.SIGINT)  # Ctrl-C
        try:
            cluster.wait(60)
        finally:
            log.close()
            if cluster.poll() is None:
                cluster.kill()
    assert cluster.returncode == 0, (tmp_path / "cluster.out").read_text()
    assert [spec.name for spec in launcher.ClusterFile.read(data).processes
            if launcher.process_state(spec) == "running"] == []


def test_the_spark_extra_alone_reads_a_topic_holding_every_codec(served: BrokerProcess, spark_venv: Venv,
                                                                 tmp_path: Path) -> None:
    topic = "spark-every-codec"
    for codec in CODECS:
        assert produce(served.bootstrap, topic, values(codec), codec) == values(codec)
    job = f"""
import os, sys
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
from epoch_broker.spark import register
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
register(spark)
rows = (spark.read.format("kafka-epoch").option("kafka.bootstrap.servers", {served.bootstrap!r})
        .option("subscribe", {topic!r}).load().orderBy("offset").collect())
for row in rows:
    print(bytes(row.value).decode())
spark.stop()
"""
    got = spark_venv.python(job, cwd=tmp_path, timeout=300).split()
    assert got == [value.decode() for codec in CODECS for value in values(codec)]
