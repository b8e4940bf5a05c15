"""ControlledShutdown · v0-3 · a broker asking a ZooKeeper controller to let it go: advertised, never acted on.

Behaviour: served only when `kafka.version` names a ZooKeeper-era release (2.8 to 3.9), whose brokers list it in
ApiVersions; this broker follows its controller's metadata log instead. After the CLUSTER_ACTION check (dispatch),
every request is answered NOT_CONTROLLER: what a ZooKeeper-mode broker that is not the controller answers.
Version notes: the release narrows v0-3 to its own range.
Skipped: acting on it.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, error_response, handles
from epoch_broker.broker.services import Services
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import controlled_shutdown


@handles(controlled_shutdown.API, "0-3", cluster_action=True, release_only=True)
def handle(context: RequestContext[Services], request: Any) -> Any:
    return error_response(controlled_shutdown.API, request, ErrorCode.NOT_CONTROLLER)
