"""API 3 · v0-13 · flexible 9+ · Metadata

Brokers, controller, topics and partitions with leader, leader epoch (v7+), replicas and ISR.
Clients trust leader epochs only at v9+ (librdkafka and kafka-python, KAFKA-9212).
cluster_authorized_operations must be INT32_MIN when not requested: -1 crashes kafka-python
at v8-v10. topic_id is v10+; a null topic name with a topic id is usable only at v12. v13 (Kafka 4.0, KIP-1102)
adds a top-level error_code: REBOOTSTRAP_REQUIRED tells the client to bootstrap again.

Clients: confluent-kafka and kafka-python send v12, aiokafka v5, kcat v4, kafkajs v6.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "MetadataRequest", api_key=3, kind="request", versions="0-13", flexible="9+",
    fields=[
        Field("topics", "[]MetadataRequestTopic", "0+", nullable="1+", fields=[
            Field("topic_id", "uuid", "10+"),
            Field("name", "string", "0+", nullable="10+"),
        ]),
        Field("allow_auto_topic_creation", "bool", "4+", default=True),
        Field("include_cluster_authorized_operations", "bool", "8-10"),
        Field("include_topic_authorized_operations", "bool", "8+"),
    ],
)

RESPONSE = Message(
    "MetadataResponse", api_key=3, kind="response", versions="0-13", flexible="9+",
    fields=[
        Field("throttle_time_ms", "int32", "3+"),
        Field("brokers", "[]MetadataResponseBroker", "0+", fields=[
            Field("node_id", "int32", "0+"),
            Field("host", "string", "0+"),
            Field("port", "int32", "0+"),
            Field("rack", "string", "1+", nullable="1+", default=None),
        ]),
        Field("cluster_id", "string", "2+", nullable="2+", default=None),
        Field("controller_id", "int32", "1+", default=-1),
        Field("topics", "[]MetadataResponseTopic", "0+", fields=[
            Field("error_code", "int16", "0+"),
            Field("name", "string", "0+", nullable="12+"),
            Field("topic_id", "uuid", "10+"),
            Field("is_internal", "bool", "1+", default=False),
            Field("partitions", "[]MetadataResponsePartition", "0+", fields=[
                Field("error_code", "int16", "0+"),
                Field("partition_index", "int32", "0+"),
                Field("leader_id", "int32", "0+"),
                Field("leader_epoch", "int32", "7+", default=-1),
                Field("replica_nodes", "[]int32", "0+"),
                Field("isr_nodes", "[]int32", "0+"),
                Field("offline_replicas", "[]int32", "5+"),
            ]),
            Field("topic_authorized_operations", "int32", "8+", default=-2147483648),
        ]),
        Field("cluster_authorized_operations", "int32", "8-10", default=-2147483648),
        Field("error_code", "int16", "13+"),
    ],
)

API = Api(REQUEST, RESPONSE)
