"""Transactions (KIP-98) with confluent-kafka, the client most exactly-once pipelines use: commit and abort across
partitions, read_committed against read_uncommitted, the last stable offset, consume-transform-produce with
`send_offsets_to_transaction`, a zombie fenced by a newer incarnation, a hung transaction aborted at its timeout,
and a transaction carried across a broker restart."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from epoch_broker import testing
from tests.transactions.conftest import producer_config, read_all, values


def test_read_committed_sees_committed_records_once_and_aborted_never(broker: testing.Broker,
                                                                      name: Callable[[str], str]) -> None:
    topic = broker.create_topic(name("orders"), partitions=3)
    producer = Producer(producer_config(broker.bootstrap_servers, name("txn")))
    producer.init_transactions(30)
    committed, aborted = [], []
    for round_ in range(4):
        producer.begin_transaction()
        batch = [f"r{round_}-{i}" for i in range(9)]
        for i, value in enumerate(batch):
            producer.produce(topic, value=value, key=str(i), partition=i % 3)
        if round_ % 2:
            producer.flush()  # the aborted records reach the log first
            producer.abort_transaction(30)
            aborted += batch
        else:
            producer.commit_transaction(30)
            committed += batch
    assert values(read_all(broker.bootstrap_servers, topic, 3, "read_committed", len(committed))) == sorted(committed)
    everything = read_all(broker.bootstrap_servers, topic, 3, "read_uncommitted", len(committed) + len(aborted))
    assert values(everything) == sorted(committed + aborted)


def test_a_read_committed_consumer_stops_at_the_last_stable_offset_until_the_commit(
        broker: testing.Broker, name: Callable[[str], str]) -> None:
    topic = broker.create_topic(name("ledger"))
    plain = Producer({"bootstrap.servers": broker.bootstrap_servers})
    plain.produce(topic, value="before")
    plain.flush()
    producer = Producer(producer_config(broker.bootstrap_servers, name("txn")))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value="in-flight")
    producer.flush()
    plain.produce(topic, value="after")  # past the open transaction: committed, but not yet stable
    plain.flush()
    watcher = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": name("w"),
                        "isolation.level": "read_committed"})
    uncommitted = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": name("w"),
                            "isolation.level": "read_uncommitted"})
    try:
        # ListOffsets LATEST: the last stable offset for read_committed, the high watermark otherwise
        assert watcher.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 1)
        assert uncommitted.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 3)
        assert values(read_all(broker.bootstrap_servers, topic, 1, "read_committed", 1)) == ["before"]
        producer.commit_transaction(30)
        testing.wait_until(lambda: watcher.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1] == 4,
                           "the last stable offset to pass the commit marker")
    finally:
        watcher.close()
        uncommitted.close()
    assert values(read_all(broker.bootstrap_servers, topic, 1, "read_committed", 3)) == ["after", "before",
                                                                                       "in-flight"]


def test_consume_transform_produce_commits_the_input_offsets_with_the_output(
        broker: testing.Broker, name: Callable[[str], str]) -> None:
    source, sink, group = broker.create_topic(name("in")), broker.create_topic(name("out")), name("etl")
    seed = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(20):
        seed.produce(source, value=f"m{i}")
    seed.flush()
    producer = Producer(producer_config(broker.bootstrap_servers, name("etl-txn")))
    producer.init_transactions(30)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([source])

    def transform_batch(commit: bool) -> list[str]:
        taken: list[str] = []
        while len(taken) < 10:
            message = consumer.poll(1.0)
            if message is not None and not message.error():
                taken.append(message.value().decode())
        producer.begin_transaction()
        for value in taken:
            producer.produce(sink, value=value.upper())
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
        return taken

    try:
        first = transform_batch(commit=True)
        assert first == [f"m{i}" for i in range(10)]
        transform_batch(commit=False)  # its offsets are dropped with its output
        assert consumer.committed([TopicPartition(source, 0)], timeout=10)[0].offset == 10
    finally:
        consumer.close()
    assert values(read_all(broker.bootstrap_servers, sink, 1, "read_committed", 10)) == sorted(
        v.upper() for v in first)


def test_a_zombie_producer_is_fenced_when_a_new_incarnation_initialises(broker: testing.Broker,
                                                                         name: Callable[[str], str]) -> None:
    topic, transactional_id = broker.create_topic(name("payments")), name("txn")
    zombie = Producer(producer_config(broker.bootstrap_servers, transactional_id))
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, value="zombie-1")
    zombie.flush()
    successor = Producer(producer_config(broker.bootstrap_servers, transactional_id))
    successor.init_transactions(30)  # aborts the zombie's open transaction, bumping the epoch
    successor.begin_transaction()
    successor.produce(topic, value="successor")
    successor.commit_transaction(30)
    zombie.produce(topic, value="zombie-2")
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(30)
    assert raised.value.args[0].code() == KafkaError._FENCED
    assert values(read_all(broker.bootstrap_servers, topic, 1, "read_committed", 1)) == ["successor"]


def test_a_hung_transaction_is_aborted_at_its_timeout_and_its_producer_fenced(broker: testing.Broker,
                                                                               name: Callable[[str], str]) -> None:
    topic = broker.create_topic(name("hung"))
    producer = Producer(producer_config(broker.bootstrap_servers, name("txn"), **{"transaction.timeout.ms": 1000}))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value="never visible")
    producer.flush()
    plain = Producer({"bootstrap.servers": broker.bootstrap_servers})
    plain.produce(topic, value="later")
    plain.flush()
    # the coordinator aborts it: the abort marker lets read_committed readers pass it
    assert values(read_all(broker.bootstrap_servers, topic, 1, "read_committed", 1)) == ["later"]
    started = time.monotonic()
    with pytest.raises(KafkaException) as raised:
        producer.commit_transaction(30)
    assert time.monotonic() - started < 30
    error = raised.value.args[0]
    assert error.fatal() or error.txn_requires_abort()


def test_a_transaction_carries_on_across_a_broker_restart(tmp_path_factory: pytest.TempPathFactory,
                                                         name: Callable[[str], str]) -> None:
    with testing.broker(data_dir=tmp_path_factory.mktemp("restart")) as restarted:
        topic = restarted.create_topic(name("restart"), partitions=2)
        producer = Producer(producer_config(restarted.bootstrap_servers, name("txn")))
        producer.init_transactions(30)
        producer.begin_transaction()
        for i in range(6):
            producer.produce(topic, value=f"v{i}", partition=i % 2)
        producer.flush()
        restarted.restart()  # the coordinator reloads the Ongoing transaction from __transaction_state
        producer.commit_transaction(60)
        producer.begin_transaction()
        producer.produce(topic, value="aborted", partition=0)
        producer.abort_transaction(60)
        assert values(read_all(restarted.bootstrap_servers, topic, 2, "read_committed", 6)) == [
            f"v{i}" for i in range(6)]
