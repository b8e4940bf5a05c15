"""API 51 · v0 · flexible 0+ · AlterUserScramCredentials

Deletes and upserts users' SCRAM credentials (KIP-554), one result per affected user. The client does the
hashing: an upsertion carries the salt, the iteration count and the salted password (Hi(password, salt, i)
of RFC 5802), never the password itself.

Clients: confluent-kafka/librdkafka AdminClient.alter_user_scram_credentials; kafka-configs.sh --alter
--entity-type users --add-config / --delete-config 'SCRAM-SHA-256...'. kafka-python and kafkajs do not send
it.
The reference folder has no JSON for this API: the fields follow apache/kafka's
AlterUserScramCredentialsRequest.json / AlterUserScramCredentialsResponse.json at 3.9.0 (v0, flexible from 0),
so the spec conformance test lists it as an API without a reference file.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "AlterUserScramCredentialsRequest", api_key=51, kind="request", versions="0", flexible="0+",
    fields=[
        Field("deletions", "[]ScramCredentialDeletion", "0+", fields=[
            Field("name", "string", "0+"),
            Field("mechanism", "int8", "0+"),
        ]),
        Field("upsertions", "[]ScramCredentialUpsertion", "0+", fields=[
            Field("name", "string", "0+"),
            Field("mechanism", "int8", "0+"),
            Field("iterations", "int32", "0+"),
            Field("salt", "bytes", "0+"),
            Field("salted_password", "bytes", "0+"),
        ]),
    ],
)

RESPONSE = Message(
    "AlterUserScramCredentialsResponse", api_key=51, kind="response", versions="0", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("results", "[]AlterUserScramCredentialsResult", "0+", fields=[
            Field("user", "string", "0+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)

# SCRAM mechanisms (org.apache.kafka.clients.admin.ScramMechanism), used by APIs 50 and 51
UNKNOWN_MECHANISM, SCRAM_SHA_256, SCRAM_SHA_512 = 0, 1, 2
