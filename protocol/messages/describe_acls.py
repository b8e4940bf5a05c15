"""API 29 · v0-3 · flexible 2+ · DescribeAcls

Lists the ACL bindings that match a filter, grouped by resource (resource type, name and pattern type).

Versions: v1 adds the pattern type (filter and per resource; at v0 it is not on the wire and decodes as 3,
LITERAL), v2 is the first flexible version, v3 only allows the USER resource type (7): no wire change. Kafka
3.9 marks request v0 deprecated (KIP-896; 4.0 drops it).

Clients: the admin clients: confluent-kafka/librdkafka AdminClient.describe_acls, kafka-python
KafkaAdminClient.describe_acls, kafkajs admin.describeAcls; kafka-acls.sh --list.
The reference folder has no JSON for this API: the fields follow apache/kafka's DescribeAclsRequest.json /
DescribeAclsResponse.json at 3.9.0 (v0-3, flexible from 2), so the spec conformance test lists it as an API
without a reference file.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "DescribeAclsRequest", api_key=29, kind="request", versions="0-3", flexible="2+",
    fields=[
        Field("resource_type_filter", "int8", "0+"),
        Field("resource_name_filter", "string", "0+", nullable="0+"),
        Field("pattern_type_filter", "int8", "1+", default=3),
        Field("principal_filter", "string", "0+", nullable="0+"),
        Field("host_filter", "string", "0+", nullable="0+"),
        Field("operation", "int8", "0+"),
        Field("permission_type", "int8", "0+"),
    ],
)

RESPONSE = Message(
    "DescribeAclsResponse", api_key=29, kind="response", versions="0-3", flexible="2+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Field("resources", "[]DescribeAclsResource", "0+", fields=[
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
            Field("pattern_type", "int8", "1+", default=3),
            Field("acls", "[]AclDescription", "0+", fields=[
                Field("principal", "string", "0+"),
                Field("host", "string", "0+"),
                Field("operation", "int8", "0+"),
                Field("permission_type", "int8", "0+"),
            ]),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)

# The int8 codes of the ACL APIs (29 DescribeAcls, 30 CreateAcls, 31 DeleteAcls), as Kafka numbers them.
# ANY (and MATCH, for pattern types) only make sense in filters.
# resource types (org.apache.kafka.common.resource.ResourceType)
ANY_RESOURCE, TOPIC_RESOURCE, GROUP_RESOURCE, CLUSTER_RESOURCE = 1, 2, 3, 4
TRANSACTIONAL_ID_RESOURCE, DELEGATION_TOKEN_RESOURCE, USER_RESOURCE = 5, 6, 7
# pattern types (PatternType): LITERAL is the default and what v0 means
ANY_PATTERN, MATCH_PATTERN, LITERAL_PATTERN, PREFIXED_PATTERN = 1, 2, 3, 4
# operations (AclOperation)
ANY_OPERATION, ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 1, 2, 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, CREATE_TOKENS, DESCRIBE_TOKENS = range(9, 15)
# permission types (AclPermissionType)
ANY_PERMISSION, DENY, ALLOW = 1, 2, 3
