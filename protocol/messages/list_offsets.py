"""API 2 · v1-11 · flexible 6+ · ListOffsets

Look up offsets by timestamp: -2 earliest, -1 latest, -3 max timestamp (v7+),
-4 local log start (v8+), -5 last tiered (v9+), -6 earliest pending upload (v11+, KIP-1023).
current_leader_epoch (v4+) fences stale callers; the answer carries the leader epoch (v4+).
OFFSET_NOT_AVAILABLE may only go to v5+ (KIP-207); older versions get LEADER_NOT_AVAILABLE.
v10 adds timeout_ms, the bound on a tiered-storage lookup (KIP-1075).

Clients: confluent-kafka sends v7, kafka-python v11, aiokafka/kafkajs v3, kcat v2.
Narrowed: v0 (MaxNumOffsets and the old offsets array) is not declared.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "ListOffsetsRequest", api_key=2, kind="request", versions="1-11", flexible="6+",
    fields=[
        Field("replica_id", "int32", "0+"),
        Field("isolation_level", "int8", "2+"),
        Field("topics", "[]ListOffsetsTopic", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]ListOffsetsPartition", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("current_leader_epoch", "int32", "4+", default=-1),
                Field("timestamp", "int64", "0+"),
            ]),
        ]),
        Field("timeout_ms", "int32", "10+"),
    ],
)

RESPONSE = Message(
    "ListOffsetsResponse", api_key=2, kind="response", versions="1-11", flexible="6+",
    fields=[
        Field("throttle_time_ms", "int32", "2+"),
        Field("topics", "[]ListOffsetsTopicResponse", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]ListOffsetsPartitionResponse", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("timestamp", "int64", "1+", default=-1),
                Field("offset", "int64", "1+", default=-1),
                Field("leader_epoch", "int32", "4+", default=-1),
            ]),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
