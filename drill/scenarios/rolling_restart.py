"""rolling-restart

Behaviour: every broker is restarted cleanly in turn (SIGTERM, start, ready), as an upgrade does, a few seconds
apart; the controller moves leadership off each as it stops.
Faults: restart, broker-0 to broker-N in order (the seed only shifts the start of the schedule).
Invariants: those of leader-kill.
"""

import random

from epoch_broker.drill.nemesis import ScheduledFault
from epoch_broker.drill.scenarios import Scenario


def plan(seed: int, duration_s: float, brokers: list[str], partitions: int) -> list[ScheduledFault]:
    start = random.Random(seed).uniform(1.0, 3.0)
    step = max(2.0, (duration_s - start) / max(1, len(brokers)))
    return [ScheduledFault(round(start + i * step, 2), "restart", name, 0.0) for i, name in enumerate(brokers)
            if start + i * step < duration_s]


SCENARIO = Scenario("rolling-restart", "restart every broker cleanly in turn", ("restart",), duration_s=25.0,
                    plan=plan)
