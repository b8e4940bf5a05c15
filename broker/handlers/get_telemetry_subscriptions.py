"""GetTelemetrySubscriptions · v0 · which metrics a client instance pushes, and how often (KIP-714).

Behaviour: Kafka's ClientMetricsManager (broker/client_metrics.py): the zero uuid gets a new client instance id;
the answer carries the instance's subscription id, the metric prefixes of the client-metrics subscriptions it
matches (none: it pushes nothing), their lowest push interval (else 5 minutes), delta temporality, the
compression types the broker reads (zstd, lz4, gzip, snappy: its record-batch codecs) and the largest payload
it takes (1 MiB). Asking again within the push interval: THROTTLING_QUOTA_EXCEEDED (with the same fields).
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.client_metrics import ACCEPTED_COMPRESSION_TYPES, TELEMETRY_MAX_BYTES
from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.messages import get_telemetry_subscriptions as messages


@handles(messages.API, "0")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    error, answer = context.services.client_metrics.get_telemetry_subscriptions(
        request.client_instance_id, context.client_id or "", context.peer,
        context.connection.client_software if context.connection is not None else None)
    return messages.RESPONSE.cls(
        throttle_time_ms=0, error_code=error, client_instance_id=answer.instance_id,
        subscription_id=answer.subscription_id, accepted_compression_types=list(ACCEPTED_COMPRESSION_TYPES),
        push_interval_ms=answer.interval_ms, telemetry_max_bytes=TELEMETRY_MAX_BYTES, delta_temporality=True,
        requested_metrics=answer.metrics)
