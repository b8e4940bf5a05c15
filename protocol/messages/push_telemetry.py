"""API 72 · v0 · flexible 0+ · PushTelemetry

A client pushes the metrics its subscription asked for (KIP-714): OpenTelemetry `MetricsData` (protobuf),
compressed with `compression_type` (Kafka's record-batch codec ids, 0 none). `terminating` marks the last push
before the client closes.

Clients: librdkafka 2.5+, the Java client 3.7+.
Fields as Kafka's PushTelemetryRequest.json / PushTelemetryResponse.json (3.7 to 4.x: v0 only).
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "PushTelemetryRequest", api_key=72, kind="request", versions="0", flexible="0+",
    fields=[
        Field("client_instance_id", "uuid", "0+"),
        Field("subscription_id", "int32", "0+"),
        Field("terminating", "bool", "0+"),
        Field("compression_type", "int8", "0+"),
        Field("metrics", "bytes", "0+"),
    ],
)

RESPONSE = Message(
    "PushTelemetryResponse", api_key=72, kind="response", versions="0", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
    ],
)

API = Api(REQUEST, RESPONSE)
