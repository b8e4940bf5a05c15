"""API 47 · v0 · flexible none · OffsetDelete

Delete committed offsets of a group for some partitions (KIP-496).

Clients: not sent in the measured flows.
The reference folder has no JSON for this API: the fields follow apache/kafka's
OffsetDeleteRequest.json / OffsetDeleteResponse.json (v0, not flexible), so the spec
conformance test lists it as an API without a reference file.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "OffsetDeleteRequest", api_key=47, kind="request", versions="0", flexible="none",
    fields=[
        Field("group_id", "string", "0+"),
        Field("topics", "[]OffsetDeleteRequestTopic", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]OffsetDeleteRequestPartition", "0+", fields=[
                Field("partition_index", "int32", "0+"),
            ]),
        ]),
    ],
)

RESPONSE = Message(
    "OffsetDeleteResponse", api_key=47, kind="response", versions="0", flexible="none",
    fields=[
        Field("error_code", "int16", "0+"),
        Field("throttle_time_ms", "int32", "0+"),
        Field("topics", "[]OffsetDeleteResponseTopic", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]OffsetDeleteResponsePartition", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
            ]),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
