"""The transaction coordinator's parts: the record formats of `__transaction_state` (`records.py`) and the markers
it writes to a transaction's partitions (`markers.py`). `broker/transactions/coordinator.py` wires them to the
broker."""
