"""Shared pytest settings for the whole test tree."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # Longer variants of tests (nightly-style); `make test-fast` deselects them with -m "not slow".
    config.addinivalue_line("markers", "slow: long-running variant, deselect with -m 'not slow'")
