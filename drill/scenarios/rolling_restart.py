"""rolling-restart: its plan restarts broker-0 to broker-N in order, evenly spaced over the duration; the seed only
shifts the start of the schedule."""

import random

from epoch_broker.drill.nemesis import ScheduledFault
from epoch_broker.drill.scenarios import PRODUCER_INVARIANTS, Scenario


def plan(seed: int, duration_s: float, brokers: list[str], partitions: int) -> list[ScheduledFault]:
    start = random.Random(seed).uniform(1.0, 3.0)
    step = max(2.0, (duration_s - start) / max(1, len(brokers)))
    return [ScheduledFault(round(start + i * step, 2), "restart", name, 0.0) for i, name in enumerate(brokers)
            if start + i * step < duration_s]


SCENARIO = Scenario(
    "rolling-restart", "restart every broker cleanly in turn",
    "The workload of leader-kill while every broker is restarted cleanly in turn (SIGTERM, start, ready), as an "
    "upgrade does, a few seconds apart, broker-0 to broker-N in order; the controller moves leadership off each as "
    "it stops.",
    ("restart",), PRODUCER_INVARIANTS, duration_s=25.0, plan=plan)
