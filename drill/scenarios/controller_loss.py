"""controller-loss: the controller killed or paused."""

from epoch_broker.drill.scenarios import PRODUCER_INVARIANTS, Scenario

SCENARIO = Scenario(
    "controller-loss", "kill or pause the controller",
    "The workload of leader-kill while the controller is SIGKILLed (and started again) or SIGSTOPped (and "
    "resumed); brokers keep serving with the leaders they have, and elections wait for the controller. A "
    "leader-kill between them makes an election the controller must make once back.",
    ("controller-kill", "controller-pause", "leader-kill"), PRODUCER_INVARIANTS, duration_s=25.0)
