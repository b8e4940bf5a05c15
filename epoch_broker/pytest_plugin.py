"""The pytest plugin: Kafka brokers as fixtures, loaded by the `pytest11` entry point (`pip install epoch-broker`
is all it takes).

Fixtures (epoch_broker/testing.py's objects):
- `kafka_broker`: a fresh in-process broker per test (started in tens of milliseconds).
- `kafka_broker_session`: one broker for the whole session; `kafka_broker_session.new_topic(partitions=1)`
  creates a topic with a fresh name per call, so tests sharing it never see each other's records.
- `kafka_cluster`: a controller and three brokers as processes, per test: kill, pause, restart, elect, faults.

Options: `--kafka-broker-config KEY=VALUE` (repeatable) sets a broker config key for every fixture.
`--kafka-versions 3.7,4.0` (or `all`) runs every test that uses a kafka_* fixture once per Kafka release, against
brokers claiming that release (`kafka.version`, docs/releases.md); the `kafka_version` fixture names the test's.

    def test_round_trip(kafka_broker):
        kafka_broker.create_topic("t")
        producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("epoch-broker", "Kafka brokers for tests (epoch-broker)")
    group.addoption("--kafka-broker-config", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker config key for every kafka_* fixture (repeatable)")
    group.addoption("--kafka-versions", default="", metavar="RELEASES",
                    help="run each test using a kafka_* fixture once per Kafka release its brokers claim: "
                         "comma-separated (3.7,4.0) or `all`")


def _releases(config: pytest.Config) -> list[str]:
    from epoch_broker.protocol.releases import RELEASES, parse_release

    text = config.getoption("kafka_versions")
    if text.strip() == "all":
        return list(RELEASES)
    try:
        return [parse_release(item).name for item in text.split(",") if item.strip()]
    except ValueError as exc:
        raise pytest.UsageError(f"--kafka-versions: {exc}") from None


def pytest_configure(config: pytest.Config) -> None:
    _releases(config)  # a bad --kafka-versions is a usage error before anything runs


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kafka_version" in metafunc.fixturenames and (releases := _releases(metafunc.config)):
        metafunc.parametrize("kafka_version", releases, indirect=True, scope="session",
                             ids=[f"kafka-{release}" for release in releases])


@pytest.fixture(scope="session")
def kafka_version(request: pytest.FixtureRequest) -> str | None:
    """The Kafka release this test's brokers claim (`--kafka-versions`), or None."""
    return getattr(request, "param", None)


def _config(request: pytest.FixtureRequest, kafka_version: str | None) -> dict[str, str]:
    config = {"kafka.version": kafka_version} if kafka_version else {}
    for item in request.config.getoption("kafka_broker_config"):
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise pytest.UsageError(f"--kafka-broker-config {item!r}: expected KEY=VALUE")
        config[key.strip()] = value.strip()
    return config


class SessionBroker:
    """The session's broker, with `new_topic` for a topic of its own per test."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    def new_topic(self, partitions: int = 1, prefix: str = "topic", config: dict[str, Any] | None = None) -> str:
        from epoch_broker.testing import unique_name

        return self.broker.create_topic(unique_name(prefix), partitions, config=config)

    def __getattr__(self, name: str) -> Any:  # bootstrap_servers, create_topic, restart, ...
        return getattr(self.broker, name)


@pytest.fixture
def kafka_broker(request: pytest.FixtureRequest, kafka_version: str | None) -> Iterator[Any]:
    from epoch_broker.testing import broker

    with broker(config=_config(request, kafka_version)) as started:
        yield started


@pytest.fixture(scope="session")
def kafka_broker_session(request: pytest.FixtureRequest, kafka_version: str | None) -> Iterator[SessionBroker]:
    from epoch_broker.testing import broker

    with broker(config=_config(request, kafka_version)) as started:
        yield SessionBroker(started)


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest, kafka_version: str | None) -> Iterator[Any]:
    from epoch_broker.testing import cluster

    with cluster(3, config=_config(request, kafka_version)) as started:
        yield started
