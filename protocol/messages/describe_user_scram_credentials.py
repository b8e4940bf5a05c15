"""API 50 · v0 · flexible 0+ · DescribeUserScramCredentials

Lists the SCRAM mechanisms and iteration counts stored for users (KIP-554); never the salt or the salted
password. A null or empty user list means every user; a user without credentials gets RESOURCE_NOT_FOUND.

Clients: confluent-kafka/librdkafka AdminClient.describe_user_scram_credentials; kafka-configs.sh --describe
--entity-type users. kafka-python and kafkajs do not send it.
The reference folder has no JSON for this API: the fields follow apache/kafka's
DescribeUserScramCredentialsRequest.json / DescribeUserScramCredentialsResponse.json at 3.9.0 (v0, flexible
from 0), so the spec conformance test lists it as an API without a reference file.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "DescribeUserScramCredentialsRequest", api_key=50, kind="request", versions="0", flexible="0+",
    fields=[
        Field("users", "[]UserName", "0+", nullable="0+", fields=[
            Field("name", "string", "0+"),
        ]),
    ],
)

RESPONSE = Message(
    "DescribeUserScramCredentialsResponse", api_key=50, kind="response", versions="0", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Field("results", "[]DescribeUserScramCredentialsResult", "0+", fields=[
            Field("user", "string", "0+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
            Field("credential_infos", "[]CredentialInfo", "0+", fields=[
                Field("mechanism", "int8", "0+"),
                Field("iterations", "int32", "0+"),
            ]),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
