"""API 85 · v0 · flexible 0+ · WriteShareGroupState

Share groups (KIP-932), broker to broker: a share-partition's leader writes the share group's durable state of that
partition (the whole state: start offset and state batches, 0 available, 2 acknowledged, 4 archived, each with its
delivery count), answered once it is replicated. Refused with FENCED_STATE_EPOCH when the state epoch is not the
stored one (the group's offsets were altered or reset since it was read) and FENCED_LEADER_EPOCH when a newer
leader has read it.

Clients: none; our brokers send it to the share group's coordinator (see broker/replica/share_persister.py).
Versions: v0, apache/kafka's JSON (trunk, October 2024).
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "WriteShareGroupStateRequest", api_key=85, kind="request", versions="0", flexible="0+",
    fields=[
        Field("group_id", "string", "0+"),
        Field("topics", "[]WriteStateData", "0+", fields=[
            Field("topic_id", "uuid", "0+"),
            Field("partitions", "[]PartitionData", "0+", fields=[
                Field("partition", "int32", "0+"),
                Field("state_epoch", "int32", "0+"),
                Field("leader_epoch", "int32", "0+"),
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

RESPONSE = Message(
    "WriteShareGroupStateResponse", api_key=85, kind="response", versions="0", flexible="0+",
    fields=[
        Field("results", "[]WriteStateResult", "0+", fields=[
            Field("topic_id", "uuid", "0+"),
            Field("partitions", "[]PartitionResult", "0+", fields=[
                Field("partition", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("error_message", "string", "0+", nullable="0+", default=None),
            ]),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
