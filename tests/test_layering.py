"""The layering rules (epoch_broker/__init__.py): one import root, and floors between the layer folders.

- Every import of our code goes through `epoch_broker.<layer>`: no bare `protocol`, `storage`, `broker`,
  `client`, `drill` or `spark` import anywhere in the repository (tests and benchmarks included), and no
  relative imports in the product (they would slip past these checks).
- Floors: protocol imports nothing of ours; storage only protocol; client only protocol; broker never drill
  or spark; spark only client and protocol. A module named in a string (importlib, HANDLER_PACKAGES) counts.
- protocol/ and storage/ are sans-IO: no event loop, no sockets.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("protocol", "storage", "client", "broker", "drill", "spark")
ALLOWED: dict[str, set[str]] = {
    "protocol": {"protocol"},
    "storage": {"storage", "protocol"},
    "client": {"client", "protocol"},
    "broker": {"broker", "storage", "client", "protocol"},
    "drill": {"drill", "broker", "storage", "client", "protocol"},
    "spark": {"spark", "client", "protocol"},
}
IO_MODULES = {"asyncio", "uvloop", "socket", "selectors"}
MODULE_STRING = re.compile(r"^epoch_broker\.(\w+)(\.\w+)*$")
SKIP_DIRS = {".venv", "node_modules", ".git", "build"}


def python_files(folder: Path) -> list[Path]:
    return [p for p in sorted(folder.rglob("*.py")) if not SKIP_DIRS.intersection(p.relative_to(ROOT).parts)]


def imports_of(path: Path) -> list[tuple[str, int]]:
    """(module, level) of every import in `path`, and of every string naming an epoch_broker module."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, 0) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.module or "", node.level))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_STRING.match(node.value):
            found.append((node.value, 0))
    return found


def our_layer(module: str) -> str | None:
    """The layer an absolute import of ours reaches (None for the import root itself and for others' code)."""
    parts = module.split(".")
    if parts[0] == "epoch_broker" and len(parts) > 1 and parts[1] in LAYERS:
        return parts[1]
    return None


def test_no_bare_layer_import_anywhere_in_the_repository() -> None:
    offenders = [(str(path.relative_to(ROOT)), module) for path in python_files(ROOT)
                 for module, level in imports_of(path) if level == 0 and module.split(".")[0] in LAYERS]
    assert offenders == []


@pytest.mark.parametrize("layer", [*LAYERS, "epoch_broker"])
def test_product_code_uses_no_relative_imports(layer: str) -> None:
    offenders = [(str(path.relative_to(ROOT)), module) for path in python_files(ROOT / layer)
                 for module, level in imports_of(path) if level > 0] if (ROOT / layer).is_dir() else []
    assert offenders == []


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_imports_only_the_layers_below_it(layer: str) -> None:
    folder = ROOT / layer
    if layer != "spark":  # spark/ lands with the PySpark data source; every other layer exists
        assert folder.is_dir()
    offenders = []
    for path in python_files(folder) if folder.is_dir() else []:
        for module, _ in imports_of(path):
            reached = our_layer(module)
            if module == "epoch_broker" or module.startswith("epoch_broker.__") or (
                    reached is not None and reached not in ALLOWED[layer]):
                offenders.append((str(path.relative_to(ROOT)), module))
    assert offenders == []


@pytest.mark.parametrize("layer", ["protocol", "storage"])
def test_sans_io_layers_never_import_the_event_loop_or_sockets(layer: str) -> None:
    offenders = [(str(path.relative_to(ROOT)), module) for path in python_files(ROOT / layer)
                 for module, _ in imports_of(path) if module.split(".")[0] in IO_MODULES]
    assert offenders == []


def test_the_checks_see_what_they_forbid(tmp_path: Path) -> None:
    """The scanner itself: a bare import, a relative import and a module named in a string are all seen."""
    sample = tmp_path / "sample.py"
    sample.write_text("import broker.app\nfrom . import x\nname = 'epoch_broker.drill.admin'\n")
    assert imports_of(sample) == [("broker.app", 0), ("", 1), ("epoch_broker.drill.admin", 0)]
    assert our_layer("epoch_broker.drill.admin") == "drill"
    assert our_layer("epoch_broker") is None
