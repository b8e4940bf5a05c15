"""API 37 · v0-3 · flexible 2+ · CreatePartitions

Add partitions to existing topics.

Clients: not sent in the measured flows.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "CreatePartitionsRequest", api_key=37, kind="request", versions="0-3", flexible="2+",
    fields=[
        Field("topics", "[]CreatePartitionsTopic", "0+", fields=[
            Field("name", "string", "0+"),
            Field("count", "int32", "0+"),
            Field("assignments", "[]CreatePartitionsAssignment", "0+", nullable="0+", fields=[
                Field("broker_ids", "[]int32", "0+"),
            ]),
        ]),
        Field("timeout_ms", "int32", "0+"),
        Field("validate_only", "bool", "0+"),
    ],
)

RESPONSE = Message(
    "CreatePartitionsResponse", api_key=37, kind="response", versions="0-3", flexible="2+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("results", "[]CreatePartitionsTopicResult", "0+", fields=[
            Field("name", "string", "0+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+", default=None),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
