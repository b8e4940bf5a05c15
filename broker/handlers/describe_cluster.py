"""DescribeCluster · v0-2 · cluster id, controller id and the registered brokers.

Behaviour: kafka-python's admin `describe_cluster()` uses it when advertised. Answered to anyone, as a Kafka
broker does: DESCRIBE on the cluster only decides cluster_authorized_operations, INT32_MIN unless asked for, then
the operations the principal may do on the cluster (every one with no authorizer), or 0 without DESCRIBE.
Version notes: v1 endpoint_type: only brokers (1); asking for controllers (2) answers
UNSUPPORTED_ENDPOINT_TYPE: controllers are not listed (the broker-to-controller address is configured). v2
(KIP-1073) with include_fenced_brokers lists the registered but fenced brokers too, with is_fenced set.
Also served by a controller-only process (the launcher and brokers ask it for its id).
Skipped: Kafka's controller answers it only to ALTER on the cluster; a controller-only process here answers as a
broker does.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import BROKER, CONTROLLER, RequestContext, handles
from epoch_broker.broker.security.authorization import cluster_authorized_operations
from epoch_broker.broker.services import Services
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import describe_cluster

Response = describe_cluster.RESPONSE.cls
Broker = describe_cluster.RESPONSE.DescribeClusterBroker
BROKERS = 1


@handles(describe_cluster.API, "0-2", roles=(BROKER, CONTROLLER))
def handle(context: RequestContext[Services], request: Any) -> Any:
    broker = context.services
    if request.endpoint_type != BROKERS:
        return Response(error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, endpoint_type=request.endpoint_type,
                        cluster_id=broker.cluster_id)
    image = broker.metadata
    listed = image.brokers if request.include_fenced_brokers else image.live_brokers
    return Response(
        error_code=ErrorCode.NONE,
        cluster_id=broker.cluster_id,
        controller_id=image.controller_id,
        brokers=[Broker(broker_id=b.node_id, host=host, port=port, rack=b.rack,
                        is_fenced=b.node_id in image.fenced_brokers)
                 for b in listed.values() for host, port in [b.endpoint(context.listener)]],
        cluster_authorized_operations=cluster_authorized_operations(context,
                                                                    request.include_cluster_authorized_operations),
    )
