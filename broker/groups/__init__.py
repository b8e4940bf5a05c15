"""The group coordinator (`coordinator.py`) and, per `__consumer_offsets` partition, its shard (`shard.py`): the
groups (`group_metadata_manager.py`; the `Group` interface in `group.py`, classic groups in `classic_group.py` and
their protocol in `classic_protocol.py`) and their offsets (`offset_metadata_manager.py`), written through
`runtime.py` in the record formats of `records.py`."""
