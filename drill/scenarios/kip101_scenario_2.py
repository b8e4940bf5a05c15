"""kip101-scenario-2: KIP-101's second scenario."""

from epoch_broker.drill.scenarios import PRODUCER_INVARIANTS, Scenario

SCENARIO = Scenario(
    "kip101-scenario-2", "two replicas lose power; the shorter log leads (KIP-101)",
    "KIP-101's second scenario, \"replica divergence on restart after multiple hard failures\", on a topic with 2 "
    "replicas, min.insync.replicas=1 and flush.messages=1 (every append fsynced, so that losing power loses no "
    "acknowledged record and the drill isolates the divergence). The follower stops replicating for a moment, so "
    "the leader holds records nobody else has (unacknowledged: acks=all waits for the follower); the leader loses "
    "power, the follower is elected, loses power too, and starts first: it leads again and takes new records at "
    "the offsets of the old leader's unreplicated tail. Before KIP-101 the old leader, started later, kept that "
    "tail (its high watermark was below it, but nothing told it the records differ) and the replicas diverged for "
    "good; here it asks OffsetForLeaderEpoch for its last epoch and truncates there. Above all "
    "`replicas_consistent`: after healing both replicas hold the same batches and epoch checkpoints below the high "
    "watermark.",
    ("kip101-divergence",), (*PRODUCER_INVARIANTS, "replicas_consistent"), partitions=2, replication=2,
    configs={"min.insync.replicas": "1", "flush.messages": "1"}, duration_s=25.0)
