"""API 56 · v0-3 · flexible 0+ · AlterPartition

A leader asks the controller to change a partition's ISR (KIP-497; formerly
AlterIsr). v1 adds leader_recovery_state, v2 topic ids, v3 broker epochs in the ISR (KIP-903).

Clients: never sent by clients.
The reference folder has no JSON for this API: the fields follow apache/kafka's 3.x
AlterPartitionRequest.json / AlterPartitionResponse.json (v0-3, flexible from v0), so the
spec conformance test lists it as an API without a reference file.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "AlterPartitionRequest", api_key=56, kind="request", versions="0-3", flexible="0+",
    fields=[
        Field("broker_id", "int32", "0+"),
        Field("broker_epoch", "int64", "0+", default=-1),
        Field("topics", "[]TopicData", "0+", fields=[
            Field("topic_name", "string", "0-1"),
            Field("topic_id", "uuid", "2+"),
            Field("partitions", "[]PartitionData", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("leader_epoch", "int32", "0+"),
                Field("new_isr", "[]int32", "0-2"),
                Field("new_isr_with_epochs", "[]BrokerState", "3+", fields=[
                    Field("broker_id", "int32", "3+"),
                    Field("broker_epoch", "int64", "3+", default=-1),
                ]),
                Field("leader_recovery_state", "int8", "1+", default=0),
                Field("partition_epoch", "int32", "0+"),
            ]),
        ]),
    ],
)

RESPONSE = Message(
    "AlterPartitionResponse", api_key=56, kind="response", versions="0-3", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("topics", "[]TopicData", "0+", fields=[
            Field("topic_name", "string", "0-1"),
            Field("topic_id", "uuid", "2+"),
            Field("partitions", "[]PartitionData", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("leader_id", "int32", "0+"),
                Field("leader_epoch", "int32", "0+"),
                Field("isr", "[]int32", "0+"),
                Field("leader_recovery_state", "int8", "1+", default=0),
                Field("partition_epoch", "int32", "0+"),
            ]),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
