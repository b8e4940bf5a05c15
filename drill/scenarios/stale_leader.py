"""stale-leader

Behaviour: a partition's leader stops applying the controller's metadata (fault.metadata.paused) and a
follower is elected cleanly: for a few seconds the old leader still believes it leads in the old epoch, as one
cut off from the controller would; then it learns, truncates what it took meanwhile, and follows. The workload
of leader-kill runs, and an epoch probe (drill/workload.py) sends Produce requests to the old leader as
producers with lagging metadata do:
- carrying the new epoch (KIP-359, this project's tagged field): refused with UNKNOWN_LEADER_EPOCH while the
  old leader is stale, NOT_LEADER_OR_FOLLOWER once it follows; never appended;
- carrying the old epoch: appended by the stale leader (never committed), FENCED_LEADER_EPOCH once it knows;
- carrying none (a stock client): appended by the stale leader (never committed), NOT_LEADER_OR_FOLLOWER once
  it knows.
Faults: stale-leader.
Invariants: those of leader-kill, and `epoch_fenced_produce`: no acknowledged Produce that carried a leader
epoch was written in another. The report's figures count the epoch refusals and NOT_LEADER_OR_FOLLOWER answers.
"""

from epoch_broker.drill.scenarios import Scenario

SCENARIO = Scenario("stale-leader", "an old leader that has not learned of the election (KIP-359)",
                    ("stale-leader",), duration_s=25.0, probe=True)
