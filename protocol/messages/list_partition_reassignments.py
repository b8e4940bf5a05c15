"""API 46 · v0 · flexible 0+ · ListPartitionReassignments

The reassignments in progress (KIP-455): per partition its replicas and those being added and removed; a null
topics lists every partition. The reference folder has no JSON for this API: the fields follow apache/kafka's
3.x ListPartitionReassignmentsRequest.json / ListPartitionReassignmentsResponse.json.

Clients: Kafka's kafka-reassign-partitions.sh --verify; here, `epoch-broker admin reassign --list`.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "ListPartitionReassignmentsRequest", api_key=46, kind="request", versions="0", flexible="0+",
    fields=[
        Field("timeout_ms", "int32", "0+", default=60000),
        Field("topics", "[]ListPartitionReassignmentsTopics", "0+", nullable="0+", default=None, fields=[
            Field("name", "string", "0+"),
            Field("partition_indexes", "[]int32", "0+"),
        ]),
    ],
)

RESPONSE = Message(
    "ListPartitionReassignmentsResponse", api_key=46, kind="response", versions="0", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+", default=None),
        Field("topics", "[]OngoingTopicReassignment", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]OngoingPartitionReassignment", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("replicas", "[]int32", "0+"),
                Field("adding_replicas", "[]int32", "0+"),
                Field("removing_replicas", "[]int32", "0+"),
            ]),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
