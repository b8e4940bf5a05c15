"""PushTelemetry · v0 · a client instance's metrics, pushed as its subscription asked (KIP-714).

Behaviour: checked as Kafka's ClientMetricsManager checks a push (broker/client_metrics.py): a reserved instance
id or a push after a terminating one INVALID_REQUEST, too early THROTTLING_QUOTA_EXCEEDED, a stale subscription
id UNKNOWN_SUBSCRIPTION_ID, an unknown codec UNSUPPORTED_COMPRESSION_TYPE, over 1 MiB TELEMETRY_TOO_LARGE. The
payload (OpenTelemetry MetricsData, decompressed with the record-batch codecs) is decoded and kept as the
instance's latest metrics: /metrics shows them (`epoch_broker_client_metric`), the status page lists the
instance. A payload that does not decode: INVALID_RECORD (Kafka's answer when its receiver plugin fails).
Skipped: nothing is forwarded to an exporter (Kafka's ClientTelemetryReceiver plugin).
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.messages import push_telemetry as messages


@handles(messages.API, "0")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    error = context.services.client_metrics.push_telemetry(
        request.client_instance_id, context.client_id or "", context.peer, request.subscription_id,
        request.terminating, request.compression_type, bytes(request.metrics or b""),
        context.connection.client_software if context.connection is not None else None)
    return messages.RESPONSE.cls(throttle_time_ms=0, error_code=error)
