"""API 28 · v0-4 · flexible 3+ · TxnOffsetCommit

Commits consumer offsets to the group coordinator as part of a transaction: they become visible only if the
transaction commits (after AddOffsetsToTxn added the group to the transaction).

Versions: v1 is v0, v2 adds the committed leader epoch, v3 is the first flexible version and adds the
member id, group instance id and generation id so the coordinator can fence zombie consumers (KIP-447).
v4 (Kafka 3.8, KIP-890) only lets the answer carry TRANSACTION_ABORTABLE (no wire change).

Clients: transactional producers: Java sendOffsetsToTransaction, confluent-kafka/librdkafka
send_offsets_to_transaction, kafka-python KafkaProducer.send_offsets_to_transaction, kafkajs
transaction.sendOffsets.
The reference folder has no JSON for this API: the fields follow apache/kafka's TxnOffsetCommitRequest.json /
TxnOffsetCommitResponse.json at 3.9, so the spec conformance test lists it as an API without a reference file.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "TxnOffsetCommitRequest", api_key=28, kind="request", versions="0-4", flexible="3+",
    fields=[
        Field("transactional_id", "string", "0+"),
        Field("group_id", "string", "0+"),
        Field("producer_id", "int64", "0+"),
        Field("producer_epoch", "int16", "0+"),
        Field("generation_id", "int32", "3+", default=-1),
        Field("member_id", "string", "3+", default=""),
        Field("group_instance_id", "string", "3+", nullable="3+", default=None),
        Field("topics", "[]TxnOffsetCommitRequestTopic", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]TxnOffsetCommitRequestPartition", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("committed_offset", "int64", "0+"),
                Field("committed_leader_epoch", "int32", "2+", default=-1),
                Field("committed_metadata", "string", "0+", nullable="0+"),
            ]),
        ]),
    ],
)

RESPONSE = Message(
    "TxnOffsetCommitResponse", api_key=28, kind="response", versions="0-4", flexible="3+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("topics", "[]TxnOffsetCommitResponseTopic", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]TxnOffsetCommitResponsePartition", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
            ]),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
