"""API 12 · v0-4 · flexible 4+ · Heartbeat

Keep group membership alive within the session timeout; REBALANCE_IN_PROGRESS
tells the member to rejoin.

Clients: confluent-kafka/kcat/kafkajs v3, kafka-python v4, aiokafka v1.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "HeartbeatRequest", api_key=12, kind="request", versions="0-4", flexible="4+",
    fields=[
        Field("group_id", "string", "0+"),
        Field("generation_id", "int32", "0+"),
        Field("member_id", "string", "0+"),
        Field("group_instance_id", "string", "3+", nullable="3+", default=None),
    ],
)

RESPONSE = Message(
    "HeartbeatResponse", api_key=12, kind="response", versions="0-4", flexible="4+",
    fields=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "0+"),
    ],
)

API = Api(REQUEST, RESPONSE)
