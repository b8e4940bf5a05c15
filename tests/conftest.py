"""Shared pytest settings for the whole test tree."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # `make test` (CI) deselects nightly; `make test-nightly` runs only them.
    config.addinivalue_line("markers", "nightly: long soak variant of a CI test, run by `make test-nightly`")
