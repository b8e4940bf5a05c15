"""API 7 · v0-3 · flexible 3+ · ControlledShutdown

Inter-broker: a broker asks the controller to move leadership away before it
stops. v0 uses request header v0 (no client id).

Clients: never sent by clients.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "ControlledShutdownRequest", api_key=7, kind="request", versions="0-3", flexible="3+",
    fields=[
        Field("broker_id", "int32", "0+"),
        Field("broker_epoch", "int64", "2+", default=-1),
    ],
)

RESPONSE = Message(
    "ControlledShutdownResponse", api_key=7, kind="response", versions="0-3", flexible="3+",
    fields=[
        Field("error_code", "int16", "0+"),
        Field("remaining_partitions", "[]RemainingPartition", "0+", fields=[
            Field("topic_name", "string", "0+"),
            Field("partition_index", "int32", "0+"),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
