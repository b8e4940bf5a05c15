"""API 16 · v0-5 · flexible 3+ · ListGroups

List the groups the coordinator knows, optionally filtered by state (v4+) and by type (v5+, KIP-848:
"classic" or "consumer", case-insensitive); v5 answers each group's type.

Clients: confluent-kafka AdminClient list_consumer_groups v4-5 (v5 when advertised; `types=` needs v5).
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "ListGroupsRequest", api_key=16, kind="request", versions="0-5", flexible="3+",
    fields=[
        Field("states_filter", "[]string", "4+"),
        Field("types_filter", "[]string", "5+"),
    ],
)

RESPONSE = Message(
    "ListGroupsResponse", api_key=16, kind="response", versions="0-5", flexible="3+",
    fields=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "0+"),
        Field("groups", "[]ListedGroup", "0+", fields=[
            Field("group_id", "string", "0+"),
            Field("protocol_type", "string", "0+"),
            Field("group_state", "string", "4+"),
            Field("group_type", "string", "5+"),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
