"""API 26 · v0-4 · flexible 3+ · EndTxn

Commits or aborts a producer's ongoing transaction at its transaction coordinator, which then writes the
COMMIT or ABORT markers (WriteTxnMarkers) to every partition of the transaction.

Versions: v1 is v0, v2 adds the PRODUCER_FENCED error, v3 is the first flexible version. v4 (Kafka 3.8,
KIP-890) only lets the answer carry TRANSACTION_ABORTABLE (no wire change).

Clients: transactional producers: Java commitTransaction/abortTransaction, confluent-kafka/librdkafka
commit_transaction/abort_transaction, kafka-python KafkaProducer.commit_transaction/abort_transaction,
kafkajs transaction.commit/abort.
The reference folder has no JSON for this API: the fields follow apache/kafka's EndTxnRequest.json /
EndTxnResponse.json at 3.9, so the spec conformance test lists it as an API without a reference file.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "EndTxnRequest", api_key=26, kind="request", versions="0-4", flexible="3+",
    fields=[
        Field("transactional_id", "string", "0+"),
        Field("producer_id", "int64", "0+"),
        Field("producer_epoch", "int16", "0+"),
        Field("committed", "bool", "0+"),
    ],
)

RESPONSE = Message(
    "EndTxnResponse", api_key=26, kind="response", versions="0-4", flexible="3+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
    ],
)

API = Api(REQUEST, RESPONSE)
