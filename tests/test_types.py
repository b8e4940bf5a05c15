"""The type checker in CI: mypy on the checkout with the project's settings (pyproject.toml's [tool.mypy]: strict for
protocol/, storage/, client/, broker/replica/ and broker/groups/, the normal level elsewhere).

It sees the real imports through the committed symlinks epoch_broker/<layer> -> ../<layer> (docs/layout.md), the
same mapping editors follow. Its cache is build/mypy-cache: a second run checks only what changed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.test_layering import LAYERS

ROOT = Path(__file__).resolve().parents[1]


def test_each_layer_folder_is_linked_under_epoch_broker() -> None:
    # A checkout without the links (git's core.symlinks=false writes them as text files) resolves no import between
    # the layers for mypy or an editor; a new layer needs its link.
    wrong = [layer for layer in LAYERS if (ROOT / layer).is_dir()
             and not ((ROOT / "epoch_broker" / layer).is_symlink()
                      and (ROOT / "epoch_broker" / layer).readlink() == Path("..", layer))]
    assert wrong == [], "in epoch_broker/: ln -s ../<layer> <layer>"


def test_mypy_passes_on_the_checkout() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert result.returncode == 0, result.stdout + result.stderr
