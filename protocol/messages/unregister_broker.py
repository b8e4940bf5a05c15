"""API 64 · v0 · flexible 0+ · UnregisterBroker

Removes a broker's registration from the cluster metadata (KIP-500's decommissioning): a broker gone for good
stops being listed. The reference folder has no JSON for this API: the fields follow apache/kafka's 3.x
UnregisterBrokerRequest.json / UnregisterBrokerResponse.json.

Clients: Kafka's kafka-cluster.sh unregister; here, `epoch-broker admin remove-broker`.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "UnregisterBrokerRequest", api_key=64, kind="request", versions="0", flexible="0+",
    fields=[Field("broker_id", "int32", "0+")],
)

RESPONSE = Message(
    "UnregisterBrokerResponse", api_key=64, kind="response", versions="0", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+", default=None),
    ],
)

API = Api(REQUEST, RESPONSE)
