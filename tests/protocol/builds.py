"""The two builds of a module compiled where the install can (setup.py: record_scan, record_columns), side by side:
tests hold the compiled one and its source run as plain Python to the same answers."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from types import ModuleType


def pure_python(module: ModuleType) -> ModuleType:
    """`module`'s file loaded as a plain Python module, whatever the installed build is."""
    name = module.__name__.rpartition(".")[2]
    path = module.__file__.rsplit("/", 1)[0] + f"/{name}.py" if module.__file__ else ""
    loader = importlib.machinery.SourceFileLoader(f"{name}_pure", path)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    pure = importlib.util.module_from_spec(spec)
    loader.exec_module(pure)
    return pure


def is_compiled(module: ModuleType) -> bool:
    return (module.__file__ or "").endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
