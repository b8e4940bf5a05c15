"""InitProducerId · v0-5 · a producer id and epoch for an idempotent or transactional producer.

Behaviour: without a transactional id: needs IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (KIP-679:
Kafka's authorizeByResourceType), else CLUSTER_AUTHORIZATION_FAILED. A new producer id, unique across the cluster
and across restarts (blocks of ids are recorded in the controller's metadata log), epoch 0. A v3+ request that
names its current producer id and epoch (KIP-360, after an unknown-producer or sequence error) gets the same id with
the epoch bumped, so its sequences restart.
With a transactional id: needs WRITE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); the transaction coordinator
decides (broker/transactions/coordinator.py): the id's producer id with its epoch bumped, fencing older
incarnations, after aborting a transaction they left open (CONCURRENT_TRANSACTIONS until then);
INVALID_TRANSACTION_TIMEOUT above transaction.max.timeout.ms; NOT_COORDINATOR off its coordinator.
Version notes: aiokafka sends v0 and kafkajs v1; v0-2 have no producer id/epoch fields in the request.
Skipped: the idempotent epoch bump does not check that the id was handed out by us (no producer-id expiry).
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_by_resource_type
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import init_producer_id

Response = init_producer_id.RESPONSE.cls
MAX_EPOCH = 32767


@handles(init_producer_id.API, "0-5")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    if request.transactional_id is not None:
        if not context.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
            return Response(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_id=-1,
                            producer_epoch=-1)
        result = await context.services.transaction_coordinator.init_producer_id(
            request.transactional_id, request.transaction_timeout_ms, request.producer_id, request.producer_epoch)
        return Response(error_code=result.error, producer_id=result.producer_id, producer_epoch=result.producer_epoch)
    if not (context.authorized(AclOperation.IDEMPOTENT_WRITE)
            or authorized_by_resource_type(context, AclOperation.WRITE, ResourceType.TOPIC)):
        return Response(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, producer_id=-1, producer_epoch=-1)
    if request.producer_id >= 0 and 0 <= request.producer_epoch < MAX_EPOCH - 1:
        return Response(error_code=ErrorCode.NONE, producer_id=request.producer_id,
                        producer_epoch=request.producer_epoch + 1)
    return Response(error_code=ErrorCode.NONE, producer_id=await context.services.next_producer_id(), producer_epoch=0)
