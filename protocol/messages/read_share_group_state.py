"""API 84 · v0 · flexible 0+ · ReadShareGroupState

Share groups (KIP-932), broker to broker: a share-partition's leader reads the share group's durable state of that
partition (state epoch, start offset, state batches: 0 available, 2 acknowledged, 4 archived, each with its
delivery count) when it first serves the share-partition. Its leader epoch fences leaders before it: once read at
an epoch, writes at older epochs are refused (FENCED_LEADER_EPOCH).

Clients: none; our brokers send it to the share group's coordinator (see broker/replica/share_persister.py).
Versions: v0, apache/kafka's JSON (trunk, October 2024). Kafka keeps the state in `__share_group_state` behind a
share coordinator; here the share group's own coordinator keeps it (broker/groups/share_state.py says why).
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "ReadShareGroupStateRequest", api_key=84, kind="request", versions="0", flexible="0+",
    fields=[
        Field("group_id", "string", "0+"),
        Field("topics", "[]ReadStateData", "0+", fields=[
            Field("topic_id", "uuid", "0+"),
            Field("partitions", "[]PartitionData", "0+", fields=[
                Field("partition", "int32", "0+"),
                Field("leader_epoch", "int32", "0+"),
            ]),
        ]),
    ],
)

RESPONSE = Message(
    "ReadShareGroupStateResponse", api_key=84, kind="response", versions="0", flexible="0+",
    fields=[
        Field("results", "[]ReadStateResult", "0+", fields=[
            Field("topic_id", "uuid", "0+"),
            Field("partitions", "[]PartitionResult", "0+", fields=[
                Field("partition", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("error_message", "string", "0+", nullable="0+", default=None),
                Field("state_epoch", "int32", "0+"),
                Field("start_offset", "int64", "0+"),
                Field("state_batches", "[]StateBatch", "0+", fields=[
                    Field("first_offset", "int64", "0+"),
                    Field("last_offset", "int64", "0+"),
                    Field("delivery_state", "int8", "0+"),
                    Field("delivery_count", "int16", "0+"),
                ]),
            ]),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
