"""ListConfigResources · v0-1 · the config resources of the cluster, by type (KIP-714, KIP-1142).

Behaviour: needs DESCRIBE_CONFIGS on the cluster (else CLUSTER_AUTHORIZATION_FAILED). v0 lists the client-metrics
resources (KIP-714's subscriptions); v1 the resources of each type asked for, every type this broker describes
when none is: topics (2, every topic), brokers (4, every registered broker by id), client metrics (16) and groups
(32, every group id with a config set). Another type answers INVALID_REQUEST, as Kafka does for a type it cannot
list.
Version notes: v1 adds each resource's type.
Skipped: broker loggers (8): this broker has no config resources of that type. Groups without a config set are not
listed.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import list_config_resources as messages

R = messages.RESPONSE
TOPIC, BROKER, CLIENT_METRICS, GROUP = 2, 4, 16, 32
LISTED = (TOPIC, BROKER, CLIENT_METRICS, GROUP)


@handles(messages.API, "0-1")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    if not context.authorized(AclOperation.DESCRIBE_CONFIGS):
        return R.cls(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    types = [CLIENT_METRICS] if context.api_version == 0 else list(request.resource_types or LISTED)
    if any(kind not in LISTED for kind in types):
        return R.cls(error_code=ErrorCode.INVALID_REQUEST)
    cache = context.services.metadata
    names = {TOPIC: sorted(cache.topics_by_name), BROKER: [str(node) for node in sorted(cache.brokers)],
             CLIENT_METRICS: sorted(cache.client_metrics), GROUP: sorted(cache.group_configs)}
    return R.cls(config_resources=[R.ConfigResource(resource_name=name, resource_type=kind)
                                   for kind in dict.fromkeys(types) for name in names[kind]])
