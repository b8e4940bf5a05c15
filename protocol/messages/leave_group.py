"""API 13 · v0-5 · flexible 4+ · LeaveGroup

Leave a group. v0-2 name one member; v3+ batch members (static membership).
aiokafka sends it only if generation > 0, so generations start at 1.

Clients: confluent-kafka/aiokafka/kcat v1, kafka-python v5, kafkajs v3.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "LeaveGroupRequest", api_key=13, kind="request", versions="0-5", flexible="4+",
    fields=[
        Field("group_id", "string", "0+"),
        Field("member_id", "string", "0-2"),
        Field("members", "[]MemberIdentity", "3+", fields=[
            Field("member_id", "string", "3+"),
            Field("group_instance_id", "string", "3+", nullable="3+", default=None),
            Field("reason", "string", "5+", nullable="5+", default=None),
        ]),
    ],
)

RESPONSE = Message(
    "LeaveGroupResponse", api_key=13, kind="response", versions="0-5", flexible="4+",
    fields=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "0+"),
        Field("members", "[]MemberResponse", "3+", fields=[
            Field("member_id", "string", "3+"),
            Field("group_instance_id", "string", "3+", nullable="3+"),
            Field("error_code", "int16", "3+"),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
