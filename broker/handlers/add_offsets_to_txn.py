"""AddOffsetsToTxn · v0-4 · a group's offsets join a producer's transaction (before TxnOffsetCommit).

Behaviour: needs WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and READ on the group
(GROUP_AUTHORIZATION_FAILED); the group's `__consumer_offsets` partition (made if missing) joins the transaction
at its coordinator, with the answers of AddPartitionsToTxn.
Version notes: v2 may answer PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH instead); v3 flexible; v4
(Kafka 3.8) the same here: nothing answers TRANSACTION_ABORTABLE.
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.handlers.add_partitions_to_txn import producer_fenced_for
from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import add_offsets_to_txn as messages


@handles(messages.API, "0-4")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    if not context.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return messages.RESPONSE.cls(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not context.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return messages.RESPONSE.cls(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = await context.services.transaction_coordinator.add_offsets(
        request.transactional_id, request.producer_id, request.producer_epoch, request.group_id)
    return messages.RESPONSE.cls(error_code=producer_fenced_for(context.api_version, error, 2))
