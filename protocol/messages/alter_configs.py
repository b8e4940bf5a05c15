"""API 33 · v0-2 · flexible 2+ · AlterConfigs

Replaces the whole config set of a resource: a key the request leaves out goes back to its default (the legacy
form of IncrementalAlterConfigs, which sets and deletes keys one by one).

Clients: kafkajs's admin.alterConfigs, confluent-kafka's AdminClient.alter_configs (deprecated there), and
kafka-python's alter_configs against brokers without IncrementalAlterConfigs.
The reference folder has no JSON for this API: the fields follow apache/kafka's 3.x AlterConfigsRequest.json /
AlterConfigsResponse.json, so the spec conformance test lists it as an API without a reference file.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "AlterConfigsRequest", api_key=33, kind="request", versions="0-2", flexible="2+",
    fields=[
        Field("resources", "[]AlterConfigsResource", "0+", fields=[
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
            Field("configs", "[]AlterableConfig", "0+", fields=[
                Field("name", "string", "0+"),
                Field("value", "string", "0+", nullable="0+"),
            ]),
        ]),
        Field("validate_only", "bool", "0+"),
    ],
)

RESPONSE = Message(
    "AlterConfigsResponse", api_key=33, kind="response", versions="0-2", flexible="2+",
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
