"""API 42 · v0-2 · flexible 2+ · DeleteGroups

Delete empty groups and their committed offsets (KIP-229); a group with members answers NON_EMPTY_GROUP.

Clients: the admin APIs of confluent-kafka, kafka-python and kafkajs (`delete_consumer_groups`/`deleteGroups`).
The reference folder has no JSON for this API: the fields follow apache/kafka's DeleteGroupsRequest.json /
DeleteGroupsResponse.json (v0-2, flexible from 2), so the spec conformance test lists it as an API without a
reference file.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "DeleteGroupsRequest", api_key=42, kind="request", versions="0-2", flexible="2+",
    fields=[
        Field("groups_names", "[]string", "0+"),
    ],
)

RESPONSE = Message(
    "DeleteGroupsResponse", api_key=42, kind="response", versions="0-2", flexible="2+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("results", "[]DeletableGroupResult", "0+", fields=[
            Field("group_id", "string", "0+"),
            Field("error_code", "int16", "0+"),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
