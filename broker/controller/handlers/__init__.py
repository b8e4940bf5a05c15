"""Handlers a controller-only process serves (the topic APIs are shared with brokers: broker/handlers/)."""
