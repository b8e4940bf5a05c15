"""kip207-offsets: a leader elected with a lagging high watermark."""

from epoch_broker.drill.scenarios import PRODUCER_INVARIANTS, Scenario

SCENARIO = Scenario(
    "kip207-offsets", "a leader elected with a lagging high watermark",
    "The workload of leader-kill while a follower's high watermark is held back (`fault.high.watermark.held`) and "
    "it is then elected cleanly: a new leader whose high watermark lags its own log end. Until it catches up it "
    "answers a consumer's ListOffsets with OFFSET_NOT_AVAILABLE rather than an older LATEST (KIP-207). Above all "
    "`latest_regression`: the poller's LATEST never goes back across the elections.",
    ("lagging-leader",), PRODUCER_INVARIANTS, duration_s=25.0)
