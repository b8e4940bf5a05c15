"""The admin side of transactions, with kafka-python's admin client (Kafka's kafka-transactions.sh does the same):
ListTransactions, DescribeTransactions and DescribeProducers show an open transaction, and an operator's
abort (WriteTxnMarkers to the partition's leader) unblocks read_committed readers stuck behind it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as Partition
from kafka import TopicPartition
from kafka.admin import AbortTransactionSpec, KafkaAdminClient

from epoch_broker import testing
from epoch_broker.client.blocking import BlockingKafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import list_transactions
from tests.transactions.conftest import producer_config


@pytest.fixture
def admin(broker: testing.Broker) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    yield client
    client.close()


def test_an_open_transaction_is_listed_described_and_its_producer_shown(
        broker: testing.Broker, admin: KafkaAdminClient, name: Callable[[str], str]) -> None:
    topic, transactional_id = broker.create_topic(name("billing"), partitions=2), name("txn")
    producer = Producer(producer_config(broker.bootstrap_servers, transactional_id))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value="open", partition=1)
    producer.flush()
    listed = {listing.transactional_id: listing for listings in admin.list_transactions().values()
              for listing in listings}
    assert listed[transactional_id].state.value == "Ongoing"
    described = admin.describe_transactions([transactional_id])[transactional_id]
    assert (described.state.value, described.transaction_timeout_ms) == ("Ongoing", 60000)
    assert described.topic_partitions == {TopicPartition(topic, 1)}
    (state,) = admin.describe_producers([TopicPartition(topic, 1)])[TopicPartition(topic, 1)].active_producers
    assert (state.producer_id, state.current_transaction_start_offset) == (described.producer_id, 0)
    producer.commit_transaction(30)  # answered once PrepareCommit is durable: the markers follow, then Complete
    described = testing.wait_until(
        lambda: (found := admin.describe_transactions([transactional_id])[transactional_id]).state.value
        == "CompleteCommit" and found, "the commit completed")
    assert described.topic_partitions == set()
    (state,) = admin.describe_producers([TopicPartition(topic, 1)])[TopicPartition(topic, 1)].active_producers
    assert state.current_transaction_start_offset == -1


def test_an_operator_abort_unblocks_read_committed_readers(
        broker: testing.Broker, admin: KafkaAdminClient, name: Callable[[str], str]) -> None:
    topic = broker.create_topic(name("stuck"))
    producer = Producer(producer_config(broker.bootstrap_servers, name("txn")))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value="hanging")
    producer.flush()
    plain = Producer({"bootstrap.servers": broker.bootstrap_servers})
    plain.produce(topic, value="behind it")
    plain.flush()
    reader = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": name("r"),
                       "isolation.level": "read_committed"})
    try:
        assert reader.get_watermark_offsets(Partition(topic, 0), timeout=10) == (0, 0)
        (state,) = admin.describe_producers([TopicPartition(topic, 0)])[TopicPartition(topic, 0)].active_producers
        admin.abort_transaction(AbortTransactionSpec(TopicPartition(topic, 0), state.producer_id,
                                                     state.producer_epoch, state.coordinator_epoch))
        assert reader.get_watermark_offsets(Partition(topic, 0), timeout=10) == (0, 3)  # records and the marker
    finally:
        reader.close()


def test_list_transactions_v1_and_v2_filter_by_duration_and_by_a_transactional_id_pattern(
        broker: testing.Broker, name: Callable[[str], str]) -> None:
    topic, transactional_id = broker.create_topic(name("slow")), name("txn")
    producer = Producer(producer_config(broker.bootstrap_servers, transactional_id))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value="open")
    producer.flush()

    def listed(duration_ms: int = -1, pattern: str | None = None) -> set[str]:
        with BlockingKafkaClient.connect(broker.bootstrap_servers) as client:
            answer = client.request(list_transactions.API, 2, list_transactions.REQUEST.cls(
                state_filters=["Ongoing"], producer_id_filters=[], duration_filter=duration_ms,
                transactional_id_pattern=pattern))
        assert answer.error_code == 0
        return {state.transactional_id for state in answer.transaction_states}

    assert transactional_id in listed(-1)
    assert transactional_id not in listed(3_600_000)  # started less than an hour ago
    testing.wait_until(lambda: transactional_id in listed(0), "the transaction has run for more than 0 ms")
    # v2 (KIP-1152): a pattern matching whole ids
    assert transactional_id in listed(pattern=transactional_id[:3] + ".*")
    assert transactional_id not in listed(pattern=transactional_id[:3])
    with BlockingKafkaClient.connect(broker.bootstrap_servers) as client:
        for bad in ("(unclosed", "(?=look-ahead)"):
            answer = client.request(list_transactions.API, 2, list_transactions.REQUEST.cls(
                state_filters=[], producer_id_filters=[], transactional_id_pattern=bad))
            assert (answer.error_code, answer.transaction_states) == (ErrorCode.INVALID_REGULAR_EXPRESSION, [])
    producer.abort_transaction(30)
