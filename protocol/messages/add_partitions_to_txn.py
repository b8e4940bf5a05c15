"""API 24 · v0-5 · flexible 3+ · AddPartitionsToTxn

Adds partitions to a producer's ongoing transaction at its transaction coordinator, before the producer
writes transactional records to them.

Versions: v1 is v0, v2 adds the PRODUCER_FENCED error, v3 is the first flexible version. v4 (KIP-890) batches
several transactions per request, adds VerifyOnly and a top-level response error code: v0-3 are sent by
clients, v4+ only by brokers (a partition leader verifying with the coordinator). v5 only adds the
TRANSACTION_ABORTABLE error code (no wire change).

Clients: every transactional producer (Java, librdkafka/confluent-kafka, kafka-python, kafkajs) sends v0-3.
The reference folder has no JSON for this API: the fields follow apache/kafka's AddPartitionsToTxnRequest.json
/ AddPartitionsToTxnResponse.json at 3.9, so the spec conformance test lists it as an API without a reference
file (tests/protocol/test_txn_messages.py checks it against those JSON files).
"""

from epoch_broker.protocol.schema import Api, Field, Message

# common structs: one field list per struct, shared by every field of that type
ADD_PARTITIONS_TO_TXN_TOPIC = [
    Field("name", "string", "0+"),
    Field("partitions", "[]int32", "0+"),
]

ADD_PARTITIONS_TO_TXN_PARTITION_RESULT = [
    Field("partition_index", "int32", "0+"),
    Field("partition_error_code", "int16", "0+"),
]

ADD_PARTITIONS_TO_TXN_TOPIC_RESULT = [
    Field("name", "string", "0+"),
    Field("results_by_partition", "[]AddPartitionsToTxnPartitionResult", "0+",
          fields=ADD_PARTITIONS_TO_TXN_PARTITION_RESULT),
]

REQUEST = Message(
    "AddPartitionsToTxnRequest", api_key=24, kind="request", versions="0-5", flexible="3+",
    fields=[
        Field("transactions", "[]AddPartitionsToTxnTransaction", "4+", fields=[
            Field("transactional_id", "string", "4+"),
            Field("producer_id", "int64", "4+"),
            Field("producer_epoch", "int16", "4+"),
            Field("verify_only", "bool", "4+", default=False),
            Field("topics", "[]AddPartitionsToTxnTopic", "4+", fields=ADD_PARTITIONS_TO_TXN_TOPIC),
        ]),
        Field("v3_and_below_transactional_id", "string", "0-3"),
        Field("v3_and_below_producer_id", "int64", "0-3"),
        Field("v3_and_below_producer_epoch", "int16", "0-3"),
        Field("v3_and_below_topics", "[]AddPartitionsToTxnTopic", "0-3", fields=ADD_PARTITIONS_TO_TXN_TOPIC),
    ],
)

RESPONSE = Message(
    "AddPartitionsToTxnResponse", api_key=24, kind="response", versions="0-5", flexible="3+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "4+"),
        Field("results_by_transaction", "[]AddPartitionsToTxnResult", "4+", fields=[
            Field("transactional_id", "string", "4+"),
            Field("topic_results", "[]AddPartitionsToTxnTopicResult", "4+", fields=ADD_PARTITIONS_TO_TXN_TOPIC_RESULT),
        ]),
        Field("results_by_topic_v3_and_below", "[]AddPartitionsToTxnTopicResult", "0-3",
              fields=ADD_PARTITIONS_TO_TXN_TOPIC_RESULT),
    ],
)

API = Api(REQUEST, RESPONSE)
