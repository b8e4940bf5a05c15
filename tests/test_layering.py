"""The layering rules: protocol/ is sans-IO and self-contained; storage/ has no event loop or sockets."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
IO_MODULES = {"asyncio", "uvloop", "socket", "selectors"}


def imported_modules(package: str) -> list[tuple[str, str]]:
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found += [(str(path.relative_to(ROOT)), alias.name.split(".")[0]) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.append((str(path.relative_to(ROOT)), node.module.split(".")[0]))
    return found


@pytest.mark.parametrize("package", ["protocol", "storage"])
def test_package_never_imports_the_event_loop_or_sockets(package: str) -> None:
    offenders = [(path, mod) for path, mod in imported_modules(package) if mod in IO_MODULES]
    assert offenders == []


def test_protocol_imports_neither_storage_nor_broker() -> None:
    offenders = [(path, mod) for path, mod in imported_modules("protocol") if mod in {"storage", "broker"}]
    assert offenders == []


def test_storage_does_not_import_the_broker() -> None:
    offenders = [(path, mod) for path, mod in imported_modules("storage") if mod == "broker"]
    assert offenders == []
