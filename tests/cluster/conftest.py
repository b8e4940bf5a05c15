"""The `cluster` fixture: a controller and three brokers as real processes (tests/cluster/support.py), stopped
at teardown; when the test failed, the tail of every process's log is printed (shown with the failure).

`@pytest.mark.cluster(brokers=N, overrides={...}, controllers=N, zookeeper="embedded")` changes what it starts.
Parametrizing a test by `metadata_store` ("file", "zookeeper") runs it with each controller store: "zookeeper"
is three controllers sharing an embedded ZooKeeper.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.support import Cluster, start_cluster


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cluster(brokers=3, overrides=None, controllers=1, zookeeper=''): what the "
                                       "`cluster` fixture starts")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    item.stash.setdefault(_REPORTS, {})[report.when] = report
    return report


_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


@pytest.fixture
def metadata_store() -> str:
    """Where the `cluster` fixture's controllers keep the metadata: "file" unless a test is parametrized by it."""
    return "file"


@pytest.fixture
def cluster(request: pytest.FixtureRequest, tmp_path: Path, metadata_store: str) -> Iterator[Cluster]:
    marker = request.node.get_closest_marker("cluster")
    in_zookeeper = {"controllers": 3, "zookeeper": "embedded"} if metadata_store == "zookeeper" else {}
    started = start_cluster(tmp_path, **{**in_zookeeper, **(marker.kwargs if marker else {})})
    try:
        yield started
    finally:
        reports = request.node.stash.get(_REPORTS, {})
        if "call" not in reports or reports["call"].failed:
            print(f"process logs of the failed test:\n{started.log_tails()}")
        started.stop()
