"""API 23 · v0-4 · flexible 4+ · OffsetForLeaderEpoch

Ask the leader for the end offset of a leader epoch (KIP-101, KIP-279),
used by followers to truncate and by consumers to validate their position (KIP-320).
current_leader_epoch (v2+) fences stale callers; replica_id (v3+) is -2 for consumers.

Clients: confluent-kafka sends exactly v2, kafka-python v3-4 (both only if advertised);
aiokafka, kcat and kafkajs never send it.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "OffsetForLeaderEpochRequest", api_key=23, kind="request", versions="0-4", flexible="4+",
    fields=[
        Field("replica_id", "int32", "3+", default=-2),
        Field("topics", "[]OffsetForLeaderTopic", "0+", fields=[
            Field("topic", "string", "0+"),
            Field("partitions", "[]OffsetForLeaderPartition", "0+", fields=[
                Field("partition", "int32", "0+"),
                Field("current_leader_epoch", "int32", "2+", default=-1),
                Field("leader_epoch", "int32", "0+"),
            ]),
        ]),
    ],
)

RESPONSE = Message(
    "OffsetForLeaderEpochResponse", api_key=23, kind="response", versions="0-4", flexible="4+",
    fields=[
        Field("throttle_time_ms", "int32", "2+"),
        Field("topics", "[]OffsetForLeaderTopicResult", "0+", fields=[
            Field("topic", "string", "0+"),
            Field("partitions", "[]EpochEndOffset", "0+", fields=[
                Field("error_code", "int16", "0+"),
                Field("partition", "int32", "0+"),
                Field("leader_epoch", "int32", "1+", default=-1),
                Field("end_offset", "int64", "0+", default=-1),
            ]),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
