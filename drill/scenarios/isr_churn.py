"""isr-churn

Behaviour: the workload of leader-kill while a follower stops replicating (the replication-paused hook) for a
few seconds: its leaders drop it from their ISRs after replica.lag.time.max.ms, and take it back once it has
caught up; a paused broker that leads keeps leading.
Faults: replication-paused.
Invariants: those of leader-kill (acks=all with min.insync.replicas=2 and 3 replicas keeps writing with one
follower out).
"""

from epoch_broker.drill.scenarios import Scenario

SCENARIO = Scenario("isr-churn", "followers stop replicating and come back", ("replication-paused",),
                    duration_s=25.0)
