"""chaos

Behaviour: the workload of leader-kill, with the epoch probe of stale-leader, under every fault the nemesis
knows, drawn at random from the seed, one after another: SIGKILL and restart of brokers, leaders and the
controller, SIGSTOP past the session timeout, clean restarts, power loss, KIP-101's first scenario, stale
leaders, network partitions and slow links, disk faults, clocks an hour ahead, followers that stop replicating.
Faults: all of drill/nemesis.py's FAULTS but txn-coordinator-kill (its workload has no transactions; the
transactions drill has), the consumer group's (its workload has no consumer group; consumer-group-churn has:
member-join, member-leave, static-restart, and group-coordinator-kill, a plain broker kill here) and two that
lose acknowledged acks=all records by design:
unclean-election (the unclean-truncation scenario drills it, with acks=1), and kip101-divergence, two replicas
losing power one after the other, which loses what neither had fsynced when the ISR held only those two, as in
Kafka (the kip101-scenario-2 drill fsyncs every append to isolate the divergence).
Invariants: those of leader-kill.
"""

from epoch_broker.drill.nemesis import FAULTS
from epoch_broker.drill.scenarios import Scenario

LEFT_OUT = ("unclean-election", "kip101-divergence", "txn-coordinator-kill", "group-coordinator-kill", "member-join",
            "member-leave", "static-restart")

SCENARIO = Scenario("chaos", "every fault, at random from the seed",
                    tuple(name for name in FAULTS if name not in LEFT_OUT), duration_s=40.0, probe=True)
