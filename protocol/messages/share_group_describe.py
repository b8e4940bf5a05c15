"""API 77 · v1 · flexible 1+ · ShareGroupDescribe

Describe share groups (KIP-932): group epoch, assignment epoch, assignor and, per member, its rack, client,
subscription and current assignment (topic ids with their names). There is no target assignment: a share group
does not revoke before it assigns. A group that is not a share group is answered GROUP_ID_NOT_FOUND.

Clients: Kafka 4.1+'s Java Admin describeShareGroups (kafka-share-groups.sh --describe). confluent-kafka 2.16 and
kafka-python 3.0 have no call for it.
Versions: Kafka 4.2 lists v1 only (v0 was Kafka 4.0's early access, removed in 4.1, when Kafka's JSON re-stated
every field from 1+); we declare v1, whose layout is the v0 one. Not in the reference folder (3.9) nor in
kafka-python's 4.x JSON: checked against apache/kafka's v0 JSON in tests/protocol/test_share_messages.py.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "ShareGroupDescribeRequest", api_key=77, kind="request", versions="1", flexible="1+",
    fields=[
        Field("group_ids", "[]string", "1+"),
        Field("include_authorized_operations", "bool", "1+"),
    ],
)

RESPONSE = Message(
    "ShareGroupDescribeResponse", api_key=77, kind="response", versions="1", flexible="1+",
    fields=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("groups", "[]DescribedGroup", "1+", fields=[
            Field("error_code", "int16", "1+"),
            Field("error_message", "string", "1+", nullable="1+", default=None),
            Field("group_id", "string", "1+"),
            Field("group_state", "string", "1+"),
            Field("group_epoch", "int32", "1+"),
            Field("assignment_epoch", "int32", "1+"),
            Field("assignor_name", "string", "1+"),
            Field("members", "[]Member", "1+", fields=[
                Field("member_id", "string", "1+"),
                Field("rack_id", "string", "1+", nullable="1+", default=None),
                Field("member_epoch", "int32", "1+"),
                Field("client_id", "string", "1+"),
                Field("client_host", "string", "1+"),
                Field("subscribed_topic_names", "[]string", "1+"),
                # Kafka's common structs Assignment and TopicPartitions
                Field("assignment", "Assignment", "1+", fields=[
                    Field("topic_partitions", "[]TopicPartitions", "1+", fields=[
                        Field("topic_id", "uuid", "1+"),
                        Field("topic_name", "string", "1+"),
                        Field("partitions", "[]int32", "1+"),
                    ]),
                ]),
            ]),
            Field("authorized_operations", "int32", "1+", default=-2147483648),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
