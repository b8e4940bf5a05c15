"""API 67 · v0 · flexible 0+ · AllocateProducerIds

A broker asks the controller for a block of producer ids (KIP-730), so ids stay unique across brokers and
restarts.

Clients: never sent by clients.
The reference folder has no JSON for this API: the fields follow apache/kafka's 3.x
AllocateProducerIdsRequest.json / AllocateProducerIdsResponse.json (v0, flexible from v0), so the spec
conformance test lists it as an API without a reference file.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "AllocateProducerIdsRequest", api_key=67, kind="request", versions="0", flexible="0+",
    fields=[
        Field("broker_id", "int32", "0+"),
        Field("broker_epoch", "int64", "0+", default=-1),
    ],
)

RESPONSE = Message(
    "AllocateProducerIdsResponse", api_key=67, kind="response", versions="0", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("producer_id_start", "int64", "0+"),
        Field("producer_id_len", "int32", "0+"),
    ],
)

API = Api(REQUEST, RESPONSE)
