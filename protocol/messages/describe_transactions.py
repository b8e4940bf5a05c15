"""API 65 · v0 · flexible 0+ · DescribeTransactions

Describes transactions at their transaction coordinator (KIP-664): state, timeout, start time, producer id
and epoch, and the partitions of the ongoing transaction. An empty id list describes nothing.

Clients: the admin clients: Java Admin.describeTransactions / kafka-transactions.sh describe, kafka-python
KafkaAdminClient.describe_transactions.
The reference folder has no JSON for this API: the fields follow apache/kafka's
DescribeTransactionsRequest.json / DescribeTransactionsResponse.json at 3.9, so the spec conformance test
lists it as an API without a reference file.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "DescribeTransactionsRequest", api_key=65, kind="request", versions="0", flexible="0+",
    fields=[
        Field("transactional_ids", "[]string", "0+"),
    ],
)

RESPONSE = Message(
    "DescribeTransactionsResponse", api_key=65, kind="response", versions="0", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("transaction_states", "[]TransactionState", "0+", fields=[
            Field("error_code", "int16", "0+"),
            Field("transactional_id", "string", "0+"),
            Field("transaction_state", "string", "0+"),
            Field("transaction_timeout_ms", "int32", "0+"),
            Field("transaction_start_time_ms", "int64", "0+"),
            Field("producer_id", "int64", "0+"),
            Field("producer_epoch", "int16", "0+"),
            Field("topics", "[]TopicData", "0+", fields=[
                Field("topic", "string", "0+"),
                Field("partitions", "[]int32", "0+"),
            ]),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
