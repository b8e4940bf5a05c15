"""API 14 · v0-5 · flexible 4+ · SyncGroup

The leader sends the assignments; every member gets its own.

Clients: v3 from confluent-kafka, aiokafka, kcat and kafkajs; kafka-python v5.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "SyncGroupRequest", api_key=14, kind="request", versions="0-5", flexible="4+",
    fields=[
        Field("group_id", "string", "0+"),
        Field("generation_id", "int32", "0+"),
        Field("member_id", "string", "0+"),
        Field("group_instance_id", "string", "3+", nullable="3+", default=None),
        Field("protocol_type", "string", "5+", nullable="5+", default=None),
        Field("protocol_name", "string", "5+", nullable="5+", default=None),
        Field("assignments", "[]SyncGroupRequestAssignment", "0+", fields=[
            Field("member_id", "string", "0+"),
            Field("assignment", "bytes", "0+"),
        ]),
    ],
)

RESPONSE = Message(
    "SyncGroupResponse", api_key=14, kind="response", versions="0-5", flexible="4+",
    fields=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "0+"),
        Field("protocol_type", "string", "5+", nullable="5+", default=None),
        Field("protocol_name", "string", "5+", nullable="5+", default=None),
        Field("assignment", "bytes", "0+"),
    ],
)

API = Api(REQUEST, RESPONSE)
