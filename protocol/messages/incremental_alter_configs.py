"""API 44 · v0-1 · flexible 1+ · IncrementalAlterConfigs

Sets (operation 0), deletes (1), appends to (2) or subtracts from (3) config values of a resource: a topic
(resource type 2) or a broker (4, named by its node id).

Clients: Kafka's admin clients; here, `epoch-broker admin` sets a broker's fault hooks through it.
The reference folder has no JSON for this API: the fields follow apache/kafka's 3.x
IncrementalAlterConfigsRequest.json / IncrementalAlterConfigsResponse.json, so the spec conformance test
lists it as an API without a reference file.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "IncrementalAlterConfigsRequest", api_key=44, kind="request", versions="0-1", flexible="1+",
    fields=[
        Field("resources", "[]AlterConfigsResource", "0+", fields=[
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
            Field("configs", "[]AlterableConfig", "0+", fields=[
                Field("name", "string", "0+"),
                Field("config_operation", "int8", "0+"),
                Field("value", "string", "0+", nullable="0+"),
            ]),
        ]),
        Field("validate_only", "bool", "0+"),
    ],
)

RESPONSE = Message(
    "IncrementalAlterConfigsResponse", api_key=44, kind="response", versions="0-1", flexible="1+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("responses", "[]AlterConfigsResourceResponse", "0+", fields=[
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)

# resource types and config operations, as Kafka numbers them
TOPIC_RESOURCE, BROKER_RESOURCE, CLIENT_METRICS_RESOURCE, GROUP_RESOURCE = 2, 4, 16, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
