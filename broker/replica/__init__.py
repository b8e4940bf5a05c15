"""Partitions on this broker: `partition.py` (the one writer of a partition's state and the one place a
per-partition rule is decided), `replica_manager.py` (routes requests, follows metadata, schedules ISR
changes) and `replica_fetcher.py` (the follower side of replication)."""
