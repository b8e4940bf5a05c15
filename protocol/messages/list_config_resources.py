"""API 74 · v0-1 · flexible 0+ · ListConfigResources

The config resources a cluster has: v0 (Kafka 3.7's ListClientMetricsResources) the client-metrics resources of
KIP-714; v1 (Kafka 4.1, KIP-1142) those of the resource types asked for (none: every type), each with its type.

Clients: Kafka's kafka-configs.sh --list and Admin.listConfigResources, kafka-python 3.0
KafkaAdminClient.list_config_resources. Not in the reference folder (3.9): checked against Kafka 4.x's JSON
(tests/protocol/test_conformance.py).
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "ListConfigResourcesRequest", api_key=74, kind="request", versions="0-1", flexible="0+",
    fields=[
        Field("resource_types", "[]int8", "1+"),
    ],
)

RESPONSE = Message(
    "ListConfigResourcesResponse", api_key=74, kind="response", versions="0-1", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("config_resources", "[]ConfigResource", "0+", fields=[
            Field("resource_name", "string", "0+"),
            Field("resource_type", "int8", "1+", default=16),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
