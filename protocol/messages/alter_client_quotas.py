"""API 49 · v0-1 · flexible 1+ · AlterClientQuotas

Sets or removes client quota values (KIP-546) per entity: a set of (entity type, name) pairs, a null name being
the type's default entity; `validate_only` checks without changing anything.

Clients: confluent-kafka/librdkafka AdminClient.alter_client_quotas (when it has it), kafka-python
KafkaAdminClient.alter_client_quotas, kafka-configs.sh --alter --entity-type users/clients.
The reference folder has no JSON for this API: the fields follow apache/kafka's AlterClientQuotasRequest.json /
AlterClientQuotasResponse.json (v0-1, flexible from 1, unchanged in the 4.x JSON kafka-python vendors).
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "AlterClientQuotasRequest", api_key=49, kind="request", versions="0-1", flexible="1+",
    fields=[
        Field("entries", "[]EntryData", "0+", fields=[
            Field("entity", "[]EntityData", "0+", fields=[
                Field("entity_type", "string", "0+"),
                Field("entity_name", "string", "0+", nullable="0+"),
            ]),
            Field("ops", "[]OpData", "0+", fields=[
                Field("key", "string", "0+"),
                Field("value", "float64", "0+"),
                Field("remove", "bool", "0+"),
            ]),
        ]),
        Field("validate_only", "bool", "0+"),
    ],
)

RESPONSE = Message(
    "AlterClientQuotasResponse", api_key=49, kind="response", versions="0-1", flexible="1+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("entries", "[]EntryData", "0+", fields=[
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
            Field("entity", "[]EntityData", "0+", fields=[
                Field("entity_type", "string", "0+"),
                Field("entity_name", "string", "0+", nullable="0+"),
            ]),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
