"""A broker's fault hooks: failures a drill switches on at run time, part of the product (docs/cluster.md).

They are set like dynamic broker configs, with IncrementalAlterConfigs on resource type 4 named by the node
id (`epoch-broker admin fault`), and read by the code they affect:
- `fault.replication.paused`: the replica fetchers stop fetching (`broker/replica/replica_fetcher.py`).
- `fault.high.watermark.held`: as a leader, follower fetches see the high watermark frozen where it was when
  the hold began (`broker/handlers/fetch.py`), so followers do not learn that records were committed.
- `fault.metadata.paused`: the broker stops applying the controller's metadata log (`broker/controller/
  remote.py`; it still heartbeats), so it keeps acting on the leaderships and epochs it knew: a stale leader,
  as behind a network partition from the controller (KIP-320, KIP-359 drills).
- `fault.power.loss`: every log loses its unflushed tail and the process exits at once (status 137).
"""

from __future__ import annotations

from dataclasses import dataclass

REPLICATION_PAUSED = "fault.replication.paused"
HIGH_WATERMARK_HELD = "fault.high.watermark.held"
METADATA_PAUSED = "fault.metadata.paused"
POWER_LOSS = "fault.power.loss"
POWER_LOSS_EXIT_STATUS = 137


@dataclass(slots=True)
class BrokerFaults:
    replication_paused: bool = False
    high_watermark_held: bool = False
    metadata_paused: bool = False
