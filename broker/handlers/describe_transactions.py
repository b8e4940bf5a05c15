"""DescribeTransactions · v0 · the state of transactional ids at their coordinator (kafka-transactions.sh describe).

Behaviour: needs DESCRIBE on each transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); the coordinator answers
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, or TRANSACTIONAL_ID_NOT_FOUND, else the id's state by Kafka's name
(Empty, Ongoing, PrepareCommit, ...), its timeout, start time (-1 unless a transaction is open), producer id and
epoch, and its partitions, those of topics the principal may DESCRIBE.
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import describe_transactions as messages

Response = messages.RESPONSE


@handles(messages.API, "0")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    coordinator = context.services.transaction_coordinator
    states = []
    for transactional_id in request.transactional_ids:
        answer = Response.TransactionState(transactional_id=transactional_id, transaction_state="",
                                           transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[])
        if not context.authorized(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            answer.error_code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        else:
            error, txn = coordinator.describe(transactional_id)
            answer.error_code = error
            if txn is not None:
                by_topic: dict[str, list[int]] = {}
                for topic, index in sorted(txn.partitions):
                    by_topic.setdefault(topic, []).append(index)
                visible = authorized_names(context, AclOperation.DESCRIBE, ResourceType.TOPIC, by_topic)
                answer.transaction_state = txn.state.kafka_name
                answer.transaction_timeout_ms = txn.timeout_ms
                answer.transaction_start_time_ms = txn.start_ms
                answer.producer_id, answer.producer_epoch = txn.producer_id, txn.producer_epoch
                answer.topics = [Response.TopicData(topic=t, partitions=p) for t, p in by_topic.items()
                                 if t in visible]
        states.append(answer)
    return Response.cls(transaction_states=states)
