"""disk-faults: full disks and failing fsyncs."""

from epoch_broker.drill.scenarios import PRODUCER_INVARIANTS, Scenario

SCENARIO = Scenario(
    "disk-faults", "a full disk on a leader, failing fsyncs on a follower",
    "The workload of leader-kill while disks fail: a partition leader's disk fills up (every write fails with "
    "ENOSPC: produces are answered KAFKA_STORAGE_ERROR, which the idempotent producer retries, and the log stays "
    "as it was), or a follower's fsyncs start failing (the log that meets it goes offline until the broker "
    "restarts). A failed write is never acknowledged, and nothing acknowledged is lost.",
    ("disk-full", "fsync-failing"), PRODUCER_INVARIANTS, duration_s=25.0)
