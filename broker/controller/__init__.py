"""The controller: owns cluster metadata, writes it as records (broker/metadata/records.py) to a durable
store (`store/`)."""
