"""API 8 · v2-10 · flexible 8+ · OffsetCommit

Commit consumer group offsets. committed_leader_epoch (v6+) is the epoch of the
consumed record; group_instance_id (v7+) is static membership; v10 (Kafka 4.2, KIP-848) names topics by id.

Clients: confluent-kafka v9, kafka-python v8, aiokafka v3, kcat v7, kafkajs v5.
Narrowed: v0-1 (no retention time; commit timestamps) are not declared; clients need >= 2.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "OffsetCommitRequest", api_key=8, kind="request", versions="2-10", flexible="8+",
    fields=[
        Field("group_id", "string", "0+"),
        Field("generation_id_or_member_epoch", "int32", "1+", default=-1),
        Field("member_id", "string", "1+"),
        Field("group_instance_id", "string", "7+", nullable="7+", default=None),
        Field("retention_time_ms", "int64", "2-4", default=-1),
        Field("topics", "[]OffsetCommitRequestTopic", "0+", fields=[
            Field("name", "string", "0-9"),
            Field("topic_id", "uuid", "10+"),
            Field("partitions", "[]OffsetCommitRequestPartition", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("committed_offset", "int64", "0+"),
                Field("committed_leader_epoch", "int32", "6+", default=-1),
                Field("committed_metadata", "string", "0+", nullable="0+"),
            ]),
        ]),
    ],
)

RESPONSE = Message(
    "OffsetCommitResponse", api_key=8, kind="response", versions="2-10", flexible="8+",
    fields=[
        Field("throttle_time_ms", "int32", "3+"),
        Field("topics", "[]OffsetCommitResponseTopic", "0+", fields=[
            Field("name", "string", "0-9"),
            Field("topic_id", "uuid", "10+"),
            Field("partitions", "[]OffsetCommitResponsePartition", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
            ]),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
