"""ListTransactions · v0-2 · the transactional ids this broker coordinates (kafka-transactions.sh list asks every
broker).

Behaviour: only ids the principal may DESCRIBE are listed; `state_filters` (Kafka's state names) and
`producer_id_filters` narrow the list (empty: no filter); filters naming no state are echoed in
`unknown_state_filters`. COORDINATOR_LOAD_IN_PROGRESS while a `__transaction_state` partition led here loads.
Version notes: v1's duration_filter (KIP-994) lists only transactions started more than that many milliseconds ago
(-1: any), as Kafka's TransactionStateManager.listTransactionStates; v2's transactional_id_pattern (KIP-1152) lists
the ids it matches whole (null or empty: any), read as RE2/J reads it (broker/regex.py): INVALID_REGULAR_EXPRESSION
if it does not compile or uses what RE2 lacks (why is logged: the answer has no message).
Skipped: nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.regex import compile_regex
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import BrokerServices
from epoch_broker.broker.transactions.records import TxnState
from epoch_broker.protocol.errors import ErrorCode, KafkaError
from epoch_broker.protocol.messages import list_transactions as messages

log = logging.getLogger(__name__)
Response = messages.RESPONSE
STATE_NAMES = {state.kafka_name for state in TxnState}


@handles(messages.API, "0-2")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    coordinator = context.services.transaction_coordinator
    if coordinator.loading:
        return Response.cls(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    try:
        pattern = compile_regex(request.transactional_id_pattern, "TransactionalIdPattern") \
            if request.transactional_id_pattern else None
    except KafkaError as exc:
        log.info("ListTransactions from %s refused: %s", context.peer, exc)
        return Response.cls(error_code=exc.code)
    unknown = [name for name in request.state_filters if name not in STATE_NAMES]
    found = coordinator.list_transactions(set(request.state_filters), set(request.producer_id_filters),
                                          request.duration_filter)
    visible = authorized_names(context, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                               [txn.transactional_id for txn in found])
    return Response.cls(unknown_state_filters=unknown, transaction_states=[
        Response.TransactionState(transactional_id=txn.transactional_id, producer_id=txn.producer_id,
                                  transaction_state=txn.state.kafka_name)
        for txn in found if txn.transactional_id in visible
        and (pattern is None or pattern.fullmatch(txn.transactional_id))])
