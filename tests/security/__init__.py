"""Real clients over the broker's TLS and SASL listeners."""
