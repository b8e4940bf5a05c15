"""unclean-truncation: an unclean election on purpose, with acks=1."""

from epoch_broker.drill.scenarios import PRODUCER_INVARIANTS, Scenario

SCENARIO = Scenario(
    "unclean-truncation", "an unclean election truncates records a consumer read",
    "A topic with 2 replicas, min.insync.replicas=1 and unclean.leader.election.enable=true, written with acks=1. "
    "A follower stops replicating while the leader takes writes alone (the ISR shrinks to the leader and the high "
    "watermark moves on without the follower), and the live consumer reads those records; then the follower is "
    "elected uncleanly and the leader truncates them (KIP-320's case). acks=1 records may be lost here, and LATEST "
    "may go back where the election truncated (KIP-207 is for clean elections): both are counted and shown, not "
    "failures. Everything else holds, and above all `undetected_truncation`: the live consumer, which had read the "
    "truncated records, must have reported the truncation (librdkafka validates its position with "
    "OffsetForLeaderEpoch after the leader change).",
    ("unclean-election",), (*PRODUCER_INVARIANTS, "undetected_truncation"),
    partitions=2, replication=2, configs={"min.insync.replicas": "1", "unclean.leader.election.enable": "true"},
    duration_s=25.0, acks="1", allow_acks1_loss=True, unclean=True)
