"""AllocateProducerIds · v0 · (controller) a block of never-used producer ids for a broker.

Behaviour: a stale broker epoch answers STALE_BROKER_EPOCH; otherwise the block is durable before the answer.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import CONTROLLER, RequestContext, handles
from epoch_broker.broker.services import ControllerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import allocate_producer_ids

Response = allocate_producer_ids.RESPONSE.cls


@handles(allocate_producer_ids.API, "0", roles=(CONTROLLER,), cluster_action=True)
def handle(context: RequestContext[ControllerServices], request: Any) -> Any:
    controller = context.services.controller
    error = controller.check_broker_epoch(request.broker_id, request.broker_epoch)
    if error != ErrorCode.NONE:
        return Response(error_code=error)
    start, count = controller.allocate_producer_ids(request.broker_id)
    return Response(error_code=ErrorCode.NONE, producer_id_start=start, producer_id_len=count)
