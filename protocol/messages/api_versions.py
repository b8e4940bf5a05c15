"""API 18 · v0-4 · flexible 3+ · ApiVersions

Version negotiation, the first request on every connection.
A request version above our max gets UNSUPPORTED_VERSION with a v0 body listing what we
support (KIP-511). The response always uses response header v0, even at v3+.

Clients: aiokafka sends v0, kafkajs v2, confluent-kafka/kcat v3, kafka-python v4.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "ApiVersionsRequest", api_key=18, kind="request", versions="0-4", flexible="3+",
    fields=[
        Field("client_software_name", "string", "3+"),
        Field("client_software_version", "string", "3+"),
    ],
)

RESPONSE = Message(
    "ApiVersionsResponse", api_key=18, kind="response", versions="0-4", flexible="3+",
    fields=[
        Field("error_code", "int16", "0+"),
        Field("api_keys", "[]ApiVersion", "0+", fields=[
            Field("api_key", "int16", "0+"),
            Field("min_version", "int16", "0+"),
            Field("max_version", "int16", "0+"),
        ]),
        Field("throttle_time_ms", "int32", "1+"),
        Field("supported_features", "[]SupportedFeatureKey", "3+", tag=0, tagged="3+", fields=[
            Field("name", "string", "3+"),
            Field("min_version", "int16", "3+"),
            Field("max_version", "int16", "3+"),
        ]),
        Field("finalized_features_epoch", "int64", "3+", tag=1, tagged="3+", default=-1),
        Field("finalized_features", "[]FinalizedFeatureKey", "3+", tag=2, tagged="3+", fields=[
            Field("name", "string", "3+"),
            Field("max_version_level", "int16", "3+"),
            Field("min_version_level", "int16", "3+"),
        ]),
        Field("zk_migration_ready", "bool", "3+", tag=3, tagged="3+", default=False),
    ],
)

API = Api(REQUEST, RESPONSE)
