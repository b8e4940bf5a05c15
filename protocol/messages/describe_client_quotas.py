"""API 48 · v0-1 · flexible 1+ · DescribeClientQuotas

The client quotas (KIP-546) whose entities match a filter: per entity type a component matching an exact name
(0), the default entity (1, name null) or any named one (2); `strict` leaves out entities with types the filter
does not name.

Clients: confluent-kafka/librdkafka AdminClient.describe_client_quotas (when it has it), kafka-python
KafkaAdminClient.describe_client_quotas, kafka-configs.sh --describe --entity-type users/clients.
The reference folder has no JSON for this API: the fields follow apache/kafka's DescribeClientQuotasRequest.json /
DescribeClientQuotasResponse.json (v0-1, flexible from 1, unchanged in the 4.x JSON kafka-python vendors).
"""

from epoch_broker.protocol.schema import Api, Field, Message

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

REQUEST = Message(
    "DescribeClientQuotasRequest", api_key=48, kind="request", versions="0-1", flexible="1+",
    fields=[
        Field("components", "[]ComponentData", "0+", fields=[
            Field("entity_type", "string", "0+"),
            Field("match_type", "int8", "0+"),
            Field("match", "string", "0+", nullable="0+"),
        ]),
        Field("strict", "bool", "0+"),
    ],
)

RESPONSE = Message(
    "DescribeClientQuotasResponse", api_key=48, kind="response", versions="0-1", flexible="1+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Field("entries", "[]EntryData", "0+", nullable="0+", fields=[
            Field("entity", "[]EntityData", "0+", fields=[
                Field("entity_type", "string", "0+"),
                Field("entity_name", "string", "0+", nullable="0+"),
            ]),
            Field("values", "[]ValueData", "0+", fields=[
                Field("key", "string", "0+"),
                Field("value", "float64", "0+"),
            ]),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
