"""stale-leader: an old leader that has not learned of the election, probed with Produce requests."""

from epoch_broker.drill.scenarios import PRODUCER_INVARIANTS, Scenario

SCENARIO = Scenario(
    "stale-leader", "an old leader that has not learned of the election (KIP-359)",
    "A partition's leader stops applying the controller's metadata (`fault.metadata.paused`) and a follower is "
    "elected cleanly: for a few seconds the old leader still believes it leads in the old epoch, as one cut off "
    "from the controller would; then it learns, truncates what it took meanwhile, and follows. The workload of "
    "leader-kill runs, and an epoch probe sends Produce requests to the old leader as producers with lagging "
    "metadata do. Carrying the new epoch (KIP-359, this project's tagged field), they are refused with "
    "UNKNOWN_LEADER_EPOCH while the old leader is stale, NOT_LEADER_OR_FOLLOWER once it follows, and never "
    "appended; carrying the old epoch, they are appended by the stale leader (never committed), then refused "
    "FENCED_LEADER_EPOCH once it knows; carrying none (a stock client), appended by the stale leader (never "
    "committed), then refused NOT_LEADER_OR_FOLLOWER. `epoch_fenced_produce`: no acknowledged Produce that carried "
    "a leader epoch was written in another. The report's figures count the epoch refusals and "
    "NOT_LEADER_OR_FOLLOWER answers.",
    ("stale-leader",), (*PRODUCER_INVARIANTS, "epoch_fenced_produce"), duration_s=25.0, probe=True)
