"""API 21 · v0-2 · flexible 2+ · DeleteRecords

Advance a partition's log start offset (admin delete-records).

Clients: not sent in the measured flows.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "DeleteRecordsRequest", api_key=21, kind="request", versions="0-2", flexible="2+",
    fields=[
        Field("topics", "[]DeleteRecordsTopic", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]DeleteRecordsPartition", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("offset", "int64", "0+"),
            ]),
        ]),
        Field("timeout_ms", "int32", "0+"),
    ],
)

RESPONSE = Message(
    "DeleteRecordsResponse", api_key=21, kind="response", versions="0-2", flexible="2+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("topics", "[]DeleteRecordsTopicResult", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]DeleteRecordsPartitionResult", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("low_watermark", "int64", "0+"),
                Field("error_code", "int16", "0+"),
            ]),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
