"""API 0 · v3-13 · flexible 9+ · Produce

Append record batches (magic 2 only) to partition logs. acks travels in the request
(0, 1 or -1); the response carries the base offset per partition and, from v10, leader hints.

Version notes: v11 (TRANSACTION_ABORTABLE) and v12 (KIP-890 part 2) are v10's schema; v13 names
topics by id (KIP-516), in the request and the response.
Clients: confluent-kafka 2.16 sends v10, kafka-python 3.0 v9, aiokafka/kcat/kafkajs v7.
Narrowed: v0-2 (old message sets, which librdkafka and kafkajs switch to) are not declared.

Project extension (KIP-359 style): PartitionProduceData carries a tagged
current_leader_epoch (tag 10000, v9+, default -1). A producer that knows the leader epoch
can let the leader fence it like a fetch; stock clients never write the tag, and a real
Kafka broker skips it as an unknown tag. 10000 is far above any tag Kafka assigns, so it
cannot collide with a future upstream field.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "ProduceRequest", api_key=0, kind="request", versions="3-13", flexible="9+",
    fields=[
        Field("transactional_id", "string", "3+", nullable="3+", default=None),
        Field("acks", "int16", "0+"),
        Field("timeout_ms", "int32", "0+"),
        Field("topic_data", "[]TopicProduceData", "0+", fields=[
            Field("name", "string", "0-12"),
            Field("topic_id", "uuid", "13+"),
            Field("partition_data", "[]PartitionProduceData", "0+", fields=[
                Field("index", "int32", "0+"),
                Field("records", "records", "0+", nullable="0+"),
                Field("current_leader_epoch", "int32", "9+", tag=10000, tagged="9+", default=-1),
            ]),
        ]),
    ],
)

RESPONSE = Message(
    "ProduceResponse", api_key=0, kind="response", versions="3-13", flexible="9+",
    fields=[
        Field("responses", "[]TopicProduceResponse", "0+", fields=[
            Field("name", "string", "0-12"),
            Field("topic_id", "uuid", "13+"),
            Field("partition_responses", "[]PartitionProduceResponse", "0+", fields=[
                Field("index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("base_offset", "int64", "0+"),
                Field("log_append_time_ms", "int64", "2+", default=-1),
                Field("log_start_offset", "int64", "5+", default=-1),
                Field("record_errors", "[]BatchIndexAndErrorMessage", "8+", fields=[
                    Field("batch_index", "int32", "8+"),
                    Field("batch_index_error_message", "string", "8+", nullable="8+", default=None),
                ]),
                Field("error_message", "string", "8+", nullable="8+", default=None),
                Field("current_leader", "LeaderIdAndEpoch", "10+", tag=0, tagged="10+", fields=[
                    Field("leader_id", "int32", "10+", default=-1),
                    Field("leader_epoch", "int32", "10+", default=-1),
                ]),
            ]),
        ]),
        Field("throttle_time_ms", "int32", "1+", default=0),
        Field("node_endpoints", "[]NodeEndpoint", "10+", tag=0, tagged="10+", fields=[
            Field("node_id", "int32", "10+"),
            Field("host", "string", "10+"),
            Field("port", "int32", "10+"),
            Field("rack", "string", "10+", nullable="10+", default=None),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
