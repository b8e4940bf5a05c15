"""FindCoordinator · v0-6 · where a group's or a transactional id's coordinator is.

Behaviour: for key type 0 (group) a key needs DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED, and nothing is
created for it); the coordinator is the leader of the group's `__consumer_offsets` partition,
`abs(java hashCode(group_id)) % offsets.topic.num.partitions`, so it moves with leadership. The first group key
allowed creates `__consumer_offsets` (lazily, as Kafka does); if that fails the answer is
COORDINATOR_NOT_AVAILABLE. Key type 1 (transaction) alike: DESCRIBE on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), the leader of its `__transaction_state` partition
(transaction.state.log.num.partitions), the topic made by the first key allowed. v0-3 ask for one key; v4+ batch
`coordinator_keys` and answer one entry per key.
Skipped: other key types (KIP-848's share groups) get INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import BrokerServices, group_coordinator
from epoch_broker.protocol.errors import ErrorCode, KafkaError
from epoch_broker.protocol.messages import find_coordinator as messages

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
NOT_FOUND = (-1, "", -1)  # node id, host, port

Location = tuple[ErrorCode, int, str, int]  # error, node id, host, port


async def _locate_all(context: RequestContext[BrokerServices], key_type: int, keys: list[str]) -> list[Location]:
    if key_type == KEY_TYPE_TRANSACTION:
        return await _locate_transactional_ids(context, keys)
    if key_type != KEY_TYPE_GROUP:
        return [(ErrorCode.INVALID_REQUEST, *NOT_FOUND)] * len(keys)
    visible = authorized_names(context, AclOperation.DESCRIBE, ResourceType.GROUP, keys)
    # a refused key creates nothing: __consumer_offsets is made for the first group key allowed
    available = bool(visible) and await _ensure_offsets_topic(context) is ErrorCode.NONE
    return [(ErrorCode.GROUP_AUTHORIZATION_FAILED, *NOT_FOUND) if key not in visible
            else group_coordinator(context.services).find_coordinator(key, context.listener) if available
            else (ErrorCode.COORDINATOR_NOT_AVAILABLE, *NOT_FOUND)
            for key in keys]


async def _locate_transactional_ids(context: RequestContext[BrokerServices], keys: list[str]) -> list[Location]:
    visible = authorized_names(context, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, keys)
    transactions = context.services.transaction_coordinator
    available = False
    if visible:
        try:
            await transactions.ensure_topic()
            available = True
        except KafkaError:
            pass
    return [(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, *NOT_FOUND) if key not in visible
            else transactions.find_coordinator(key, context.listener) if available
            else (ErrorCode.COORDINATOR_NOT_AVAILABLE, *NOT_FOUND)
            for key in keys]


async def _ensure_offsets_topic(context: RequestContext[BrokerServices]) -> ErrorCode:
    try:
        await group_coordinator(context.services).ensure_offsets_topic()
    except KafkaError:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return ErrorCode.NONE


@handles(messages.API, "0-6")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    response = messages.RESPONSE.cls()
    batched = context.api_version >= 4
    keys = list(request.coordinator_keys) if batched else [request.key]
    located = await _locate_all(context, request.key_type, keys)
    if batched:
        for key, (error, node_id, host, port) in zip(keys, located, strict=True):
            response.coordinators.append(messages.RESPONSE.Coordinator(
                key=key, node_id=node_id, host=host, port=port, error_code=error))
        return response
    ((error, node_id, host, port),) = located
    response.error_code = error
    response.node_id, response.host, response.port = node_id, host, port
    return response
