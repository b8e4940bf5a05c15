"""API 75 · v0 · flexible 0+ · DescribeTopicPartitions

Topics and their partitions with leaders, epochs, replicas, ISR, eligible leader replicas (KIP-966) and offline
replicas, by name or all of them, paged: ResponsePartitionLimit bounds the partitions of one answer and NextCursor
says where the next page starts (topic name, partition index).

Clients: Kafka 3.8+'s Java Admin describeTopics, kafka-python 3.0 KafkaAdminClient.describe_topic_partitions.
Not in the reference folder (3.9): checked against Kafka 4.x's JSON (tests/protocol/test_conformance.py).
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "DescribeTopicPartitionsRequest", api_key=75, kind="request", versions="0", flexible="0+",
    fields=[
        Field("topics", "[]TopicRequest", "0+", fields=[
            Field("name", "string", "0+"),
        ]),
        Field("response_partition_limit", "int32", "0+", default=2000),
        Field("cursor", "Cursor", "0+", nullable="0+", default=None, fields=[
            Field("topic_name", "string", "0+"),
            Field("partition_index", "int32", "0+"),
        ]),
    ],
)

RESPONSE = Message(
    "DescribeTopicPartitionsResponse", api_key=75, kind="response", versions="0", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("topics", "[]DescribeTopicPartitionsResponseTopic", "0+", fields=[
            Field("error_code", "int16", "0+"),
            Field("name", "string", "0+", nullable="0+"),
            Field("topic_id", "uuid", "0+"),
            Field("is_internal", "bool", "0+", default=False),
            Field("partitions", "[]DescribeTopicPartitionsResponsePartition", "0+", fields=[
                Field("error_code", "int16", "0+"),
                Field("partition_index", "int32", "0+"),
                Field("leader_id", "int32", "0+"),
                Field("leader_epoch", "int32", "0+", default=-1),
                Field("replica_nodes", "[]int32", "0+"),
                Field("isr_nodes", "[]int32", "0+"),
                Field("eligible_leader_replicas", "[]int32", "0+", nullable="0+", default=None),
                Field("last_known_elr", "[]int32", "0+", nullable="0+", default=None),
                Field("offline_replicas", "[]int32", "0+"),
            ]),
            Field("topic_authorized_operations", "int32", "0+", default=-2147483648),
        ]),
        Field("next_cursor", "Cursor", "0+", nullable="0+", default=None, fields=[
            Field("topic_name", "string", "0+"),
            Field("partition_index", "int32", "0+"),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
