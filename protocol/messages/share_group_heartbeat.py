"""API 76 · v1 · flexible 0+ · ShareGroupHeartbeat

Share groups (KIP-932): a member joins (member_epoch 0), heartbeats and leaves (-1) with this one request; the
coordinator answers the member epoch and, when it changed, the member's assignment (topic ids and partitions,
which several members may share). Fields a member did not change since its last heartbeat are sent null. Unlike
ConsumerGroupHeartbeat there is no instance id, rebalance timeout, regex or server assignor.

Clients: confluent-kafka 2.16 (librdkafka 2.16) ShareConsumer sends v1 and only v1 (it asks for 1-1), with a
member id it generated itself (KIP-1082).
Versions: Kafka 4.2 lists v1 only (v0 was Kafka 4.0's early access, removed in 4.1); we declare v1, whose layout
is the v0 one of Kafka's JSON. librdkafka's writer and its mock broker's reader and writer agree with it.
Not in the reference folder (3.9) nor in kafka-python's 4.x JSON: checked against apache/kafka's v0 JSON in
tests/protocol/test_share_messages.py.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "ShareGroupHeartbeatRequest", api_key=76, kind="request", versions="1", flexible="0+",
    fields=[
        Field("group_id", "string", "0+"),
        Field("member_id", "string", "0+"),
        Field("member_epoch", "int32", "0+"),
        Field("rack_id", "string", "0+", nullable="0+", default=None),
        Field("subscribed_topic_names", "[]string", "0+", nullable="0+", default=None),
    ],
)

RESPONSE = Message(
    "ShareGroupHeartbeatResponse", api_key=76, kind="response", versions="1", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+", default=None),
        Field("member_id", "string", "0+", nullable="0+", default=None),
        Field("member_epoch", "int32", "0+"),
        Field("heartbeat_interval_ms", "int32", "0+"),
        # null: unchanged since the last heartbeat; an empty assignment is "no partitions"
        Field("assignment", "Assignment", "0+", nullable="0+", default=None, fields=[
            Field("topic_partitions", "[]TopicPartitions", "0+", fields=[
                Field("topic_id", "uuid", "0+"),
                Field("partitions", "[]int32", "0+"),
            ]),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
