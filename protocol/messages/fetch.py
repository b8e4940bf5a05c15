"""API 1 · v4-18 · flexible 12+ · Fetch

Read record batches from partition logs, for consumers and for follower replicas.
KIP-320 fields: current_leader_epoch (v9+) is checked by the leader; last_fetched_epoch (v12+)
lets the leader answer a tagged diverging_epoch (v12+) instead of the records. v17 adds the
follower's tagged replica_directory_id (KIP-853), v18 its tagged high_watermark (KIP-1166).

Clients: confluent-kafka 2.16 sends v16 (topic ids, v13+), kafka-python v12 (with
last_fetched_epoch), aiokafka/kcat/kafkajs v11 (current epoch -1); kafkajs needs >= 4.
Narrowed: v0-3 (old message formats) are not declared.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "FetchRequest", api_key=1, kind="request", versions="4-18", flexible="12+",
    fields=[
        Field("cluster_id", "string", "12+", nullable="12+", tag=0, tagged="12+", default=None),
        Field("replica_id", "int32", "0-14", default=-1),
        Field("replica_state", "ReplicaState", "15+", tag=1, tagged="15+", fields=[
            Field("replica_id", "int32", "15+", default=-1),
            Field("replica_epoch", "int64", "15+", default=-1),
        ]),
        Field("max_wait_ms", "int32", "0+"),
        Field("min_bytes", "int32", "0+"),
        Field("max_bytes", "int32", "3+", default=2147483647),
        Field("isolation_level", "int8", "4+", default=0),
        Field("session_id", "int32", "7+", default=0),
        Field("session_epoch", "int32", "7+", default=-1),
        Field("topics", "[]FetchTopic", "0+", fields=[
            Field("topic", "string", "0-12"),
            Field("topic_id", "uuid", "13+"),
            Field("partitions", "[]FetchPartition", "0+", fields=[
                Field("partition", "int32", "0+"),
                Field("current_leader_epoch", "int32", "9+", default=-1),
                Field("fetch_offset", "int64", "0+"),
                Field("last_fetched_epoch", "int32", "12+", default=-1),
                Field("log_start_offset", "int64", "5+", default=-1),
                Field("partition_max_bytes", "int32", "0+"),
                Field("replica_directory_id", "uuid", "17+", tag=0, tagged="17+"),
                Field("high_watermark", "int64", "18+", tag=1, tagged="18+", default=9223372036854775807),
            ]),
        ]),
        Field("forgotten_topics_data", "[]ForgottenTopic", "7+", fields=[
            Field("topic", "string", "7-12"),
            Field("topic_id", "uuid", "13+"),
            Field("partitions", "[]int32", "7+"),
        ]),
        Field("rack_id", "string", "11+", default=""),
    ],
)

RESPONSE = Message(
    "FetchResponse", api_key=1, kind="response", versions="4-18", flexible="12+",
    fields=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "7+"),
        Field("session_id", "int32", "7+", default=0),
        Field("responses", "[]FetchableTopicResponse", "0+", fields=[
            Field("topic", "string", "0-12"),
            Field("topic_id", "uuid", "13+"),
            Field("partitions", "[]PartitionData", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("high_watermark", "int64", "0+"),
                Field("last_stable_offset", "int64", "4+", default=-1),
                Field("log_start_offset", "int64", "5+", default=-1),
                Field("diverging_epoch", "EpochEndOffset", "12+", tag=0, tagged="12+", fields=[
                    Field("epoch", "int32", "12+", default=-1),
                    Field("end_offset", "int64", "12+", default=-1),
                ]),
                Field("current_leader", "LeaderIdAndEpoch", "12+", tag=1, tagged="12+", fields=[
                    Field("leader_id", "int32", "12+", default=-1),
                    Field("leader_epoch", "int32", "12+", default=-1),
                ]),
                Field("snapshot_id", "SnapshotId", "12+", tag=2, tagged="12+", fields=[
                    Field("end_offset", "int64", "0+", default=-1),
                    Field("epoch", "int32", "0+", default=-1),
                ]),
                Field("aborted_transactions", "[]AbortedTransaction", "4+", nullable="4+", fields=[
                    Field("producer_id", "int64", "4+"),
                    Field("first_offset", "int64", "4+"),
                ]),
                Field("preferred_read_replica", "int32", "11+", default=-1),
                Field("records", "records", "0+", nullable="0+"),
            ]),
        ]),
        Field("node_endpoints", "[]NodeEndpoint", "16+", tag=0, tagged="16+", fields=[
            Field("node_id", "int32", "16+"),
            Field("host", "string", "16+"),
            Field("port", "int32", "16+"),
            Field("rack", "string", "16+", nullable="16+", default=None),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
