"""leader-kill

Behaviour: an idempotent acks=all producer writes to 3 partitions (replication 3, min.insync.replicas 2) while
the leader of a partition is SIGKILLed and started again after a few seconds, again and again.
Faults: leader-kill (resolved to the partition's leader when applied).
Invariants: nothing acknowledged is lost or duplicated, offsets are consistent and monotonic, leader epochs
never go back in any broker's Metadata (KIP-232), LATEST never goes back (KIP-207).
"""

from epoch_broker.drill.scenarios import Scenario

SCENARIO = Scenario("leader-kill", "SIGKILL partition leaders, restart them", ("leader-kill",), duration_s=25.0)
