"""Cluster metadata as brokers and the controller share it: the records (`records.py`), the image a broker
applies them to (`image.py`), their encoding as the `__cluster_metadata` log (`metadata_log.py`), and what the
start-up checks know of the controller's stored log (`stored_log.py`)."""
