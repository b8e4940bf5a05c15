"""leader-kill: the base drill, whose workload and invariants most others keep."""

from epoch_broker.drill.scenarios import PRODUCER_INVARIANTS, Scenario

SCENARIO = Scenario(
    "leader-kill", "SIGKILL partition leaders, restart them",
    "An idempotent acks=all producer writes to 3 partitions (replication 3, min.insync.replicas 2) while the "
    "leader of a partition is SIGKILLed and started again after a few seconds, again and again. Nothing "
    "acknowledged may be lost or duplicated, offsets stay consistent and monotonic, leader epochs never go back in "
    "any broker's Metadata (KIP-232) and LATEST never goes back (KIP-207).",
    ("leader-kill",), PRODUCER_INVARIANTS, duration_s=25.0)
