"""API 4 · v0-7 · flexible 4+ · LeaderAndIsr

Inter-broker (ZooKeeper-era controller to broker): leader, leader epoch, ISR and
replicas per partition. The broker becomes leader or follower and truncates accordingly.

Clients: never sent by clients; only our controller sends it.
"""

from epoch_broker.protocol.schema import Api, Field, Message

LEADER_AND_ISR_PARTITION_STATE = [
    Field("topic_name", "string", "0-1"),
    Field("partition_index", "int32", "0+"),
    Field("controller_epoch", "int32", "0+"),
    Field("leader", "int32", "0+"),
    Field("leader_epoch", "int32", "0+"),
    Field("isr", "[]int32", "0+"),
    Field("partition_epoch", "int32", "0+"),
    Field("replicas", "[]int32", "0+"),
    Field("adding_replicas", "[]int32", "3+"),
    Field("removing_replicas", "[]int32", "3+"),
    Field("is_new", "bool", "1+", default=False),
    Field("leader_recovery_state", "int8", "6+", default=0),
]

LEADER_AND_ISR_PARTITION_ERROR = [
    Field("topic_name", "string", "0-4"),
    Field("partition_index", "int32", "0+"),
    Field("error_code", "int16", "0+"),
]

REQUEST = Message(
    "LeaderAndIsrRequest", api_key=4, kind="request", versions="0-7", flexible="4+",
    fields=[
        Field("controller_id", "int32", "0+"),
        Field("is_k_raft_controller", "bool", "7+", default=False),
        Field("controller_epoch", "int32", "0+"),
        Field("broker_epoch", "int64", "2+", default=-1),
        Field("type", "int8", "5+"),
        Field("ungrouped_partition_states", "[]LeaderAndIsrPartitionState", "0-1",
              fields=LEADER_AND_ISR_PARTITION_STATE),
        Field("topic_states", "[]LeaderAndIsrTopicState", "2+", fields=[
            Field("topic_name", "string", "2+"),
            Field("topic_id", "uuid", "5+"),
            Field("partition_states", "[]LeaderAndIsrPartitionState", "2+",
                  fields=LEADER_AND_ISR_PARTITION_STATE),
        ]),
        Field("live_leaders", "[]LeaderAndIsrLiveLeader", "0+", fields=[
            Field("broker_id", "int32", "0+"),
            Field("host_name", "string", "0+"),
            Field("port", "int32", "0+"),
        ]),
    ],
)

RESPONSE = Message(
    "LeaderAndIsrResponse", api_key=4, kind="response", versions="0-7", flexible="4+",
    fields=[
        Field("error_code", "int16", "0+"),
        Field("partition_errors", "[]LeaderAndIsrPartitionError", "0-4",
              fields=LEADER_AND_ISR_PARTITION_ERROR),
        Field("topics", "[]LeaderAndIsrTopicError", "5+", fields=[
            Field("topic_id", "uuid", "5+"),
            Field("partition_errors", "[]LeaderAndIsrPartitionError", "5+",
                  fields=LEADER_AND_ISR_PARTITION_ERROR),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
