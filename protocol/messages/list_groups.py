"""API 16 · v0-4 · flexible 3+ · ListGroups

List the groups the coordinator knows, optionally filtered by state (v4+).

Clients: not sent in the measured flows.
Narrowed: v5 (TypesFilter, KIP-848) is not declared.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "ListGroupsRequest", api_key=16, kind="request", versions="0-4", flexible="3+",
    fields=[
        Field("states_filter", "[]string", "4+"),
    ],
)

RESPONSE = Message(
    "ListGroupsResponse", api_key=16, kind="response", versions="0-4", flexible="3+",
    fields=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "0+"),
        Field("groups", "[]ListedGroup", "0+", fields=[
            Field("group_id", "string", "0+"),
            Field("protocol_type", "string", "0+"),
            Field("group_state", "string", "4+"),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
