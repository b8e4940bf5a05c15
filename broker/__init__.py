"""Only what runs inside a broker or controller process: the asyncio server, handlers, partitions and
replication, the metadata image, groups, the controller. `app.py` wires them; the CLI above it is
`epoch_broker/__main__.py`."""
