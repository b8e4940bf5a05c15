"""API 62 · v0-4 · flexible 0+ · BrokerRegistration

KRaft-style: a broker registers its id, incarnation, listeners and features
with the controller and gets a broker epoch.

Clients: never sent by clients.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "BrokerRegistrationRequest", api_key=62, kind="request", versions="0-4", flexible="0+",
    fields=[
        Field("broker_id", "int32", "0+"),
        Field("cluster_id", "string", "0+"),
        Field("incarnation_id", "uuid", "0+"),
        Field("listeners", "[]Listener", "0+", fields=[
            Field("name", "string", "0+"),
            Field("host", "string", "0+"),
            Field("port", "uint16", "0+"),
            Field("security_protocol", "int16", "0+"),
        ]),
        Field("features", "[]Feature", "0+", fields=[
            Field("name", "string", "0+"),
            Field("min_supported_version", "int16", "0+"),
            Field("max_supported_version", "int16", "0+"),
        ]),
        Field("rack", "string", "0+", nullable="0+"),
        Field("is_migrating_zk_broker", "bool", "1+", default=False),
        Field("log_dirs", "[]uuid", "2+"),
        Field("previous_broker_epoch", "int64", "3+", default=-1),
    ],
)

RESPONSE = Message(
    "BrokerRegistrationResponse", api_key=62, kind="response", versions="0-4", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("broker_epoch", "int64", "0+", default=-1),
    ],
)

API = Api(REQUEST, RESPONSE)
