"""API 45 · v0-1 · flexible 0+ · AlterPartitionReassignments

Moves partitions to new replica sets (KIP-455): per partition the target replicas, or null to cancel a
reassignment in progress. The reference folder has no JSON for this API: the fields follow apache/kafka's
3.x AlterPartitionReassignmentsRequest.json / AlterPartitionReassignmentsResponse.json, and v1's
allow_replication_factor_change (Kafka 4.1, KIP-1101) its 4.x JSON.

Clients: Kafka's kafka-reassign-partitions.sh and admin clients; here, `epoch-broker admin reassign`.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "AlterPartitionReassignmentsRequest", api_key=45, kind="request", versions="0-1", flexible="0+",
    fields=[
        Field("timeout_ms", "int32", "0+", default=60000),
        Field("allow_replication_factor_change", "bool", "1+", default=True),
        Field("topics", "[]ReassignableTopic", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]ReassignablePartition", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("replicas", "[]int32", "0+", nullable="0+", default=None),
            ]),
        ]),
    ],
)

RESPONSE = Message(
    "AlterPartitionReassignmentsResponse", api_key=45, kind="response", versions="0-1", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("allow_replication_factor_change", "bool", "1+", default=True),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+", default=None),
        Field("responses", "[]ReassignableTopicResponse", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]ReassignablePartitionResponse", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("error_message", "string", "0+", nullable="0+", default=None),
            ]),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
