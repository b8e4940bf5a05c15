"""KIP-890 part 1, the partition leader's side: before a transactional Produce opens its producer's transaction in a
partition, the transaction coordinator is asked whether the partition was added to that transaction (Kafka's
AddPartitionsToTxnManager). The guard that makes the answer safe to act on is the partition's
(`Partition.maybe_start_transaction_verification`); the produce handler ties the two together.

Rules:
- The coordinator is the leader of the transactional id's `__transaction_state` partition: this broker's own
  coordinator is asked directly (`TransactionCoordinator.verify_partitions`), another broker with AddPartitionsToTxn
  v4+ verify_only over the transaction connections (inter_broker.py). No leader known: COORDINATOR_NOT_AVAILABLE.
- The answers are mapped as Kafka maps them for a producer: PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH (what a
  producer expects of a Produce); TRANSACTION_ABORTABLE -> INVALID_TXN_STATE unless the producer's Produce version
  knows the generic error (v11+); a top-level error for every partition, CLUSTER_AUTHORIZATION_FAILED as
  INVALID_TXN_STATE (the broker's own credentials are no business of the producer); a lost connection or no
  answer within REQUEST_TIMEOUT_S: NETWORK_EXCEPTION.
- A coordinator that does not serve AddPartitionsToTxn v4 (a broker claiming a release before 3.6) cannot verify:
  the produce goes on unverified, as Kafka's manager does on a version mismatch.
- Differs from Kafka: one request per Produce, not the transactions of many produces batched per coordinator.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from epoch_broker.broker.transactions.inter_broker import InterBrokerClients
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import add_partitions_to_txn

log = logging.getLogger(__name__)

TXN_TOPIC = "__transaction_state"  # as coordinator.TXN_TOPIC (which imports this module)
REQUEST_TIMEOUT_S = 10.0
FIRST_VERIFYING_VERSION = 4  # AddPartitionsToTxn's broker form (VerifyOnly), Kafka 3.6

PartitionKey = tuple[str, int]


class AddPartitionsToTxnManager:
    def __init__(self, broker: Any, clients: InterBrokerClients) -> None:  # broker: app.Broker
        self.broker = broker
        self.clients = clients

    async def verify_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                 partitions: Iterable[PartitionKey], generic_error: bool
                                 ) -> dict[PartitionKey, ErrorCode]:
        """The partitions that are not verified, with the error the producer gets for each (every other partition
        was verified). `generic_error`: the Produce version knows TRANSACTION_ABORTABLE (v11+)."""
        keys = sorted(set(partitions))
        coordinator = self.broker.transaction_coordinator
        state = self.broker.metadata.partition(TXN_TOPIC, coordinator.partition_for(transactional_id))
        if state is None or state.leader < 0:
            return dict.fromkeys(keys, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if state.leader == self.broker.node_id:
            answers = coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, set(keys))
        else:
            try:
                answers = await asyncio.wait_for(
                    self._request(state.leader, transactional_id, producer_id, producer_epoch, keys),
                    REQUEST_TIMEOUT_S)
            except (OSError, TimeoutError) as exc:
                log.debug("AddPartitionsToTxn (verify only) to broker %d failed: %s", state.leader, exc)
                self.clients.drop(state.leader)
                return dict.fromkeys(keys, ErrorCode.NETWORK_EXCEPTION)
        return {key: _for_producer(error, generic_error) for key, error in answers.items() if error != ErrorCode.NONE}

    async def _request(self, node_id: int, transactional_id: str, producer_id: int, producer_epoch: int,
                       keys: list[PartitionKey]) -> dict[PartitionKey, ErrorCode]:
        client = await self.clients.get(node_id)
        _, high = client.broker_versions.get(add_partitions_to_txn.API.key, (0, -1))
        version = min(high, add_partitions_to_txn.API.versions.high)
        if version < FIRST_VERIFYING_VERSION:
            log.debug("broker %d serves AddPartitionsToTxn up to v%d: transactional produces are not verified",
                      node_id, high)
            return {}
        q = add_partitions_to_txn.REQUEST
        by_topic: dict[str, list[int]] = {}
        for topic, index in keys:
            by_topic.setdefault(topic, []).append(index)
        body = q.cls(transactions=[q.AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=True, topics=[q.AddPartitionsToTxnTopic(name=t, partitions=p) for t, p in by_topic.items()])])
        response = await client.request(add_partitions_to_txn.API, version, body)
        if response.error_code != ErrorCode.NONE:
            error = ErrorCode(response.error_code)
            log.warning("AddPartitionsToTxn (verify only) to broker %d answered %s", node_id, error.name)
            return dict.fromkeys(keys, error)
        answers = dict.fromkeys(keys, ErrorCode.UNKNOWN_SERVER_ERROR)
        for transaction in response.results_by_transaction:
            for topic in transaction.topic_results:
                for partition in topic.results_by_partition:
                    if (topic.name, partition.partition_index) in answers:
                        answers[(topic.name, partition.partition_index)] = ErrorCode(partition.partition_error_code)
        return answers


def _for_producer(error: ErrorCode, generic_error: bool) -> ErrorCode:
    """A coordinator's answer as a Produce of that version answers it (Kafka's AddPartitionsToTxnManager)."""
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if error == ErrorCode.TRANSACTION_ABORTABLE and not generic_error:
        return ErrorCode.INVALID_TXN_STATE
    if error == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        return ErrorCode.INVALID_TXN_STATE
    return error
