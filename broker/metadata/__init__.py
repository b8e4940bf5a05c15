"""Cluster metadata as brokers and the controller share it: the records (`records.py`), the image a broker
applies them to (`image.py`), and their encoding as the `__cluster_metadata` log (`metadata_log.py`)."""
