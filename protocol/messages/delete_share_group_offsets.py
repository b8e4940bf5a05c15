"""API 92 · v0 · flexible 0+ · DeleteShareGroupOffsets

Delete the share-group state of whole topics from an empty share group (KIP-932): the group forgets those
topics' share-partitions, as if it had never read them. Errors at the top and per topic; topics answered with
their ids.

Clients: Kafka 4.1+'s Java Admin deleteShareGroupOffsets (kafka-share-groups.sh --delete-offsets).
confluent-kafka 2.16 and kafka-python 3.0 have no call for it.
Versions: Kafka 4.2 lists v0 only (a production version: this admin API had no early-access one), and so do we.
Not in the reference folder (3.9), nor in the apache/kafka mirror (Oct 2024), nor in kafka-python's 4.x JSON:
declared from Kafka 4.2's JSON, checked by bytes built by hand in tests/protocol/test_share_messages.py.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "DeleteShareGroupOffsetsRequest", api_key=92, kind="request", versions="0", flexible="0+",
    fields=[
        Field("group_id", "string", "0+"),
        Field("topics", "[]DeleteShareGroupOffsetsRequestTopic", "0+", fields=[
            Field("topic_name", "string", "0+"),
        ]),
    ],
)

RESPONSE = Message(
    "DeleteShareGroupOffsetsResponse", api_key=92, kind="response", versions="0", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+", default=None),
        Field("responses", "[]DeleteShareGroupOffsetsResponseTopic", "0+", fields=[
            Field("topic_name", "string", "0+"),
            Field("topic_id", "uuid", "0+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+", default=None),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
