"""API 71 · v0 · flexible 0+ · GetTelemetrySubscriptions

A client asks which of its metrics the broker wants pushed (KIP-714): the broker answers the client instance id
(assigned when the request carries the zero uuid), the subscription id to quote in PushTelemetry, the requested
metric name prefixes (none: push nothing; one empty string: all), the push interval, whether monotonic metrics
are sent as deltas, the compression types accepted and the largest payload accepted.

Clients: librdkafka 2.5+ (`enable.metrics.push`, default true), the Java client 3.7+.
Fields as Kafka's GetTelemetrySubscriptionsRequest.json / GetTelemetrySubscriptionsResponse.json (3.7 to 4.x: v0
only).
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "GetTelemetrySubscriptionsRequest", api_key=71, kind="request", versions="0", flexible="0+",
    fields=[
        Field("client_instance_id", "uuid", "0+"),
    ],
)

RESPONSE = Message(
    "GetTelemetrySubscriptionsResponse", api_key=71, kind="response", versions="0", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("client_instance_id", "uuid", "0+"),
        Field("subscription_id", "int32", "0+"),
        Field("accepted_compression_types", "[]int8", "0+"),
        Field("push_interval_ms", "int32", "0+"),
        Field("telemetry_max_bytes", "int32", "0+"),
        Field("delta_temporality", "bool", "0+"),
        Field("requested_metrics", "[]string", "0+"),
    ],
)

API = Api(REQUEST, RESPONSE)
