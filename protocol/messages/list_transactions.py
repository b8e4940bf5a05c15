"""API 66 · v0-2 · flexible 0+ · ListTransactions

Lists the transactions a transaction coordinator knows (KIP-664), optionally only those in some states
("Ongoing", "PrepareCommit", ...) or of some producer ids; empty filters match everything. The response
names the state filters the coordinator did not recognise.

Versions: v1 (Kafka 3.8, KIP-994) adds DurationFilter to the request: only transactions running longer than that
many milliseconds (-1: any); v2 (Kafka 4.1, KIP-1152) TransactionalIdPattern: only ids the regular expression
matches whole (null or empty: any), INVALID_REGULAR_EXPRESSION if it does not compile.

Clients: the admin clients: Java Admin.listTransactions / kafka-transactions.sh list, kafka-python
KafkaAdminClient.list_transactions.
The reference folder has no JSON for this API: the fields follow apache/kafka's ListTransactionsRequest.json /
ListTransactionsResponse.json at 3.9, so the spec conformance test lists it as an API without a reference file.
"""

from epoch_broker.protocol.schema import Api, Field, Message

REQUEST = Message(
    "ListTransactionsRequest", api_key=66, kind="request", versions="0-2", flexible="0+",
    fields=[
        Field("state_filters", "[]string", "0+"),
        Field("producer_id_filters", "[]int64", "0+"),
        Field("duration_filter", "int64", "1+", default=-1),
        Field("transactional_id_pattern", "string", "2+", nullable="2+", default=None),
    ],
)

RESPONSE = Message(
    "ListTransactionsResponse", api_key=66, kind="response", versions="0-2", flexible="0+",
    fields=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("unknown_state_filters", "[]string", "0+"),
        Field("transaction_states", "[]TransactionState", "0+", fields=[
            Field("transactional_id", "string", "0+"),
            Field("producer_id", "int64", "0+"),
            Field("transaction_state", "string", "0+"),
        ]),
    ],
)

API = Api(REQUEST, RESPONSE)
