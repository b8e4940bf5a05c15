"""isr-churn: followers fall off the ISR and come back."""

from epoch_broker.drill.scenarios import PRODUCER_INVARIANTS, Scenario

SCENARIO = Scenario(
    "isr-churn", "followers fall off the ISR and come back",
    "The workload of leader-kill while followers fall off and come back: a broker stops replicating "
    "(`fault.replication.paused`) for a few seconds, a follower's link to its leader slows down "
    "(`fault.network.delay`), or a leader refuses one follower's fetches (one way): its leaders drop it from their "
    "ISRs after replica.lag.time.max.ms, and take it back once it has caught up; a paused broker that leads keeps "
    "leading. acks=all with min.insync.replicas=2 and 3 replicas keeps writing with one follower out.",
    ("replication-paused", "slow-link", "one-way-partition"), PRODUCER_INVARIANTS, duration_s=25.0)
