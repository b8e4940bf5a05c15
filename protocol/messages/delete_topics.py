"""API 20 · v0-6 · flexible 4+ · DeleteTopics

Delete topics by name (v0-5) or by name or topic id (v6).

Clients: confluent-kafka v4, kafka-python v6, aiokafka v3, kafkajs v1.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "DeleteTopicsRequest", api_key=20, kind="request", versions="0-6", flexible="4+",
    fields=[
        Field("topics", "[]DeleteTopicState", "6+", fields=[
            Field("name", "string", "6+", nullable="6+", default=None),
            Field("topic_id", "uuid", "6+"),
        ]),
        Field("topic_names", "[]string", "0-5"),
        Field("timeout_ms", "int32", "0+"),
    ],
)

RESPONSE = Message(
    "DeleteTopicsResponse", api_key=20, kind="response", versions="0-6", flexible="4+",
    fields=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("responses", "[]DeletableTopicResult", "0+", fields=[
            Field("name", "string", "0+", nullable="6+"),
            Field("topic_id", "uuid", "6+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "5+", nullable="5+", default=None),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
