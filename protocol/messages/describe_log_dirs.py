"""API 35 · v0-4 · flexible 2+ · DescribeLogDirs

Lists a broker's log directories and, per directory, the size and lag of the partitions it holds (the
current log and any future log an AlterReplicaLogDirs move is filling); a null topics asks for all of them.

Versions: v1 is v0, v2 is the first flexible version, v3 adds a top-level error code, v4 each directory's
total and usable bytes (KIP-827). Kafka 3.9 marks request v0 deprecated (KIP-896; 4.0 drops it).

Clients: the admin clients: Java Admin.describeLogDirs / kafka-log-dirs.sh, kafka-python
KafkaAdminClient.describe_log_dirs.
The reference folder has no JSON for this API: the fields follow apache/kafka's DescribeLogDirsRequest.json /
DescribeLogDirsResponse.json at 3.9, so the spec conformance test lists it as an API without a reference file.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "DescribeLogDirsRequest", api_key=35, kind="request", versions="0-4", flexible="2+",
    fields=[
        Field("topics", "[]DescribableLogDirTopic", "0+", nullable="0+", fields=[
            Field("topic", "string", "0+"),
            Field("partitions", "[]int32", "0+"),
        ]),
    ],
)

RESPONSE = Message(
    "DescribeLogDirsResponse", api_key=35, kind="response", versions="0-4", flexible="2+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "3+"),
        Field("results", "[]DescribeLogDirsResult", "0+", fields=[
            Field("error_code", "int16", "0+"),
            Field("log_dir", "string", "0+"),
            Field("topics", "[]DescribeLogDirsTopic", "0+", fields=[
                Field("name", "string", "0+"),
                Field("partitions", "[]DescribeLogDirsPartition", "0+", fields=[
                    Field("partition_index", "int32", "0+"),
                    Field("partition_size", "int64", "0+"),
                    Field("offset_lag", "int64", "0+"),
                    Field("is_future_key", "bool", "0+"),
                ]),
            ]),
            Field("total_bytes", "int64", "4+", default=-1),
            Field("usable_bytes", "int64", "4+", default=-1),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
