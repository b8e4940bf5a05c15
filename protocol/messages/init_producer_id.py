"""API 22 · v0-5 · flexible 2+ · InitProducerId

Allocate a producer id and epoch for an idempotent or transactional producer;
v3+ may bump the epoch of an existing producer id (KIP-360).

Clients: aiokafka knows only v0, kafkajs only v1; confluent-kafka/kcat/kafka-python send v4.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "InitProducerIdRequest", api_key=22, kind="request", versions="0-5", flexible="2+",
    fields=[
        Field("transactional_id", "string", "0+", nullable="0+"),
        Field("transaction_timeout_ms", "int32", "0+"),
        Field("producer_id", "int64", "3+", default=-1),
        Field("producer_epoch", "int16", "3+", default=-1),
    ],
)

RESPONSE = Message(
    "InitProducerIdResponse", api_key=22, kind="response", versions="0-5", flexible="2+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("producer_id", "int64", "0+", default=-1),
        Field("producer_epoch", "int16", "0+"),
    ],
)

API = Api(REQUEST, RESPONSE)
