"""API 25 · v0-4 · flexible 3+ · AddOffsetsToTxn

Tells the transaction coordinator that a transaction will commit consumer offsets for a group (the
consume-transform-produce loop): the coordinator adds that group's __consumer_offsets partition to the
transaction, and the producer then sends TxnOffsetCommit to the group coordinator.

Versions: v1 is v0, v2 adds the PRODUCER_FENCED error, v3 is the first flexible version. v4 (Kafka 3.8,
KIP-890) only lets the answer carry TRANSACTION_ABORTABLE (no wire change).

Clients: transactional producers: Java sendOffsetsToTransaction, confluent-kafka/librdkafka
send_offsets_to_transaction, kafka-python KafkaProducer.send_offsets_to_transaction, kafkajs
transaction.sendOffsets.
The reference folder has no JSON for this API: the fields follow apache/kafka's AddOffsetsToTxnRequest.json /
AddOffsetsToTxnResponse.json at 3.9, so the spec conformance test lists it as an API without a reference file.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "AddOffsetsToTxnRequest", api_key=25, kind="request", versions="0-4", flexible="3+",
    fields=[
        Field("transactional_id", "string", "0+"),
        Field("producer_id", "int64", "0+"),
        Field("producer_epoch", "int16", "0+"),
        Field("group_id", "string", "0+"),
    ],
)

RESPONSE = Message(
    "AddOffsetsToTxnResponse", api_key=25, kind="response", versions="0-4", flexible="3+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
    ],
)

API = Api(REQUEST, RESPONSE)
