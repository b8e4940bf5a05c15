"""API 36 · v0-2 · flexible 2+ · SaslAuthenticate

Carry SASL tokens inside Kafka frames (KIP-152).

Clients: only with SASL configured; not sent in the measured flows.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "SaslAuthenticateRequest", api_key=36, kind="request", versions="0-2", flexible="2+",
    fields=[
        Field("auth_bytes", "bytes", "0+"),
    ],
)

RESPONSE = Message(
    "SaslAuthenticateResponse", api_key=36, kind="response", versions="0-2", flexible="2+",
    fields=[
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Field("auth_bytes", "bytes", "0+"),
        Field("session_lifetime_ms", "int64", "1+", default=0),
    ],
)

API = Api(REQUEST, RESPONSE)
