"""API 34 · v1-2 · flexible 2+ · AlterReplicaLogDirs

Moves replicas of this broker to other log dirs (KIP-113): per destination dir, the topics and partitions to
move there; per partition an error code.

Clients: Kafka's kafka-reassign-partitions.sh and Admin.alterReplicaLogDirs, kafka-python 3.0
KafkaAdminClient.alter_replica_log_dirs (v2).
Narrowed: v0 (the same wire as v1) is gone from Kafka 4.0 (KIP-896) and not declared. Not in the reference folder
(3.9): checked against Kafka 4.x's JSON (tests/protocol/test_conformance.py).
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "AlterReplicaLogDirsRequest", api_key=34, kind="request", versions="1-2", flexible="2+",
    fields=[
        Field("dirs", "[]AlterReplicaLogDir", "0+", fields=[
            Field("path", "string", "0+"),
            Field("topics", "[]AlterReplicaLogDirTopic", "0+", fields=[
                Field("name", "string", "0+"),
                Field("partitions", "[]int32", "0+"),
            ]),
        ]),
    ],
)

RESPONSE = Message(
    "AlterReplicaLogDirsResponse", api_key=34, kind="response", versions="1-2", flexible="2+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("results", "[]AlterReplicaLogDirTopicResult", "0+", fields=[
            Field("topic_name", "string", "0+"),
            Field("partitions", "[]AlterReplicaLogDirPartitionResult", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
            ]),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
