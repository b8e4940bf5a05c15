"""share-group: its plan holds each of its faults at least once (two leader kills), in an order drawn from the
seed, then more while the duration lasts, each a gap apart in which the members settle again."""

import random

from epoch_broker.drill.nemesis import FAULTS, SHARE_GROUP, ScheduledFault
from epoch_broker.drill.scenarios import PRODUCER_INVARIANTS, Scenario

MEMBER_FAULTS = ("share-member-crash", "share-member-stall")
KILL = "leader-kill"
GAP_S = (1.0, 2.5)


def plan(seed: int, duration_s: float, brokers: list[str], partitions: int) -> list[ScheduledFault]:
    rng = random.Random(seed)
    faults = [*MEMBER_FAULTS, KILL, KILL]
    rng.shuffle(faults)
    schedule: list[ScheduledFault] = []
    at = rng.uniform(*GAP_S)
    while True:
        name = faults[len(schedule)] if len(schedule) < len(faults) else rng.choice((*MEMBER_FAULTS, KILL))
        length = round(rng.uniform(*FAULTS[name].durations), 2)
        if at + length > duration_s:
            return schedule
        target = f"leader:{rng.randrange(partitions)}" if name == KILL else SHARE_GROUP
        schedule.append(ScheduledFault(round(at, 2), name, target, length))
        at += length + rng.uniform(*GAP_S)


SCENARIO = Scenario(
    "share-group", "share consumers acknowledge, release and crash mid-batch while leaders are killed",
    "The producer of leader-kill writes to one partition, which a share group of three members reads (KIP-932: "
    "confluent-kafka ShareConsumers in explicit acknowledgement mode, each a process of its own), the group's "
    "configs set on its GROUP resource: `share.auto.offset.reset=earliest`, a 3 s "
    "`share.record.lock.duration.ms` and `share.delivery.count.limit=4`. Members ACCEPT most records, RELEASE "
    "some once, REJECT a few and RELEASE a poison record at every delivery, by the record's value, so every member "
    "treats a record alike. Members are SIGKILLed mid-batch holding acquired records (a replacement joins), "
    "stalled with SIGSTOP past their records' locks (their later acknowledgements fail), and the partition's "
    "leader is SIGKILLed and started again: each at least once, the leader twice, in an order drawn from the seed. "
    "Every record of the final log is accepted or rejected exactly once, or archived at the delivery count limit; "
    "no acquisition lock (one delivery count of a record) is given to two deliveries, and a record's delivery count "
    "never goes back or passes the limit (drill/checker.py says why each rule holds under Kafka's at-least-once "
    "redelivery). The member faults alone: `--faults share-member-crash,share-member-stall`.",
    (*MEMBER_FAULTS, KILL),
    (*PRODUCER_INVARIANTS, "share_accepted_twice", "share_lost", "share_locked_twice", "share_delivery_count"),
    partitions=1, duration_s=30.0, share_members=3, plan=plan)
