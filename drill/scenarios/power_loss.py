"""power-loss

Behaviour: the workload of leader-kill while a broker loses power (the fault.power.loss hook: it exits at
once and what it had written but not synced is gone) and is started again; it recovers its logs, truncates by
OffsetForLeaderEpoch and catches up.
Faults: power-loss.
Invariants: those of leader-kill: with acks=all, 3 replicas and min.insync.replicas=2, an acknowledged record
is on two replicas, so one replica's lost tail loses nothing acknowledged.
"""

from epoch_broker.drill.scenarios import Scenario

SCENARIO = Scenario("power-loss", "brokers lose power and their unsynced tail", ("power-loss",), duration_s=25.0)
