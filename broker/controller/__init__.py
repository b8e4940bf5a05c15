"""The controller: owns cluster metadata, writes it as records (broker/metadata/records.py) to a durable
store (`store/`). controller.py routes and commits; the *_control.py managers decide (Kafka's control managers)."""
