"""`kafka.version`: a broker answering as one Apache Kafka release (protocol/releases.py, docs/releases.md).

- The release data is Kafka's: it equals the ApiVersions kafka-python recorded from real brokers of each release.
- ApiVersions lists the release's APIs at the versions both it and this broker serve; another version is refused
  as that release refuses it (the connection closes, ApiVersions itself is answered in v0 by KIP-511).
- kafka-python infers the release from the answer, for every release (its own test matrix in seconds).
- The ZooKeeper-era broker-to-broker APIs are served to 2.8-3.9 only, and never acted on.
- `message.format.version` and DescribeConfigs' `advertised.listeners` follow the release.
- So do the feature flags of ApiVersions v3+: none from a ZooKeeper-mode release, a KRaft release's supported
  ranges and finalized levels (kafka-python's describe_features reads them; kcat's librdkafka 2.0.2 connects).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS

from epoch_broker import testing
from epoch_broker.client.aio import ConnectionClosed, KafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import api_versions, create_topics, describe_configs, leader_and_isr, produce
from epoch_broker.protocol.releases import RELEASES, ZK_INTER_BROKER_APIS, parse_release
from tests.broker.conftest import batch, produce_to
from tests.interop.support import kcat_bin

DEFAULT_CONFIG, STATIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 5, 4, 3


@asynccontextmanager
async def claiming(release: str | None, tmp_path: Path) -> AsyncIterator[tuple[Any, KafkaClient]]:
    """An in-process broker claiming `release` (None: none), and a raw client connected to it."""
    config = {} if release is None else {"kafka.version": release}
    async with (testing.broker(data_dir=tmp_path / (release or "native"), config=config) as started,
                await KafkaClient.connect(started.bootstrap_servers) as client):
        yield started, client


async def advertised(client: KafkaClient) -> dict[int, tuple[int, int]]:
    answer = await client.request(api_versions.API, 3, api_versions.REQUEST.cls(
        client_software_name="test", client_software_version="1"))
    assert answer.error_code == ErrorCode.NONE
    return {key.api_key: (key.min_version, key.max_version) for key in answer.api_keys}


def test_the_release_data_is_what_real_brokers_of_each_release_advertise() -> None:
    for name, release in RELEASES.items():
        assert dict(release.api_versions) == BROKER_API_VERSIONS[release.version], name
    assert [name for name, release in RELEASES.items() if release.zookeeper_mode] == [
        "2.8", "3.0", "3.1", "3.2", "3.3", "3.4", "3.5", "3.6", "3.7", "3.8", "3.9"]
    assert parse_release("3.7.2") is RELEASES["3.7"]
    for bad in ("2.7", "3", "3.7.x", "latest", "4.3"):
        with pytest.raises(ValueError, match="not an emulated Kafka release"):
            parse_release(bad)


@pytest.mark.parametrize("release", list(RELEASES))
async def test_api_versions_lists_the_releases_apis_within_its_and_our_ranges(release: str, tmp_path: Path) -> None:
    async with claiming(None, tmp_path) as (_, native_client):
        native = await advertised(native_client)
    claimed = RELEASES[release].api_versions
    async with claiming(release, tmp_path) as (_, client):
        answer = await advertised(client)
    for key, (low, high) in answer.items():
        assert claimed[key][0] <= low <= high <= claimed[key][1], (key, answer[key], claimed[key])
        if key not in ZK_INTER_BROKER_APIS:
            assert native[key][0] <= low and high <= native[key][1], (key, answer[key], native[key])
    assert {key for key in claimed if key in native} <= set(answer)  # nothing both have is left out
    assert not ZK_INTER_BROKER_APIS & set(native)


async def test_a_version_the_release_lacks_is_refused_as_that_release_refuses_it(tmp_path: Path) -> None:
    async with claiming("2.8", tmp_path) as (started, client):
        answers = await advertised(client)
        assert answers[produce.API.key] == (3, 9)
        assert answers[api_versions.API.key] == (0, 3)  # v4 (KIP-511's follow-up) came with 3.x
        started.create_topic("t")
        assert (await produce_to(client, "t", batch(b"v9"), version=9)).error_code == ErrorCode.NONE
        with pytest.raises(ConnectionClosed):
            await produce_to(client, "t", batch(b"v10"), version=10)


def test_kafka_python_infers_every_release(tmp_path: Path) -> None:
    for name, release in RELEASES.items():
        with testing.broker(data_dir=tmp_path / name, config={"kafka.version": name}) as started:
            admin = KafkaAdminClient(bootstrap_servers=started.bootstrap_servers, request_timeout_ms=10_000)
            try:
                assert admin._client.check_version() == release.version, name
            finally:
                admin.close()


async def test_the_zookeeper_era_broker_apis_are_answered_to_those_releases_only(tmp_path: Path) -> None:
    request = leader_and_isr.REQUEST.cls(controller_id=1, controller_epoch=0, broker_epoch=0, type=0,
                                         topic_states=[], live_leaders=[])
    async with claiming("3.4", tmp_path) as (_, client):
        assert (await advertised(client))[leader_and_isr.API.key] == (0, 7)
        answer = await client.request(leader_and_isr.API, 7, request)
        assert answer.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    async with claiming("4.0", tmp_path) as (_, client):
        assert leader_and_isr.API.key not in await advertised(client)
        with pytest.raises(ConnectionClosed):
            await client.request(leader_and_isr.API, 7, request)


async def create(client: KafkaClient, name: str, configs: dict[str, str]) -> Any:
    topic = create_topics.REQUEST.CreatableTopic(
        name=name, num_partitions=1, replication_factor=1,
        configs=[create_topics.REQUEST.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])
    return (await client.request(create_topics.API, 5, create_topics.REQUEST.cls(topics=[topic]))).topics[0]


async def describe(client: KafkaClient, resource_type: int, name: str, key: str) -> Any:
    request = describe_configs.REQUEST
    answer = await client.request(describe_configs.API, 4, request.cls(include_synonyms=False, resources=[
        request.DescribeConfigsResource(resource_type=resource_type, resource_name=name, configuration_keys=[key])]))
    (result,) = answer.results
    assert result.error_code == ErrorCode.NONE, result
    return {entry.name: entry for entry in result.configs}.get(key)


@pytest.mark.parametrize(("release", "accepted"), [("3.7", True), ("3.9", True), (None, True), ("4.0", False)])
async def test_message_format_version_is_accepted_until_4_0(release: str | None, accepted: bool,
                                                           tmp_path: Path) -> None:
    async with claiming(release, tmp_path) as (_, client):
        answer = await create(client, "old-format", {"message.format.version": "2.8"})
        if accepted:
            assert answer.error_code == ErrorCode.NONE, answer
            entry = await describe(client, 2, "old-format", "message.format.version")
            assert (entry.value, entry.config_source) == ("2.8", 1)
        else:
            assert answer.error_code == ErrorCode.INVALID_CONFIG
            assert answer.error_message == "unknown or unsupported topic config message.format.version"
            assert (await create(client, "new-format", {})).error_code == ErrorCode.NONE
            assert await describe(client, 2, "new-format", "message.format.version") is None


@pytest.mark.parametrize(("release", "source", "read_only"), [
    ("3.7", DEFAULT_CONFIG, False), ("3.9", DEFAULT_CONFIG, False),
    ("4.0", STATIC_BROKER_CONFIG, True), (None, STATIC_BROKER_CONFIG, True)])
async def test_advertised_listeners_are_described_as_the_release_does(release: str | None, source: int,
                                                                     read_only: bool, tmp_path: Path) -> None:
    async with claiming(release, tmp_path) as (started, client):
        entry = await describe(client, 4, "0", "advertised.listeners")
        assert (entry.config_source, entry.read_only) == (source, read_only)
        if source == STATIC_BROKER_CONFIG:
            assert entry.value == f"PLAINTEXT://{started.bootstrap_servers}"


@pytest.mark.parametrize(("release", "source"), [("4.0", DEFAULT_CONFIG), ("4.1", DYNAMIC_DEFAULT_BROKER_CONFIG),
                                                 (None, DYNAMIC_DEFAULT_BROKER_CONFIG)])
async def test_min_insync_replicas_is_a_cluster_default_from_4_1(release: str | None, source: int,
                                                                 tmp_path: Path) -> None:
    """KIP-966: a 4.1 controller writes min.insync.replicas as a cluster-level dynamic default, so every topic
    shows it as DYNAMIC_DEFAULT_BROKER_CONFIG (not a default: confluent-kafka-python's suite counts on it)."""
    async with claiming(release, tmp_path) as (started, client):
        started.create_topic("t")
        entry = await describe(client, 2, "t", "min.insync.replicas")
        assert (entry.value, entry.config_source) == ("1", source)


def test_kafka_python_describes_the_features_of_the_release(tmp_path: Path) -> None:
    def kraft(metadata_version: int) -> dict[str, dict[str, tuple[int, int]]]:
        return {"metadata.version": {"supported": (7, metadata_version),
                                     "finalized": (metadata_version, metadata_version)},
                "kraft.version": {"supported": (0, 1)},
                "group.version": {"supported": (0, 1), "finalized": (1, 1)},
                "transaction.version": {"supported": (0, 2)}}  # finalized at 0: transactions v2 are not built

    # a ZooKeeper-mode broker supports none, and its cluster finalizes none
    for release, expected in [("3.7", {}), ("4.0", kraft(25)), ("4.2", kraft(29)), (None, {})]:
        config = {} if release is None else {"kafka.version": release}
        with testing.broker(data_dir=tmp_path / str(release), config=config) as started:
            admin = KafkaAdminClient(bootstrap_servers=started.bootstrap_servers, request_timeout_ms=10_000)
            try:
                features = admin.describe_features()
            finally:
                admin.close()
        for described in features.values():
            assert described.pop("finalized_epoch", 0) >= 0  # the metadata offset the broker had applied
        assert features == expected, release


async def test_a_v3_request_is_not_told_the_features_whose_minimum_is_0(tmp_path: Path) -> None:
    async with claiming("4.0", tmp_path) as (_, client):
        answer = await client.request(api_versions.API, 3, api_versions.REQUEST.cls(
            client_software_name="librdkafka", client_software_version="2.0.2"))
    assert answer.error_code == ErrorCode.NONE  # Kafka's KAFKA-17492: older clients cannot read them
    assert [(f.name, f.min_version, f.max_version) for f in answer.supported_features] == [("metadata.version", 7, 25)]
    assert [f.name for f in answer.finalized_features] == ["metadata.version", "group.version"]
    assert answer.finalized_features_epoch >= 0


async def test_a_zookeeper_mode_release_finalizes_nothing_at_epoch_0(tmp_path: Path) -> None:
    async with claiming("3.9", tmp_path) as (_, client):
        answer = await client.request(api_versions.API, 4, api_versions.REQUEST.cls(
            client_software_name="test", client_software_version="1"))
    assert (answer.supported_features, answer.finalized_features, answer.finalized_features_epoch) == ([], [], 0)


def test_kcat_lists_the_topics_of_a_broker_claiming_4_0(tmp_path: Path) -> None:
    with testing.broker(data_dir=tmp_path, config={"kafka.version": "4.0"}) as started:
        started.create_topic("listed")
        listing = subprocess.run([kcat_bin(), "-b", started.bootstrap_servers, "-L", "-m", "20"],
                                 capture_output=True, text=True, timeout=60, check=True).stdout
    assert 'topic "listed" with 1 partitions' in listing


def test_the_plugin_runs_a_test_once_per_release(tmp_path: Path) -> None:
    (tmp_path / "test_matrix.py").write_text(
        "from kafka import KafkaAdminClient\n"
        "def test_it(kafka_broker, kafka_version):\n"
        "    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers)\n"
        "    try:\n"
        "        assert '.'.join(map(str, admin._client.check_version())) == kafka_version\n"
        "    finally:\n"
        "        admin.close()\n")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v",
                          "--kafka-versions", "2.8,3.4,4.2", "test_matrix.py"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "3 passed" in run.stdout, run.stdout[-3000:]
    assert "test_it[kafka-3.4]" in run.stdout
    bad = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "--kafka-versions", "9.9", "test_matrix.py"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 4 and "--kafka-versions: not an emulated Kafka release: '9.9'" in bad.stderr, bad
