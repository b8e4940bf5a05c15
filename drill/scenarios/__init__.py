"""The drills `epoch-broker drill SCENARIO` runs: one module per scenario, each with a header saying its
Behaviour / Faults / Invariants (as the API handlers' headers say theirs), registered here by name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from epoch_broker.drill.nemesis import ScheduledFault, make_schedule


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    faults: tuple[str, ...]  # what the nemesis may draw from (drill/nemesis.py's FAULTS)
    partitions: int = 3
    replication: int = 3
    configs: dict[str, str] = field(default_factory=lambda: {"min.insync.replicas": "2"})
    duration_s: float = 30.0
    acks: str = "all"  # the producers': "all" (idempotent) or "1" (where the scenario allows loss)
    allow_acks1_loss: bool = False
    unclean: bool = False  # elects uncleanly on purpose: LATEST may go back where that truncated (not KIP-207's case)
    probe: bool = False  # runs the epoch probe (drill/workload.py): Produce to stale leaders, KIP-359
    transactional: bool = False  # the producer writes transactions (drill/workload.py's TransactionalProducer)
    group_members: int = 0  # members of the workload's consumer group at the start (drill/workload.py's ConsumerGroup)
    group_protocol: str = "classic"  # the consumers' group.protocol unless --group-protocol says
    # a scenario with a fixed shape (a rolling restart) plans its own schedule; others draw from `faults`
    plan: Callable[[int, float, list[str], int], list[ScheduledFault]] | None = None

    def schedule(self, seed: int, duration_s: float, brokers: list[str]) -> list[ScheduledFault]:
        if self.plan is not None:
            return self.plan(seed, duration_s, brokers, self.partitions)
        return make_schedule(list(self.faults), seed, duration_s, brokers, self.partitions)


def scenarios() -> dict[str, Scenario]:
    from epoch_broker.drill.scenarios import (
        chaos,
        consumer_group_churn,
        controller_loss,
        disk_faults,
        isr_churn,
        kip101_scenario_1,
        kip101_scenario_2,
        kip207_offsets,
        leader_kill,
        network_partition,
        power_loss,
        rolling_restart,
        stale_leader,
        transactions,
        unclean_truncation,
        zombie_follower,
    )

    return {module.SCENARIO.name: module.SCENARIO for module in (
        leader_kill, zombie_follower, kip101_scenario_1, kip101_scenario_2, unclean_truncation, stale_leader,
        kip207_offsets, isr_churn, controller_loss, rolling_restart, power_loss, disk_faults, network_partition,
        transactions, consumer_group_churn, chaos)}
