"""epoch-broker: a wire-compatible subset of an Apache Kafka broker that keeps Kafka's leader epochs honestly.

The one installed import name. Its layers are folders at the repository root, mapped under this name by the
build (pyproject.toml's package-dir): `epoch_broker.protocol` is `protocol/`, and likewise `storage`, `client`,
`broker`, `drill` and `spark`. In a checkout the same mapping is this folder's committed symlinks
(`epoch_broker/protocol -> ../protocol`, ...), which Python, type checkers and editors follow alike
(docs/layout.md). Floors (tests/test_layering.py): protocol imports nothing of ours; storage only
protocol; client only protocol; broker never drill or spark; spark only client and protocol.
"""

from __future__ import annotations

__version__ = "0.2.0"
