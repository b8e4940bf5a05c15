"""API 63 · v0-1 · flexible 0+ · BrokerHeartbeat

KRaft-style: a broker heartbeats the controller with its broker epoch and
metadata offset; the answer says whether it is caught up, fenced or should shut down.

Clients: never sent by clients.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "BrokerHeartbeatRequest", api_key=63, kind="request", versions="0-1", flexible="0+",
    fields=[
        Field("broker_id", "int32", "0+"),
        Field("broker_epoch", "int64", "0+", default=-1),
        Field("current_metadata_offset", "int64", "0+"),
        Field("want_fence", "bool", "0+"),
        Field("want_shut_down", "bool", "0+"),
        Field("offline_log_dirs", "[]uuid", "1+", tag=0, tagged="1+"),
    ],
)

RESPONSE = Message(
    "BrokerHeartbeatResponse", api_key=63, kind="response", versions="0-1", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("is_caught_up", "bool", "0+", default=False),
        Field("is_fenced", "bool", "0+", default=True),
        Field("should_shut_down", "bool", "0+"),
    ],
)

API = Api(REQUEST, RESPONSE)
