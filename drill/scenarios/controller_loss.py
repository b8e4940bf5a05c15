"""controller-loss

Behaviour: the workload of leader-kill while the controller is SIGKILLed (and started again) or SIGSTOPped (and
resumed); brokers keep serving with the leaders they have, and elections wait for the controller.
Faults: controller-kill, controller-pause, and a leader-kill between them (an election the controller must
make once back).
Invariants: those of leader-kill.
"""

from epoch_broker.drill.scenarios import Scenario

SCENARIO = Scenario("controller-loss", "kill or pause the controller", ("controller-kill", "controller-pause",
                                                                        "leader-kill"), duration_s=25.0)
