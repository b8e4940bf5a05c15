"""network-partition: partitions made inside the brokers' own connection layer."""

from epoch_broker.drill.scenarios import PRODUCER_INVARIANTS, Scenario

SCENARIO = Scenario(
    "network-partition", "partitions between brokers, the controller and a client",
    "The workload of leader-kill under network partitions made inside the brokers' own connection layer "
    "(`fault.network.partition`; no tc/netem): a partition's leader cut off from every other node both ways (the "
    "controller fences it and elects another while it still believes it leads: a zombie leader, KIP-320/359); a "
    "broker cut off from the controller only; a leader refusing one follower (asymmetric); a leader refusing the "
    "drill's producer (client-broker). Nothing acknowledged with acks=all and min.insync.replicas=2 is lost on the "
    "minority side.",
    ("isolated-leader", "controller-partition", "one-way-partition", "client-partition"), PRODUCER_INVARIANTS,
    duration_s=30.0)
