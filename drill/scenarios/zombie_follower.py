"""zombie-follower

Behaviour: the workload of leader-kill while a follower of a partition is SIGSTOPped past the session timeout:
the controller fences it and its leaders drop it from their ISRs; once resumed it still believes in the old
epochs (a zombie) and must truncate and catch up before any leader may take it back (KIP-320: a fenced
replica never re-enters the ISR on a stale view).
Faults: follower-pause.
Invariants: those of leader-kill; replicas_consistent shows the zombie caught up with the same log.
"""

from epoch_broker.drill.scenarios import Scenario

SCENARIO = Scenario("zombie-follower", "a follower paused past its session comes back", ("follower-pause",),
                    duration_s=25.0)
