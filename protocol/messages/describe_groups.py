"""API 15 · v0-6 · flexible 5+ · DescribeGroups

State, protocol and members of groups (admin tools).

Clients: confluent-kafka AdminClient describe_consumer_groups v5 (after ConsumerGroupDescribe answered
GROUP_ID_NOT_FOUND; measured with v0-6 advertised: librdkafka 2.16's own max is 5).
v6 (Kafka 4.0, KIP-1043): GROUP_ID_NOT_FOUND with an error message for an unknown group or one of another type
(older versions describe it as Dead with no error).
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "DescribeGroupsRequest", api_key=15, kind="request", versions="0-6", flexible="5+",
    fields=[
        Field("groups", "[]string", "0+"),
        Field("include_authorized_operations", "bool", "3+"),
    ],
)

RESPONSE = Message(
    "DescribeGroupsResponse", api_key=15, kind="response", versions="0-6", flexible="5+",
    fields=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("groups", "[]DescribedGroup", "0+", fields=[
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "6+", nullable="6+", default=None),
            Field("group_id", "string", "0+"),
            Field("group_state", "string", "0+"),
            Field("protocol_type", "string", "0+"),
            Field("protocol_data", "string", "0+"),
            Field("members", "[]DescribedGroupMember", "0+", fields=[
                Field("member_id", "string", "0+"),
                Field("group_instance_id", "string", "4+", nullable="4+", default=None),
                Field("client_id", "string", "0+"),
                Field("client_host", "string", "0+"),
                Field("member_metadata", "bytes", "0+"),
                Field("member_assignment", "bytes", "0+"),
            ]),
            Field("authorized_operations", "int32", "3+", default=-2147483648),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
