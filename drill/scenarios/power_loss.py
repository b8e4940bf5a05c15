"""power-loss: brokers lose power and their unsynced tail."""

from epoch_broker.drill.scenarios import PRODUCER_INVARIANTS, Scenario

SCENARIO = Scenario(
    "power-loss", "brokers lose power and their unsynced tail",
    "The workload of leader-kill while a broker loses power (`fault.power.loss`: it exits at once and what it had "
    "written but not synced is gone) and is started again; it recovers its logs, truncates by OffsetForLeaderEpoch "
    "and catches up. With acks=all, 3 replicas and min.insync.replicas=2, an acknowledged record is on two "
    "replicas, so one replica's lost tail loses nothing acknowledged.",
    ("power-loss",), (*PRODUCER_INVARIANTS, "replicas_consistent"), duration_s=25.0)
