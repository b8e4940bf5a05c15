"""API 61 · v0 · flexible 0+ · DescribeProducers

Lists the active producers of partitions (KIP-664): per producer id its epoch, last sequence and timestamp,
coordinator epoch and the start offset of its open transaction, if any, to find hanging transactions.

Clients: the admin clients: Java Admin.describeProducers / kafka-transactions.sh describe-producers,
kafka-python KafkaAdminClient.describe_producers.
The reference folder has no JSON for this API: the fields follow apache/kafka's DescribeProducersRequest.json /
DescribeProducersResponse.json at 3.9, so the spec conformance test lists it as an API without a reference file.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "DescribeProducersRequest", api_key=61, kind="request", versions="0", flexible="0+",
    fields=[
        Field("topics", "[]TopicRequest", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partition_indexes", "[]int32", "0+"),
        ]),
    ],
)

RESPONSE = Message(
    "DescribeProducersResponse", api_key=61, kind="response", versions="0", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("topics", "[]TopicResponse", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]PartitionResponse", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("error_message", "string", "0+", nullable="0+", default=None),
                Field("active_producers", "[]ProducerState", "0+", fields=[
                    Field("producer_id", "int64", "0+"),
                    Field("producer_epoch", "int32", "0+"),
                    Field("last_sequence", "int32", "0+", default=-1),
                    Field("last_timestamp", "int64", "0+", default=-1),
                    Field("coordinator_epoch", "int32", "0+"),
                    Field("current_txn_start_offset", "int64", "0+", default=-1),
                ]),
            ]),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
