"""FindCoordinator · v0-6 · where a group's coordinator is.

Behaviour: for key type 0 (group) a key needs DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED, and nothing is
created for it); the coordinator is the leader of the group's `__consumer_offsets` partition,
`abs(java hashCode(group_id)) % offsets.topic.num.partitions`, so it moves with leadership. The first group key
allowed creates `__consumer_offsets` (lazily, as Kafka does); if that fails the answer is
COORDINATOR_NOT_AVAILABLE. v0-3 ask for one key; v4+ batch `coordinator_keys` and answer one entry per key.
Skipped: key type 1 (transaction): there is no transaction coordinator, so it answers
TRANSACTIONAL_ID_AUTHORIZATION_FAILED with the message TRANSACTIONS_UNSUPPORTED: the one answer clients treat
as fatal at once (librdkafka's init_transactions() fails with the message; COORDINATOR_NOT_AVAILABLE would
keep them retrying until their timeout). Other key types get INVALID_REQUEST.
"""

from __future__ import annotations

import logging
from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.errors import ErrorCode, KafkaError
from epoch_broker.protocol.messages import find_coordinator as messages

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
TRANSACTIONS_UNSUPPORTED = "epoch-broker does not support transactions yet (no transaction coordinator)"
NOT_FOUND = (-1, "", -1)  # node id, host, port

Location = tuple[ErrorCode, int, str, int]  # error, node id, host, port
log = logging.getLogger(__name__)


async def _locate_all(context: RequestContext[BrokerServices], key_type: int, keys: list[str]) -> list[Location]:
    if key_type == KEY_TYPE_TRANSACTION:
        log.warning("FindCoordinator from client %s at %s: transactional id %s refused with "
                    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED (no transaction coordinator)", context.client_id,
                    context.peer, ", ".join(map(repr, keys)))
        return [(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, *NOT_FOUND)] * len(keys)
    if key_type != KEY_TYPE_GROUP:
        return [(ErrorCode.INVALID_REQUEST, *NOT_FOUND)] * len(keys)
    visible = authorized_names(context, AclOperation.DESCRIBE, ResourceType.GROUP, keys)
    # a refused key creates nothing: __consumer_offsets is made for the first group key allowed
    available = bool(visible) and await _ensure_offsets_topic(context) is ErrorCode.NONE
    return [(ErrorCode.GROUP_AUTHORIZATION_FAILED, *NOT_FOUND) if key not in visible
            else context.services.group_coordinator.find_coordinator(key, context.listener) if available
            else (ErrorCode.COORDINATOR_NOT_AVAILABLE, *NOT_FOUND)
            for key in keys]


def _message(key_type: int, error: ErrorCode) -> str | None:
    return TRANSACTIONS_UNSUPPORTED if key_type == KEY_TYPE_TRANSACTION and error != ErrorCode.NONE else None


async def _ensure_offsets_topic(context: RequestContext[BrokerServices]) -> ErrorCode:
    try:
        await context.services.group_coordinator.ensure_offsets_topic()
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
                key=key, node_id=node_id, host=host, port=port, error_code=error,
                error_message=_message(request.key_type, error)))
        return response
    ((error, node_id, host, port),) = located
    response.error_code = error
    response.error_message = _message(request.key_type, error)
    response.node_id, response.host, response.port = node_id, host, port
    return response
