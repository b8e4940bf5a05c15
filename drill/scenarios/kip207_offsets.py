"""kip207-offsets

Behaviour: the workload of leader-kill while a follower's high watermark is held back (the
fault.high.watermark.held hook) and it is then elected cleanly: a new leader whose high watermark lags its own
log end. Until it catches up it answers a consumer's ListOffsets with OFFSET_NOT_AVAILABLE rather than an
older LATEST (KIP-207).
Faults: lagging-leader.
Invariants: those of leader-kill, and above all latest_regression: the poller's LATEST never goes back across
the elections.
"""

from epoch_broker.drill.scenarios import Scenario

SCENARIO = Scenario("kip207-offsets", "a leader elected with a lagging high watermark", ("lagging-leader",),
                    duration_s=25.0)
