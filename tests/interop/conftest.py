"""Fixtures of the interop suite: one broker process per test module, distinct topics per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.interop.support import Target, run_target


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    with run_target(tmp_path_factory.mktemp("broker")) as target:
        yield target
