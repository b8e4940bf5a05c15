"""API 55 · v0-2 · flexible 0+ · DescribeQuorum

The metadata log's quorum (`__cluster_metadata` partition 0): its leader and epoch, high watermark, and the log
end offset of each voter and observer (v1 adds when each last fetched and caught up; v2 directory ids, an error
message and the voters' endpoints).

Clients: Kafka's kafka-metadata-quorum.sh and Admin.describeMetadataQuorum, kafka-python 3.0
KafkaAdminClient.describe_metadata_quorum. Not in the reference folder (3.9): checked against Kafka 4.x's JSON
(tests/protocol/test_conformance.py).
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "DescribeQuorumRequest", api_key=55, kind="request", versions="0-2", flexible="0+",
    fields=[
        Field("topics", "[]TopicData", "0+", fields=[
            Field("topic_name", "string", "0+"),
            Field("partitions", "[]PartitionData", "0+", fields=[
                Field("partition_index", "int32", "0+"),
            ]),
        ]),
    ],
)

_REPLICA_STATE = [
    Field("replica_id", "int32", "0+"),
    Field("replica_directory_id", "uuid", "2+"),
    Field("log_end_offset", "int64", "0+"),
    Field("last_fetch_timestamp", "int64", "1+", default=-1),
    Field("last_caught_up_timestamp", "int64", "1+", default=-1),
]

RESPONSE = Message(
    "DescribeQuorumResponse", api_key=55, kind="response", versions="0-2", flexible="0+",
    fields=[
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "2+", nullable="2+"),
        Field("topics", "[]TopicData", "0+", fields=[
            Field("topic_name", "string", "0+"),
            Field("partitions", "[]PartitionData", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("error_message", "string", "2+", nullable="2+"),
                Field("leader_id", "int32", "0+"),
                Field("leader_epoch", "int32", "0+"),
                Field("high_watermark", "int64", "0+"),
                Field("current_voters", "[]ReplicaState", "0+", fields=_REPLICA_STATE),
                Field("observers", "[]ReplicaState", "0+", fields=_REPLICA_STATE),
            ]),
        ]),
        Field("nodes", "[]Node", "2+", fields=[
            Field("node_id", "int32", "2+"),
            Field("listeners", "[]Listener", "2+", fields=[
                Field("name", "string", "2+"),
                Field("host", "string", "2+"),
                Field("port", "uint16", "2+"),
            ]),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
