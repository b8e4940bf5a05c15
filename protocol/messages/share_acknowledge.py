"""API 79 · v1 · flexible 0+ · ShareAcknowledge

Share groups (KIP-932): acknowledge delivered records without fetching, in the member's share session on that
broker (an epoch > 0 to acknowledge, -1 to acknowledge and close; 0 is refused: only ShareFetch opens a session).
The acknowledgement batches are ShareFetch's (one acknowledge type for the range, or one per offset: 0 gap,
1 accept, 2 release, 3 reject); the answer is an error per partition with the current leader.

Clients: confluent-kafka 2.16 (librdkafka 2.16) ShareConsumer sends v1 and only v1 (it asks for 1-1), for
acknowledgements it sends without fetching and to close its session (-1).
Versions: Kafka 4.2 lists v1-2 (v0 was Kafka 4.0's early access, removed in 4.1, with v1's layout). v2
(KIP-1222) adds is_renew_ack after share_session_epoch, the acknowledge type 4 (renew) and, in the response,
acquisition_lock_timeout_ms after error_message. We declare v1, what the installed client sends; librdkafka's
writer and parser and its mock broker's reader and writer agree with this layout. current_leader has no default
in Kafka's JSON (0, 0): a handler sets -1, -1 when it has no leader to name.
Not in the reference folder (3.9) nor in kafka-python's 4.x JSON: checked against apache/kafka's v0 JSON in
tests/protocol/test_share_messages.py.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "ShareAcknowledgeRequest", api_key=79, kind="request", versions="1", flexible="0+",
    fields=[
        Field("group_id", "string", "0+", nullable="0+", default=None),
        Field("member_id", "string", "0+", nullable="0+"),
        Field("share_session_epoch", "int32", "0+"),
        Field("topics", "[]AcknowledgeTopic", "0+", fields=[
            Field("topic_id", "uuid", "0+"),
            Field("partitions", "[]AcknowledgePartition", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("acknowledgement_batches", "[]AcknowledgementBatch", "0+", fields=[
                    Field("first_offset", "int64", "0+"),
                    Field("last_offset", "int64", "0+"),
                    Field("acknowledge_types", "[]int8", "0+"),
                ]),
            ]),
        ]),
    ],
)

RESPONSE = Message(
    "ShareAcknowledgeResponse", api_key=79, kind="response", versions="1", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+", default=None),
        Field("responses", "[]ShareAcknowledgeTopicResponse", "0+", fields=[
            Field("topic_id", "uuid", "0+"),
            Field("partitions", "[]PartitionData", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("error_message", "string", "0+", nullable="0+", default=None),
                Field("current_leader", "LeaderIdAndEpoch", "0+", fields=[
                    Field("leader_id", "int32", "0+"),
                    Field("leader_epoch", "int32", "0+"),
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
