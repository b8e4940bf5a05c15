"""consumer-group-churn: its plan holds each of the four faults at least once, in an order drawn from the seed (one
or two coordinator kills), then more member faults while the duration lasts, each a gap apart in which a
rebalance settles."""

import random

from epoch_broker.drill.nemesis import FAULTS, GROUP, GROUP_COORDINATOR, ScheduledFault
from epoch_broker.drill.scenarios import PRODUCER_INVARIANTS, Scenario

MEMBER_FAULTS = ("member-join", "member-leave", "static-restart")
KILL = "group-coordinator-kill"
GAP_S = (1.0, 2.5)  # between faults: a rebalance settles within it


def plan(seed: int, duration_s: float, brokers: list[str], partitions: int) -> list[ScheduledFault]:
    rng = random.Random(seed)
    faults = [*MEMBER_FAULTS, *[KILL] * rng.choice((1, 2))]
    rng.shuffle(faults)
    schedule: list[ScheduledFault] = []
    at = rng.uniform(*GAP_S)
    while True:
        name = faults[len(schedule)] if len(schedule) < len(faults) else rng.choice(MEMBER_FAULTS)
        length = round(rng.uniform(*FAULTS[name].durations), 2)
        if at + length > duration_s:
            return schedule
        schedule.append(ScheduledFault(round(at, 2), name, GROUP_COORDINATOR if name == KILL else GROUP, length))
        at += length + rng.uniform(*GAP_S)


SCENARIO = Scenario(
    "consumer-group-churn", "members join, leave and restart while the group coordinator is killed",
    "The workload of leader-kill plus a consumer group of three members (confluent-kafka consumers subscribed to "
    "the 6-partition topic, one of them static with a `group.instance.id`), with `group.protocol=consumer` "
    "(KIP-848) unless `--group-protocol classic` says otherwise. Members join and leave cleanly, the static member "
    "closes and a new instance of it starts within its session, and the broker coordinating the group (the leader "
    "of its `__consumer_offsets` partition, found with FindCoordinator) is SIGKILLed once or twice and started "
    "again: the next leader of that partition loads the group and its members carry on. Each of the four faults "
    "comes at least once, in an order drawn from the seed, then more member faults while the duration lasts. No "
    "member's successive polls of a partition within one assignment skip an offset of the log or go back, no "
    "partition is held by two live members at once (drill/checker.py says why the rule holds for the classic "
    "protocols too), and the group's members together read every record of the final log.",
    (*MEMBER_FAULTS, KILL), (*PRODUCER_INVARIANTS, "poll_skip", "nonmonotonic_poll", "owned_twice", "unconsumed"),
    partitions=6, duration_s=30.0, group_members=3, group_protocol="consumer", plan=plan)
