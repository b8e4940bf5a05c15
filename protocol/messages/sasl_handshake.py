"""API 17 · v0-1 · flexible none · SaslHandshake

Choose a SASL mechanism; v1 means SaslAuthenticate requests carry the tokens.

Clients: only with SASL configured; not sent in the measured flows.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "SaslHandshakeRequest", api_key=17, kind="request", versions="0-1", flexible="none",
    fields=[
        Field("mechanism", "string", "0+"),
    ],
)

RESPONSE = Message(
    "SaslHandshakeResponse", api_key=17, kind="response", versions="0-1", flexible="none",
    fields=[
        Field("error_code", "int16", "0+"),
        Field("mechanisms", "[]string", "0+"),
    ],
)

API = Api(REQUEST, RESPONSE)
