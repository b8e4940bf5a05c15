"""API 11 · v0-9 · flexible 6+ · JoinGroup

Join a consumer group; the leader gets the members' subscriptions.
MEMBER_ID_REQUIRED may only go to v4+: kafkajs breaks if v0-v3 get it.

Clients: JoinGroup v5 from confluent-kafka, aiokafka, kcat and kafkajs; kafka-python v7.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "JoinGroupRequest", api_key=11, kind="request", versions="0-9", flexible="6+",
    fields=[
        Field("group_id", "string", "0+"),
        Field("session_timeout_ms", "int32", "0+"),
        Field("rebalance_timeout_ms", "int32", "1+", default=-1),
        Field("member_id", "string", "0+"),
        Field("group_instance_id", "string", "5+", nullable="5+", default=None),
        Field("protocol_type", "string", "0+"),
        Field("protocols", "[]JoinGroupRequestProtocol", "0+", fields=[
            Field("name", "string", "0+"),
            Field("metadata", "bytes", "0+"),
        ]),
        Field("reason", "string", "8+", nullable="8+", default=None),
    ],
)

RESPONSE = Message(
    "JoinGroupResponse", api_key=11, kind="response", versions="0-9", flexible="6+",
    fields=[
        Field("throttle_time_ms", "int32", "2+"),
        Field("error_code", "int16", "0+"),
        Field("generation_id", "int32", "0+", default=-1),
        Field("protocol_type", "string", "7+", nullable="7+", default=None),
        Field("protocol_name", "string", "0+", nullable="7+"),
        Field("leader", "string", "0+"),
        Field("skip_assignment", "bool", "9+", default=False),
        Field("member_id", "string", "0+"),
        Field("members", "[]JoinGroupResponseMember", "0+", fields=[
            Field("member_id", "string", "0+"),
            Field("group_instance_id", "string", "5+", nullable="5+", default=None),
            Field("metadata", "bytes", "0+"),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
