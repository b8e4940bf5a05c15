"""zombie-follower: a follower paused past its session."""

from epoch_broker.drill.scenarios import PRODUCER_INVARIANTS, Scenario

SCENARIO = Scenario(
    "zombie-follower", "a follower paused past its session comes back",
    "The workload of leader-kill while a follower of a partition is SIGSTOPped past the session timeout: the "
    "controller fences it and its leaders drop it from their ISRs; once resumed it still believes in the old "
    "epochs (a zombie) and must truncate and catch up before any leader may take it back (KIP-320: a fenced "
    "replica never re-enters the ISR on a stale view). `replicas_consistent` shows the zombie caught up with the "
    "same log.",
    ("follower-pause",), (*PRODUCER_INVARIANTS, "replicas_consistent"), duration_s=25.0)
