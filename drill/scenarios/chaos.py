"""chaos

Behaviour: the workload of leader-kill under every fault the nemesis knows, drawn at random from the seed,
one after another: SIGKILL and restart of brokers, leaders and the controller, SIGSTOP past the session
timeout, clean restarts, followers that stop replicating.
Faults: all of drill/nemesis.py's FAULTS but unclean-election (which loses acknowledged acks=all records by
design: the unclean-truncation scenario drills it, with acks=1).
Invariants: those of leader-kill.
"""

from epoch_broker.drill.nemesis import FAULTS
from epoch_broker.drill.scenarios import Scenario

SCENARIO = Scenario("chaos", "every fault, at random from the seed",
                    tuple(name for name in FAULTS if name != "unclean-election"), duration_s=40.0)
