"""BrokerHeartbeat · v0-1 · (controller) liveness, fencing and controlled shutdown.

Behaviour: a stale broker epoch answers STALE_BROKER_EPOCH; otherwise the heartbeat renews the broker's
session, unfences it once it has caught up with the metadata log, and with want_shut_down fences it at once
(moving its leaderships) and answers should_shut_down (Controller.heartbeat). The connection is noted: if it
closes, the broker's session is cut short (ControllerServer).
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import CONTROLLER, RequestContext, handles
from epoch_broker.broker.services import ControllerServices
from epoch_broker.protocol.messages import broker_heartbeat

Response = broker_heartbeat.RESPONSE.cls


@handles(broker_heartbeat.API, "0-1", roles=(CONTROLLER,), cluster_action=True)
def handle(context: RequestContext[ControllerServices], request: Any) -> Any:
    context.services.note_heartbeat_connection(context.peer, request.broker_id)
    result = context.services.controller.heartbeat(request.broker_id, request.broker_epoch,
                                                 request.current_metadata_offset, request.want_fence,
                                                 request.want_shut_down)
    return Response(error_code=result.error, is_caught_up=result.is_caught_up, is_fenced=result.is_fenced,
                    should_shut_down=result.should_shut_down)
