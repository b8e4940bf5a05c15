"""transactions: the transaction coordinator killed mid-transaction."""

from epoch_broker.drill.scenarios import PRODUCER_INVARIANTS, Scenario

SCENARIO = Scenario(
    "transactions", "SIGKILL the transaction coordinator mid-transaction, and leaders",
    "A transactional producer (confluent-kafka) writes transactions of 12 records over 3 partitions (replication "
    "3, min.insync.replicas 2), committing three and aborting the fourth on purpose, while the broker coordinating "
    "its transactional id is SIGKILLed mid-transaction (and started again), and partition leaders are SIGKILLed "
    "between. The coordinator's successor, the new leader of the id's `__transaction_state` partition, loads the "
    "transaction and finishes it; the producer commits there. The live consumer and the final reader are "
    "read_committed. Every committed record is read back once (committed records are the acknowledged ones), no "
    "read_committed consumer reads a record of an aborted transaction, and the final log holds each transaction "
    "whole or not at all, whatever the producer learned of its outcome (KIP-98).",
    ("txn-coordinator-kill", "leader-kill"), (*PRODUCER_INVARIANTS, "aborted_read", "partial_transaction"),
    duration_s=25.0, transactional=True)
