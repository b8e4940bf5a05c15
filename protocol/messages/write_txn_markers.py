"""API 27 · v0-1 · flexible 1+ · WriteTxnMarkers

Inter-broker: the transaction coordinator asks each partition leader to append a COMMIT (transaction_result
true) or ABORT (false) control record for a producer, which completes the transaction on that partition.

Versions: v1 is the first flexible version; otherwise v0 and v1 are the same.

Clients: brokers (the transaction coordinator); and the admin clients' abort of a hanging transaction
(KIP-664: Java Admin.abortTransaction / kafka-transactions.sh abort, kafka-python
KafkaAdminClient.abort_transaction) sends an ABORT marker straight to the partition leader.
The reference folder has no JSON for this API: the fields follow apache/kafka's WriteTxnMarkersRequest.json /
WriteTxnMarkersResponse.json at 3.9, so the spec conformance test lists it as an API without a reference file.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "WriteTxnMarkersRequest", api_key=27, kind="request", versions="0-1", flexible="1+",
    fields=[
        Field("markers", "[]WritableTxnMarker", "0+", fields=[
            Field("producer_id", "int64", "0+"),
            Field("producer_epoch", "int16", "0+"),
            Field("transaction_result", "bool", "0+"),
            Field("topics", "[]WritableTxnMarkerTopic", "0+", fields=[
                Field("name", "string", "0+"),
                Field("partition_indexes", "[]int32", "0+"),
            ]),
            Field("coordinator_epoch", "int32", "0+"),
        ]),
    ],
)

RESPONSE = Message(
    "WriteTxnMarkersResponse", api_key=27, kind="response", versions="0-1", flexible="1+",
    fields=[
        Field("markers", "[]WritableTxnMarkerResult", "0+", fields=[
            Field("producer_id", "int64", "0+"),
            Field("topics", "[]WritableTxnMarkerTopicResult", "0+", fields=[
                Field("name", "string", "0+"),
                Field("partitions", "[]WritableTxnMarkerPartitionResult", "0+", fields=[
                    Field("partition_index", "int32", "0+"),
                    Field("error_code", "int16", "0+"),
                ]),
            ]),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
