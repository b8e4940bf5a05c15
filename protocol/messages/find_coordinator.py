"""API 10 · v0-6 · flexible 3+ · FindCoordinator

Find the group (key type 0) or transaction (key type 1) coordinator.
v0-3 ask for one key; v4+ batch several keys into coordinators[].

Clients: confluent-kafka/kcat/kafkajs v2, kafka-python v6, aiokafka v1.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "FindCoordinatorRequest", api_key=10, kind="request", versions="0-6", flexible="3+",
    fields=[
        Field("key", "string", "0-3"),
        Field("key_type", "int8", "1+", default=0),
        Field("coordinator_keys", "[]string", "4+"),
    ],
)

RESPONSE = Message(
    "FindCoordinatorResponse", api_key=10, kind="response", versions="0-6", flexible="3+",
    fields=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "0-3"),
        Field("error_message", "string", "1-3", nullable="1-3"),
        Field("node_id", "int32", "0-3"),
        Field("host", "string", "0-3"),
        Field("port", "int32", "0-3"),
        Field("coordinators", "[]Coordinator", "4+", fields=[
            Field("key", "string", "4+"),
            Field("node_id", "int32", "4+"),
            Field("host", "string", "4+"),
            Field("port", "int32", "4+"),
            Field("error_code", "int16", "4+"),
            Field("error_message", "string", "4+", nullable="4+"),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
