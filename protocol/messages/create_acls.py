"""API 30 · v0-3 · flexible 2+ · CreateAcls

Creates ACL bindings, one result per creation in request order (the codes are in describe_acls.py).

Versions: v1 adds the resource pattern type (at v0 it is not on the wire and decodes as 3, LITERAL), v2 is the
first flexible version, v3 only allows the USER resource type (7): no wire change. Kafka 3.9 marks request v0
deprecated (KIP-896; 4.0 drops it).

Clients: the admin clients: confluent-kafka/librdkafka AdminClient.create_acls, kafka-python
KafkaAdminClient.create_acls, kafkajs admin.createAcls; kafka-acls.sh --add.
The reference folder has no JSON for this API: the fields follow apache/kafka's CreateAclsRequest.json /
CreateAclsResponse.json at 3.9.0 (v0-3, flexible from 2), so the spec conformance test lists it as an API
without a reference file.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "CreateAclsRequest", api_key=30, kind="request", versions="0-3", flexible="2+",
    fields=[
        Field("creations", "[]AclCreation", "0+", fields=[
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
            Field("resource_pattern_type", "int8", "1+", default=3),
            Field("principal", "string", "0+"),
            Field("host", "string", "0+"),
            Field("operation", "int8", "0+"),
            Field("permission_type", "int8", "0+"),
        ]),
    ],
)

RESPONSE = Message(
    "CreateAclsResponse", api_key=30, kind="response", versions="0-3", flexible="2+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("results", "[]AclCreationResult", "0+", fields=[
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
