"""EndTxn · v0-4 · commit or abort a producer's transaction.

Behaviour: needs WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED). The transaction
coordinator (broker/transactions/coordinator.py) answers once PrepareCommit or PrepareAbort is durable in
`__transaction_state`; the markers follow in the background. A retry of a completed EndTxn is answered NONE, one
while the markers are being written CONCURRENT_TRANSACTIONS, the opposite outcome or no transaction at all
INVALID_TXN_STATE; NOT_COORDINATOR, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED as for AddPartitionsToTxn.
Version notes: v2 may answer PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH instead); v3 flexible; v4
(Kafka 3.8) the same here: nothing answers TRANSACTION_ABORTABLE.
Skipped: v4+ (KIP-890's TRANSACTION_ABORTABLE and epoch bump per transaction).
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.handlers.add_partitions_to_txn import producer_fenced_for
from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import end_txn as messages


@handles(messages.API, "0-4")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    if not context.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return messages.RESPONSE.cls(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    error = await context.services.transaction_coordinator.end_txn(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed)
    return messages.RESPONSE.cls(error_code=producer_fenced_for(context.api_version, error, 2))
