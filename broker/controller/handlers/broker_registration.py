"""BrokerRegistration · v0-3 · (controller) a broker (re)registers and gets a new broker epoch.

Behaviour: the broker's first listener is where clients and other brokers reach it. A different cluster id
answers INCONSISTENT_CLUSTER_ID. Registration bumps the leader epoch of the partitions the broker leads
(KIP-101's returning leader) and elects it where a partition waits for it (Controller.register_broker).
The connection is noted as the broker's heartbeat connection (its heartbeats follow on it): if it closes, the
broker's session is cut short (ControllerServer), also before its first heartbeat.
A node id outside 0..2^31-1, or the controller's own, answers INVALID_REQUEST; another incarnation of a node
whose session is alive answers DUPLICATE_BROKER_REGISTRATION (Controller.register_broker): nothing is written.
Skipped: features (all brokers run this version), log dirs, ZooKeeper migration.
"""

from __future__ import annotations

import logging
from typing import Any

from epoch_broker.broker.controller.cluster_control import RegistrationRefused
from epoch_broker.broker.network.dispatch import CONTROLLER, RequestContext, handles
from epoch_broker.broker.services import ControllerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import broker_registration

Response = broker_registration.RESPONSE.cls
MAX_NODE_ID = 2**31 - 1
log = logging.getLogger(__name__)


@handles(broker_registration.API, "0-3", roles=(CONTROLLER,), cluster_action=True)
def handle(context: RequestContext[ControllerServices], request: Any) -> Any:
    server = context.services
    if request.cluster_id and request.cluster_id != server.cluster_id:
        return Response(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID)
    if not request.listeners:
        return Response(error_code=ErrorCode.INVALID_REQUEST)
    if not 0 <= request.broker_id <= MAX_NODE_ID or request.broker_id == server.node_id:
        log.warning("refused a registration of node id %d from %s: not a broker id", request.broker_id,
                    context.peer)
        return Response(error_code=ErrorCode.INVALID_REQUEST)
    listener = request.listeners[0]
    try:
        epoch = server.controller.register_broker(
            request.broker_id, request.incarnation_id, listener.host, listener.port, request.rack,
            {entry.name: f"{entry.host}:{entry.port}" for entry in request.listeners})
    except RegistrationRefused as refused:
        return Response(error_code=refused.error)
    # A broker killed within its first heartbeat interval would otherwise keep its whole session (a failover of
    # broker.session.timeout.ms instead of two heartbeat intervals).
    server.note_heartbeat_connection(context.peer, request.broker_id)
    return Response(error_code=ErrorCode.NONE, broker_epoch=epoch)
