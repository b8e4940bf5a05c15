"""isr-churn

Behaviour: the workload of leader-kill while followers fall off and come back: a broker stops replicating (the
replication-paused hook) for a few seconds, a follower's link to its leader slows down (fault.network.delay),
or a leader refuses one follower's fetches (one way): its leaders drop it from their ISRs after
replica.lag.time.max.ms, and take it back once it has caught up; a paused broker that leads keeps leading.
Faults: replication-paused, slow-link, one-way-partition.
Invariants: those of leader-kill (acks=all with min.insync.replicas=2 and 3 replicas keeps writing with one
follower out).
"""

from epoch_broker.drill.scenarios import Scenario

SCENARIO = Scenario("isr-churn", "followers fall off the ISR and come back",
                    ("replication-paused", "slow-link", "one-way-partition"), duration_s=25.0)
