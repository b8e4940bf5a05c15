"""The controller: owns cluster metadata, writes it as records to a durable store (see records.py)."""
