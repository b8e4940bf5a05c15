"""epoch-broker: a wire-compatible subset of an Apache Kafka broker that keeps Kafka's leader epochs honestly.

The one installed import name. Its layers are folders at the repository root, mapped under this name by the
build (pyproject.toml's package-dir): `epoch_broker.protocol` is `protocol/`, and likewise `storage`, `client`,
`broker`, `drill` and `spark`. Floors (tests/test_layering.py): protocol imports nothing of ours; storage only
protocol; client only protocol; broker never drill or spark; spark only client and protocol.
"""

from __future__ import annotations

from pathlib import Path

__version__ = "0.2.0"

_HERE = Path(__file__).resolve().parent
if not (_HERE / "protocol").is_dir() and (_HERE.parent / "protocol" / "__init__.py").is_file():
    # Run from a checkout without an install: the layer folders are this folder's siblings. (An installed wheel
    # has them inside this folder; an editable install's finder maps them, and finds the same files.)
    __path__.append(str(_HERE.parent))
