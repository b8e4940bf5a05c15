"""API 68 · v0-1 · flexible 0+ · ConsumerGroupHeartbeat

The consumer group protocol (KIP-848): a member joins (member_epoch 0), heartbeats and leaves (-1; -2 for a
static member that will come back) with this one request; the coordinator answers the member epoch and, when
it changed, the member's assignment (topic ids and partitions). Fields a member did not change since its last
heartbeat are sent null (-1 for rebalance_timeout_ms). v1 adds subscribed_topic_regex (KIP-848's broker-side
regex).

Clients: confluent-kafka 2.16 (librdkafka) v1 with group.protocol=consumer, and only if v1 is advertised; the
other clients do not implement it. Measured: it generates its member id itself (KIP-1082) and joins with
subscribed_topic_regex "" (empty, not null) beside its topic names, then resolves the assigned topic ids with
Metadata v12 by id.
"""

from epoch_broker.protocol.schema import Api, Field, Message

# Kafka's common struct TopicPartitions, one declaration for the request and the response.
_TOPIC_PARTITIONS = [
    Field("topic_id", "uuid", "0+"),
    Field("partitions", "[]int32", "0+"),
]

REQUEST = Message(
    "ConsumerGroupHeartbeatRequest", api_key=68, kind="request", versions="0-1", flexible="0+",
    fields=[
        Field("group_id", "string", "0+"),
        Field("member_id", "string", "0+"),
        Field("member_epoch", "int32", "0+"),
        Field("instance_id", "string", "0+", nullable="0+", default=None),
        Field("rack_id", "string", "0+", nullable="0+", default=None),
        Field("rebalance_timeout_ms", "int32", "0+", default=-1),
        Field("subscribed_topic_names", "[]string", "0+", nullable="0+", default=None),
        Field("subscribed_topic_regex", "string", "1+", nullable="1+", default=None),
        Field("server_assignor", "string", "0+", nullable="0+", default=None),
        Field("topic_partitions", "[]TopicPartitions", "0+", nullable="0+", default=None,
              fields=_TOPIC_PARTITIONS),
    ],
)

RESPONSE = Message(
    "ConsumerGroupHeartbeatResponse", api_key=68, kind="response", versions="0-1", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+", default=None),
        Field("member_id", "string", "0+", nullable="0+", default=None),
        Field("member_epoch", "int32", "0+"),
        Field("heartbeat_interval_ms", "int32", "0+"),
        Field("assignment", "Assignment", "0+", nullable="0+", default=None, fields=[
            Field("topic_partitions", "[]TopicPartitions", "0+", fields=_TOPIC_PARTITIONS),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
