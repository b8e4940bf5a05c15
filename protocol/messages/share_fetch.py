"""API 78 · v1 · flexible 0+ · ShareFetch

Share groups (KIP-932): a member fetches records from share-partitions in a share session (share_session_epoch 0
opens it, -1 closes it, otherwise it counts up), acknowledging earlier deliveries in the same request. Each
acknowledgement batch covers first_offset..last_offset with one acknowledge type for the whole range or one per
offset (0 gap, 1 accept, 2 release, 3 reject). The leader answers, per partition, the records and the offset
ranges it acquired for this member (acquired_records, with their delivery counts), a fetch error and an
acknowledge error apart, the current leader, and for how long the records are locked
(acquisition_lock_timeout_ms). Topics are named by id only.

Clients: confluent-kafka 2.16 (librdkafka 2.16) ShareConsumer sends v1 and only v1 (it asks for 1-1), one
acknowledge type per batch; on an epoch > 0 it lists only the partitions it adds or acknowledges.
Versions: Kafka 4.2 lists v1-2. v0 (Kafka 4.0's early access, removed in 4.1) had partition_max_bytes per
partition and no max_records, batch_size or acquisition_lock_timeout_ms; v1 (the first production version) made
those changes; v2 (KIP-1206, KIP-1222) adds share_acquire_mode and is_renew_ack after batch_size and the
acknowledge type 4 (renew). We declare v1, what the installed client sends; its layout is the one librdkafka's
writer and parser and its mock broker's reader and writer all use. current_leader has no default in Kafka's
JSON (0, 0): a handler sets -1, -1 when it has no leader to name, as the mock does.
Not in the reference folder (3.9) nor in kafka-python's 4.x JSON: checked against apache/kafka's v0 JSON in
tests/protocol/test_share_messages.py.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "ShareFetchRequest", api_key=78, kind="request", versions="1", flexible="0+",
    fields=[
        Field("group_id", "string", "0+", nullable="0+", default=None),
        Field("member_id", "string", "0+", nullable="0+"),
        Field("share_session_epoch", "int32", "0+"),
        Field("max_wait_ms", "int32", "0+"),
        Field("min_bytes", "int32", "0+"),
        Field("max_bytes", "int32", "0+", default=2147483647),
        Field("max_records", "int32", "1+"),
        Field("batch_size", "int32", "1+"),
        Field("topics", "[]FetchTopic", "0+", fields=[
            Field("topic_id", "uuid", "0+"),
            Field("partitions", "[]FetchPartition", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("acknowledgement_batches", "[]AcknowledgementBatch", "0+", fields=[
                    Field("first_offset", "int64", "0+"),
                    Field("last_offset", "int64", "0+"),
                    Field("acknowledge_types", "[]int8", "0+"),
                ]),
            ]),
        ]),
        Field("forgotten_topics_data", "[]ForgottenTopic", "0+", fields=[
            Field("topic_id", "uuid", "0+"),
            Field("partitions", "[]int32", "0+"),
        ]),
    ],
)

RESPONSE = Message(
    "ShareFetchResponse", api_key=78, kind="response", versions="1", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+", default=None),
        Field("acquisition_lock_timeout_ms", "int32", "0+"),
        Field("responses", "[]ShareFetchableTopicResponse", "0+", fields=[
            Field("topic_id", "uuid", "0+"),
            Field("partitions", "[]PartitionData", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("error_message", "string", "0+", nullable="0+", default=None),
                Field("acknowledge_error_code", "int16", "0+"),
                Field("acknowledge_error_message", "string", "0+", nullable="0+", default=None),
                Field("current_leader", "LeaderIdAndEpoch", "0+", fields=[
                    Field("leader_id", "int32", "0+"),
                    Field("leader_epoch", "int32", "0+"),
                ]),
                Field("records", "records", "0+", nullable="0+"),
                Field("acquired_records", "[]AcquiredRecords", "0+", fields=[
                    Field("first_offset", "int64", "0+"),
                    Field("last_offset", "int64", "0+"),
                    Field("delivery_count", "int16", "0+"),
                ]),
            ]),
        ]),
        Field("node_endpoints", "[]NodeEndpoint", "0+", fields=[
            Field("node_id", "int32", "0+"),
            Field("host", "string", "0+"),
            Field("port", "int32", "0+"),
            Field("rack", "string", "0+", nullable="0+", default=None),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
