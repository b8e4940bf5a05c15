"""The drills `epoch-broker drill SCENARIO` runs: one module per scenario, each declaring its one `SCENARIO` row
(name, summary, behaviour, the nemesis faults it draws from, the checker's invariants it puts to the test, and
its options: topic shape, duration, producer, consumer group), registered here by name in `scenarios()`.

Everything else is derived from the rows: the CLI's list of scenarios (drill/runner.py) and docs/drills.md
(`render_reference`, `make docs`), which also lists the nemesis faults (drill/nemesis.py's FAULTS) and the
checker's invariants (drill/checker.py's INVARIANTS). A module's docstring says only what its row cannot: why a
planned schedule has its shape.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from epoch_broker.broker.reference import anchor, table
from epoch_broker.drill.checker import INVARIANTS
from epoch_broker.drill.nemesis import FAULTS, ScheduledFault, make_schedule

# What every drill's producer workload is checked for above all (leader-kill's, and most scenarios' base)
PRODUCER_INVARIANTS = ("lost", "duplicated", "inconsistent_offsets", "non_monotonic", "epoch_regression",
                       "latest_regression")


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str  # one line: the CLI's list, the docs' table
    behaviour: str  # what the drill does and why its invariants hold, for docs/drills.md
    faults: tuple[str, ...]  # what the nemesis may draw from (drill/nemesis.py's FAULTS)
    invariants: tuple[str, ...]  # the checker's invariants its faults put to the test (every drill checks them all)
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
    pipeline: bool = False  # runs a Spark streaming query from the topic to OUTPUT_TOPIC (drill/pipeline.py)
    share_members: int = 0  # members of the workload's share group (drill/share_workload.py's ShareGroup)
    # a scenario with a fixed shape (a rolling restart) plans its own schedule; others draw from `faults`
    plan: Callable[[int, float, list[str], int], list[ScheduledFault]] | None = None

    def schedule(self, seed: int, duration_s: float, brokers: list[str],
                 faults: tuple[str, ...] | None = None) -> list[ScheduledFault]:
        """The seeded schedule; with `faults` (some of the scenario's: `--faults`), of those only: drawn from them,
        or a planned schedule without the others."""
        if faults is not None and (unknown := [name for name in faults if name not in self.faults]):
            raise ValueError(f"{self.name} draws no fault {', '.join(unknown)} (its faults: {', '.join(self.faults)})")
        if self.plan is not None:
            return [fault for fault in self.plan(seed, duration_s, brokers, self.partitions)
                    if faults is None or fault.fault in faults]
        return make_schedule(list(faults or self.faults), seed, duration_s, brokers, self.partitions)


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
        share_group,
        spark_pipeline,
        stale_leader,
        transactions,
        unclean_truncation,
        zombie_follower,
    )

    return {module.SCENARIO.name: module.SCENARIO for module in (
        leader_kill, zombie_follower, kip101_scenario_1, kip101_scenario_2, unclean_truncation, stale_leader,
        kip207_offsets, isr_churn, controller_loss, rolling_restart, power_loss, disk_faults, network_partition,
        transactions, consumer_group_churn, share_group, spark_pipeline, chaos)}


def _options(scenario: Scenario) -> str:
    """The scenario's options as a sentence: topic, duration, producer, consumer group, probe."""
    configs = ", ".join(f"`{key}={value}`" for key, value in scenario.configs.items())
    parts = [f"{scenario.partitions} partitions of {scenario.replication} replicas" + (f", {configs}" if configs
                                                                                        else ""),
             f"{scenario.duration_s:g} s of faults (`--duration`)",
             "a transactional producer" if scenario.transactional else
             "an idempotent acks=all producer" if scenario.acks == "all" else f"an acks={scenario.acks} producer"]
    if scenario.allow_acks1_loss:
        parts.append("lost acks=1 records counted, not failed")
    if scenario.unclean:
        parts.append("LATEST going back where an unclean election truncated counted, not failed")
    if scenario.group_members:
        parts.append(f"a consumer group of {scenario.group_members} members, `group.protocol={scenario.group_protocol}`"
                     " (`--group-protocol`)")
    if scenario.share_members:
        parts.append(f"a share group of {scenario.share_members} members (confluent-kafka ShareConsumers, explicit "
                     "acknowledgement)")
    if scenario.probe:
        parts.append("the epoch probe (Produce to stale leaders)")
    if scenario.pipeline:
        parts.append("a Spark streaming query (`local-cluster[2,1,1024]`, the [spark] extra and Java) from the topic "
                     "to `drill-output`, exactly once")
    return "; ".join(parts)


def render_reference() -> str:
    """docs/drills.md: the scenarios, each one's section, then the nemesis faults and the checker's invariants."""
    known = scenarios()
    summary = table(("scenario", "what it does", "faults"), (
        (f"[`{s.name}`]({anchor(s.name)})", s.summary, ", ".join(f"`{name}`" for name in s.faults))
        for s in known.values()))
    sections = "\n\n".join(f"""## {s.name}

{s.summary[0].upper()}{s.summary[1:]}. {s.behaviour}

- Faults: {", ".join(f"`{name}`" for name in s.faults)}.
- Invariants it puts to the test: {", ".join(f"`{name}`" for name in s.invariants)}.
- Options: {_options(s)}.""" for s in known.values())
    faults = table(("fault", "target", "lasts (s)", "what it does"), (
        (f"`{name}`", kind.targets, "-".join(dict.fromkeys(f"{bound:g}" for bound in kind.durations)),
         kind.description) for name, kind in FAULTS.items()))
    invariants = table(("invariant", "a failure is"), ((f"`{name}`", doc) for name, doc in INVARIANTS.items()))
    return f"""# Drill scenarios

Every scenario `epoch-broker drill SCENARIO` runs: what it does, the faults it draws from, the invariants it puts
to the test and its options. How to run, replay and read a drill is in [failover-drills.md](failover-drills.md).

{summary}

Every drill's checker checks every [invariant](#invariants); each scenario names those its faults aim at.

{sections}

## Faults

What the nemesis can do to a cluster; a scenario draws its schedule from its own list, seeded (`--seed`). A
target `leader` or `follower` (of a partition), `txn-coordinator` or `group-coordinator` is resolved when the
fault is applied; `group` is a member of the drill's consumer group, `spark-driver` and `spark-executor` the
spark-pipeline drill's Spark job. The broker's fault hooks they set are in
[faults.md](faults.md).

{faults}

## Invariants

What `epoch-broker drill check HISTORY_DIR` (drill/checker.py) counts in a history, each shown with up to 10
examples; a drill fails when any is found (`unseen` is shown, never failed).

{invariants}
"""
