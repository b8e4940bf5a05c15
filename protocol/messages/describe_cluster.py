"""API 60 · v0-2 · flexible 0+ · DescribeCluster

Brokers, controller and cluster id (KIP-700); v2 (Kafka 4.0, KIP-1073) can list fenced brokers too.

Clients: kafka-python v1 for describe_cluster(), only when advertised (otherwise Metadata).
librdkafka never sends it in the measured flows.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "DescribeClusterRequest", api_key=60, kind="request", versions="0-2", flexible="0+",
    fields=[
        Field("include_cluster_authorized_operations", "bool", "0+"),
        Field("endpoint_type", "int8", "1+", default=1),
        Field("include_fenced_brokers", "bool", "2+"),
    ],
)

RESPONSE = Message(
    "DescribeClusterResponse", api_key=60, kind="response", versions="0-2", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+", default=None),
        Field("endpoint_type", "int8", "1+", default=1),
        Field("cluster_id", "string", "0+"),
        Field("controller_id", "int32", "0+", default=-1),
        Field("brokers", "[]DescribeClusterBroker", "0+", fields=[
            Field("broker_id", "int32", "0+"),
            Field("host", "string", "0+"),
            Field("port", "int32", "0+"),
            Field("rack", "string", "0+", nullable="0+", default=None),
            Field("is_fenced", "bool", "2+"),
        ]),
        Field("cluster_authorized_operations", "int32", "0+", default=-2147483648),
    ],
)

API = Api(REQUEST, RESPONSE)
