"""ApiVersions · v0-4 · the first request on every connection.

Behaviour: lists every API the connection serves and at which versions (the handlers' ranges, narrowed to the
release the broker claims with `kafka.version`: dispatch.served_by), so the broker never advertises what it does
not implement. Answered to anyone: no ACL is checked (as in Kafka).
Version notes: a request version above 4 gets UNSUPPORTED_VERSION with the list in a v0 body (KIP-511), and
the client retries with a version we list. v3+ carries the client's software name and version: logged, and kept
on the connection (KIP-714's subscriptions match clients by them).
Skipped: supported_features, finalized_features and zk_migration_ready are left at their defaults, so the
tag section stays EMPTY: librdkafka before 2.2.0 (Debian's kcat) misreads non-empty tags in this response.
"""

from __future__ import annotations

import logging
from typing import Any

from epoch_broker.broker.network.dispatch import BROKER, CONTROLLER, REGISTRY, RequestContext, handles, served_by
from epoch_broker.broker.services import Services
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import api_versions

log = logging.getLogger(__name__)
Response = api_versions.RESPONSE.cls
ApiVersion = api_versions.RESPONSE.ApiVersion


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
    return Response(error_code=ErrorCode.NONE, api_keys=keys)
