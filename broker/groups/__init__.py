"""The classic consumer group coordinator's parts: group state (`classic_group.py`) and the record formats of
`__consumer_offsets` (`records.py`). `broker/groups/coordinator.py` wires them to the broker."""
