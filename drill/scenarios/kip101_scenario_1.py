"""kip101-scenario-1: KIP-101's first scenario."""

from epoch_broker.drill.scenarios import PRODUCER_INVARIANTS, Scenario

SCENARIO = Scenario(
    "kip101-scenario-1", "a restarted follower elected before it caught up (KIP-101)",
    "KIP-101's first scenario, \"high watermark truncation followed by immediate leader election\", on a topic "
    "with 2 replicas and min.insync.replicas=1, written by idempotent acks=all producers. The leader holds back "
    "the high watermark its follower sees (`fault.high.watermark.held`), so the follower's log holds records "
    "acknowledged above its own high watermark; the follower is SIGKILLed and started, and the moment it is back "
    "in the ISR the leader is SIGKILLed, so the follower leads. Before KIP-101 it truncated its log to its high "
    "watermark when it started, and those acknowledged records were gone; here it keeps its log and reconciles by "
    "OffsetForLeaderEpoch. The old leader starts again later and truncates by epoch to the new leader's log. Above "
    "all `lost` (the records above the follower's high watermark survive) and `replicas_consistent` after healing.",
    ("kip101-restart",), (*PRODUCER_INVARIANTS, "replicas_consistent"), partitions=2, replication=2,
    configs={"min.insync.replicas": "1"}, duration_s=25.0)
