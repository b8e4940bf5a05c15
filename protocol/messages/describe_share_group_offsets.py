"""API 90 · v0-1 · flexible 0+ · DescribeShareGroupOffsets

The share-partition start offsets of share groups (KIP-932), per group and topic-partition asked for (topics null:
every topic-partition the group has state for), with the leader epoch they were written at and, from v1
(KIP-1226), the share-partition lag (-1 when unknown). Errors per group and per partition.

Clients: Kafka 4.1+'s Java Admin listShareGroupOffsets (kafka-share-groups.sh --describe --offsets): 4.1 sends v0,
4.2 v1. confluent-kafka 2.16 and kafka-python 3.0 have no call for it.
Versions: Kafka 4.2 lists v0-1 (v0 is a production version here: this admin API had no early-access one); we
declare both. Not in the reference folder (3.9), nor in the apache/kafka mirror (Oct 2024), nor in
kafka-python's 4.x JSON: declared from Kafka 4.2's JSON, checked by bytes built by hand in
tests/protocol/test_share_messages.py.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "DescribeShareGroupOffsetsRequest", api_key=90, kind="request", versions="0-1", flexible="0+",
    fields=[
        Field("groups", "[]DescribeShareGroupOffsetsRequestGroup", "0+", fields=[
            Field("group_id", "string", "0+"),
            Field("topics", "[]DescribeShareGroupOffsetsRequestTopic", "0+", nullable="0+", fields=[
                Field("topic_name", "string", "0+"),
                Field("partitions", "[]int32", "0+"),
            ]),
        ]),
    ],
)

RESPONSE = Message(
    "DescribeShareGroupOffsetsResponse", api_key=90, kind="response", versions="0-1", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("groups", "[]DescribeShareGroupOffsetsResponseGroup", "0+", fields=[
            Field("group_id", "string", "0+"),
            Field("topics", "[]DescribeShareGroupOffsetsResponseTopic", "0+", fields=[
                Field("topic_name", "string", "0+"),
                Field("topic_id", "uuid", "0+"),
                Field("partitions", "[]DescribeShareGroupOffsetsResponsePartition", "0+", fields=[
                    Field("partition_index", "int32", "0+"),
                    Field("start_offset", "int64", "0+"),
                    Field("leader_epoch", "int32", "0+"),
                    Field("lag", "int64", "1+", default=-1),
                    Field("error_code", "int16", "0+"),
                    Field("error_message", "string", "0+", nullable="0+", default=None),
                ]),
            ]),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+", default=None),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
