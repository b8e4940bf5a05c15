"""LeaderAndIsr · v0-7 · a ZooKeeper controller's leaders and ISRs: advertised, never acted on.

Behaviour: served only when `kafka.version` names a ZooKeeper-era release (2.8 to 3.9), whose brokers list it in
ApiVersions (kafka-python infers 3.4 from its v7); this broker follows its controller's metadata log instead. After
the CLUSTER_ACTION check (dispatch), every request is answered STALE_CONTROLLER_EPOCH: what a ZooKeeper-mode broker
answers a controller epoch older than the one it follows.
Version notes: the release narrows v0-7 to its own range.
Skipped: acting on it.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, error_response, handles
from epoch_broker.broker.services import Services
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import leader_and_isr


@handles(leader_and_isr.API, "0-7", cluster_action=True, release_only=True)
def handle(context: RequestContext[Services], request: Any) -> Any:
    return error_response(leader_and_isr.API, request, ErrorCode.STALE_CONTROLLER_EPOCH)
