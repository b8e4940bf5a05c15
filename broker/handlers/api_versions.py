"""ApiVersions · v0-4 · the first request on every connection.

Behaviour: lists every API the connection serves and at which versions (the handlers' ranges, narrowed to the
release the broker claims with `kafka.version`: dispatch.served_by), so the broker never advertises what it does
not implement. Answered to anyone: no ACL is checked (as in Kafka).
Version notes: a request version above 4 gets UNSUPPORTED_VERSION with the list in a v0 body (KIP-511), and
the client retries with a version we list. v3+ carries the client's software name and version: logged, and kept
on the connection (KIP-714's subscriptions match clients by them).
A broker claiming a release lists its feature flags (KIP-584) at v3+ as that release does: a ZooKeeper-mode
release none, with finalized epoch 0 (a fresh cluster's feature znode); a KRaft release its supported ranges and
finalized levels (protocol/releases.py) at the epoch of the metadata it has applied, the finalized levels 0 left out
and, to a v3 request, the supported features whose minimum is 0 too (Kafka's KAFKA-17492: older clients cannot
read them). Unset, no features are listed (the broker is no one release). librdkafka 2.0.2 (Debian's kcat)
reads these answers.
Skipped: zk_migration_ready stays false (no ZooKeeper migration here).
"""

from __future__ import annotations

import logging
from typing import Any

from epoch_broker.broker.network.dispatch import BROKER, CONTROLLER, REGISTRY, RequestContext, handles, served_by
from epoch_broker.broker.services import Services
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import api_versions
from epoch_broker.protocol.releases import KafkaRelease

log = logging.getLogger(__name__)
Response = api_versions.RESPONSE.cls
ApiVersion = api_versions.RESPONSE.ApiVersion
SupportedFeatureKey = api_versions.RESPONSE.SupportedFeatureKey
FinalizedFeatureKey = api_versions.RESPONSE.FinalizedFeatureKey


@handles(api_versions.API, "0-4", roles=(BROKER, CONTROLLER))
def handle(context: RequestContext[Services], request: Any) -> Any:
    served = context.connection.served if context.connection is not None else served_by(REGISTRY[context.role], None)
    keys = [ApiVersion(api_key=key, min_version=served[key].versions.low, max_version=served[key].versions.high)
            for key in sorted(served)]
    if context.unsupported:
        return Response(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=keys)
    if context.api_version >= 3:
        log.debug("client %s from %s: %s %s", context.client_id, context.peer, request.client_software_name,
                  request.client_software_version)
        if context.connection is not None:  # kept for what matches clients by it (KIP-714's subscriptions)
            context.connection.client_software = (request.client_software_name, request.client_software_version)
        release = context.services.config.kafka_version if context.role == BROKER else None
        if release is not None:
            return Response(error_code=ErrorCode.NONE, api_keys=keys, **_features(release, context))
    return Response(error_code=ErrorCode.NONE, api_keys=keys)


def _features(release: KafkaRelease, context: RequestContext[Services]) -> dict[str, Any]:
    return {
        "supported_features": [SupportedFeatureKey(name=name, min_version=low, max_version=high)
                               for name, (low, high) in release.supported_features.items()
                               if low > 0 or context.api_version >= 4],
        "finalized_features": [FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
                               for name, level in release.finalized_features.items() if level > 0],
        "finalized_features_epoch": 0 if release.zookeeper_mode else context.services.metadata.metadata_offset,
    }

