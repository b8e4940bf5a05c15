"""API 69 · v0-1 · flexible 0+ · ConsumerGroupDescribe

Describe consumer-protocol groups (KIP-848): group epoch, assignment epoch, assignor and, per member, its
subscription, current and target assignment (topic ids with their names). A group that is not a consumer
group is answered GROUP_ID_NOT_FOUND. v1 adds member_type (KIP-1099: -1 unknown, 0 classic member of a
consumer group, 1 consumer member); the request is the same at v0 and v1.

Clients: confluent-kafka 2.16 AdminClient describe_consumer_groups sends v0 (its max, measured with v0-1
advertised), one group per request, and falls back to DescribeGroups v5 for a group answered GROUP_ID_NOT_FOUND.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "ConsumerGroupDescribeRequest", api_key=69, kind="request", versions="0-1", flexible="0+",
    fields=[
        Field("group_ids", "[]string", "0+"),
        Field("include_authorized_operations", "bool", "0+"),
    ],
)

# Kafka's common struct Assignment, used for both the current and the target assignment of a member.
_ASSIGNMENT = [
    Field("topic_partitions", "[]TopicPartitions", "0+", fields=[
        Field("topic_id", "uuid", "0+"),
        Field("topic_name", "string", "0+"),
        Field("partitions", "[]int32", "0+"),
    ]),
]

RESPONSE = Message(
    "ConsumerGroupDescribeResponse", api_key=69, kind="response", versions="0-1", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("groups", "[]DescribedGroup", "0+", fields=[
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+", default=None),
            Field("group_id", "string", "0+"),
            Field("group_state", "string", "0+"),
            Field("group_epoch", "int32", "0+"),
            Field("assignment_epoch", "int32", "0+"),
            Field("assignor_name", "string", "0+"),
            Field("members", "[]Member", "0+", fields=[
                Field("member_id", "string", "0+"),
                Field("instance_id", "string", "0+", nullable="0+", default=None),
                Field("rack_id", "string", "0+", nullable="0+", default=None),
                Field("member_epoch", "int32", "0+"),
                Field("client_id", "string", "0+"),
                Field("client_host", "string", "0+"),
                Field("subscribed_topic_names", "[]string", "0+"),
                Field("subscribed_topic_regex", "string", "0+", nullable="0+", default=None),
                Field("assignment", "Assignment", "0+", fields=_ASSIGNMENT),
                Field("target_assignment", "Assignment", "0+", fields=_ASSIGNMENT),
                Field("member_type", "int8", "1+", default=-1),
            ]),
            Field("authorized_operations", "int32", "0+", default=-2147483648),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
