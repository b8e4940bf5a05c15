"""The pytest plugin: Kafka brokers as fixtures, loaded by the `pytest11` entry point (`pip install epoch-broker`
is all it takes).

Fixtures (epoch_broker/testing.py's objects):
- `kafka_broker`: a fresh in-process broker per test (started in tens of milliseconds).
- `kafka_broker_session`: one broker for the whole session; `kafka_broker_session.new_topic(partitions=1)`
  creates a topic with a fresh name per call, so tests sharing it never see each other's records.
- `kafka_cluster`: a controller and three brokers as processes, per test: kill, pause, restart, elect, faults.

Option: `--kafka-broker-config KEY=VALUE` (repeatable) sets a broker config key for every fixture.

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


def _config(request: pytest.FixtureRequest) -> dict[str, str]:
    config = {}
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
def kafka_broker(request: pytest.FixtureRequest) -> Iterator[Any]:
    from epoch_broker.testing import broker

    with broker(config=_config(request)) as started:
        yield started


@pytest.fixture(scope="session")
def kafka_broker_session(request: pytest.FixtureRequest) -> Iterator[SessionBroker]:
    from epoch_broker.testing import broker

    with broker(config=_config(request)) as started:
        yield SessionBroker(started)


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    from epoch_broker.testing import cluster

    with cluster(3, config=_config(request)) as started:
        yield started
