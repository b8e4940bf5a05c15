"""API 43 · v0-2 · flexible 2+ · ElectLeaders

Asks the controller to elect leaders: election_type 0 is preferred (clean, within the ISR), 1 unclean (any
live replica, KIP-460); a null topic_partitions means every partition.

Project extension (like KIP-359's on Produce): a tagged top-level `target_leader` (tag 10000, v2+, default
-1) names the replica to elect, so a drill can move leadership to a chosen broker. Stock clients never send
it, and a stock broker skips it as an unknown tag.

Clients: Kafka's admin tools (kafka-leader-election.sh); here, `epoch-broker admin elect`.
The reference folder has no JSON for this API: the fields follow apache/kafka's 3.x
ElectLeadersRequest.json / ElectLeadersResponse.json, so the spec conformance test lists it as an API
without a reference file.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "ElectLeadersRequest", api_key=43, kind="request", versions="0-2", flexible="2+",
    fields=[
        Field("election_type", "int8", "1+", default=0),
        Field("topic_partitions", "[]TopicPartitions", "0+", nullable="0+", fields=[
            Field("topic", "string", "0+"),
            Field("partitions", "[]int32", "0+"),
        ]),
        Field("timeout_ms", "int32", "0+", default=60000),
        Field("target_leader", "int32", "2+", default=-1, tag=10000, tagged="2+"),
    ],
)

RESPONSE = Message(
    "ElectLeadersResponse", api_key=43, kind="response", versions="0-2", flexible="2+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "1+"),
        Field("replica_election_results", "[]ReplicaElectionResult", "0+", fields=[
            Field("topic", "string", "0+"),
            Field("partition_result", "[]PartitionResult", "0+", fields=[
                Field("partition_id", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("error_message", "string", "0+", nullable="0+"),
            ]),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
