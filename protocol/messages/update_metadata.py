"""API 6 · v0-8 · flexible 6+ · UpdateMetadata

Inter-broker: the controller pushes the cluster metadata (brokers, partition
leaders, leader epochs, ISR) that brokers serve in Metadata responses.

Clients: never sent by clients; only our controller sends it.
"""

from epoch_broker.protocol.schema import Api, Field, Message

UPDATE_METADATA_PARTITION_STATE = [
    Field("topic_name", "string", "0-4"),
    Field("partition_index", "int32", "0+"),
    Field("controller_epoch", "int32", "0+"),
    Field("leader", "int32", "0+"),
    Field("leader_epoch", "int32", "0+"),
    Field("isr", "[]int32", "0+"),
    Field("zk_version", "int32", "0+"),
    Field("replicas", "[]int32", "0+"),
    Field("offline_replicas", "[]int32", "4+"),
]

REQUEST = Message(
    "UpdateMetadataRequest", api_key=6, kind="request", versions="0-8", flexible="6+",
    fields=[
        Field("controller_id", "int32", "0+"),
        Field("is_k_raft_controller", "bool", "8+", default=False),
        Field("type", "int8", "8+", tag=0, tagged="8+", default=0),
        Field("controller_epoch", "int32", "0+"),
        Field("broker_epoch", "int64", "5+", default=-1),
        Field("ungrouped_partition_states", "[]UpdateMetadataPartitionState", "0-4",
              fields=UPDATE_METADATA_PARTITION_STATE),
        Field("topic_states", "[]UpdateMetadataTopicState", "5+", fields=[
            Field("topic_name", "string", "5+"),
            Field("topic_id", "uuid", "7+"),
            Field("partition_states", "[]UpdateMetadataPartitionState", "5+",
                  fields=UPDATE_METADATA_PARTITION_STATE),
        ]),
        Field("live_brokers", "[]UpdateMetadataBroker", "0+", fields=[
            Field("id", "int32", "0+"),
            Field("v0_host", "string", "0"),
            Field("v0_port", "int32", "0"),
            Field("endpoints", "[]UpdateMetadataEndpoint", "1+", fields=[
                Field("port", "int32", "1+"),
                Field("host", "string", "1+"),
                Field("listener", "string", "3+"),
                Field("security_protocol", "int16", "1+"),
            ]),
            Field("rack", "string", "2+", nullable="0+"),
        ]),
    ],
)

RESPONSE = Message(
    "UpdateMetadataResponse", api_key=6, kind="response", versions="0-8", flexible="6+",
    fields=[
        Field("error_code", "int16", "0+"),
    ],
)

API = Api(REQUEST, RESPONSE)
