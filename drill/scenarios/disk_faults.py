"""disk-faults

Behaviour: the workload of leader-kill while disks fail: a partition leader's disk fills up (every write fails
with ENOSPC: produces are answered KAFKA_STORAGE_ERROR, which the idempotent producer retries, and the log stays
as it was), or a follower's fsyncs start failing (the log that meets it goes offline until the broker restarts).
Faults: disk-full, fsync-failing.
Invariants: those of leader-kill: a failed write is never acknowledged, and nothing acknowledged is lost.
"""

from epoch_broker.drill.scenarios import Scenario

SCENARIO = Scenario("disk-faults", "a full disk on a leader, failing fsyncs on a follower",
                    ("disk-full", "fsync-failing"), duration_s=25.0)
