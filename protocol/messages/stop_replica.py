"""API 5 · v0-4 · flexible 2+ · StopReplica

Inter-broker: stop replicating partitions, optionally deleting them; v3+ carries
the leader epoch per partition.

Clients: never sent by clients; only our controller sends it.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "StopReplicaRequest", api_key=5, kind="request", versions="0-4", flexible="2+",
    fields=[
        Field("controller_id", "int32", "0+"),
        Field("is_k_raft_controller", "bool", "4+", default=False),
        Field("controller_epoch", "int32", "0+"),
        Field("broker_epoch", "int64", "1+", default=-1),
        Field("delete_partitions", "bool", "0-2"),
        Field("ungrouped_partitions", "[]StopReplicaPartitionV0", "0", fields=[
            Field("topic_name", "string", "0"),
            Field("partition_index", "int32", "0"),
        ]),
        Field("topics", "[]StopReplicaTopicV1", "1-2", fields=[
            Field("name", "string", "1-2"),
            Field("partition_indexes", "[]int32", "1-2"),
        ]),
        Field("topic_states", "[]StopReplicaTopicState", "3+", fields=[
            Field("topic_name", "string", "3+"),
            Field("partition_states", "[]StopReplicaPartitionState", "3+", fields=[
                Field("partition_index", "int32", "3+"),
                Field("leader_epoch", "int32", "3+", default=-1),
                Field("delete_partition", "bool", "3+"),
            ]),
        ]),
    ],
)

RESPONSE = Message(
    "StopReplicaResponse", api_key=5, kind="response", versions="0-4", flexible="2+",
    fields=[
        Field("error_code", "int16", "0+"),
        Field("partition_errors", "[]StopReplicaPartitionError", "0+", fields=[
            Field("topic_name", "string", "0+"),
            Field("partition_index", "int32", "0+"),
            Field("error_code", "int16", "0+"),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
