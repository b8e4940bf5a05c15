"""chaos: every fault the nemesis knows but those `LEFT_OUT` (its behaviour says why)."""

from epoch_broker.drill.nemesis import FAULTS
from epoch_broker.drill.scenarios import PRODUCER_INVARIANTS, Scenario

LEFT_OUT = ("unclean-election", "kip101-divergence", "txn-coordinator-kill", "group-coordinator-kill", "member-join",
            "member-leave", "static-restart", "share-member-crash", "share-member-stall", "driver-kill",
            "executor-kill")

SCENARIO = Scenario(
    "chaos", "every fault, at random from the seed",
    "The workload of leader-kill, with the epoch probe of stale-leader, under every fault the nemesis knows, drawn "
    "at random from the seed, one after another: SIGKILL and restart of brokers, leaders and the controller, "
    "SIGSTOP past the session timeout, clean restarts, power loss, KIP-101's first scenario, stale leaders, network "
    "partitions and slow links, disk faults, clocks an hour ahead, followers that stop replicating. It leaves out "
    "the faults of workloads it does not run (txn-coordinator-kill; the consumer group's member-join, member-leave, "
    "static-restart and group-coordinator-kill; the share group's share-member-crash and share-member-stall; the "
    "Spark pipeline's driver-kill and executor-kill) and the two "
    "that lose acknowledged acks=all records by design: "
    "unclean-election (unclean-truncation drills it, with acks=1) and kip101-divergence (two replicas losing power "
    "one after the other lose what neither had fsynced when the ISR held only those two, as in Kafka; "
    "kip101-scenario-2 fsyncs every append to isolate it).",
    tuple(name for name in FAULTS if name not in LEFT_OUT), (*PRODUCER_INVARIANTS, "epoch_fenced_produce"),
    duration_s=40.0, probe=True)
