"""The config catalogue (broker/config/catalogue.py): every key declared once, and everything that knows a key by
its name derived from it; reading properties (synonyms, the later source winning, unknown keys); and the reference
page written from it (docs/configuration.md)."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import fields
from typing import Any

import pytest

from epoch_broker.broker.config import (
    KEYS,
    PER_LISTENER_KEYS,
    SENSITIVE_KEYS,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigError,
    build_config,
    topic_config,
    validate_topic_configs,
)
from epoch_broker.broker.config.catalogue import (
    CATALOGUE,
    GROUP_CONFIGS,
    GROUP_CONFIGS_TITLE,
    GROUPS,
    render_reference,
)
from epoch_broker.broker.replica.replica_manager import log_config_for
from epoch_broker.storage.log import LogConfig

BROKER_NAMES = [name for key in CATALOGUE for name in key.names]
TOPIC_NAMES = [key.topic for key in CATALOGUE if key.topic]
PAGE = render_reference().splitlines()


def test_every_broker_key_and_synonym_is_declared_once_and_is_what_the_broker_accepts() -> None:
    assert [name for name, count in Counter(BROKER_NAMES).items() if count > 1] == []
    assert sorted(KEYS) == sorted(BROKER_NAMES)
    assert {KEYS[name][0] for name in BROKER_NAMES} == {key.attr for key in CATALOGUE}


def test_every_topic_key_is_declared_once_and_is_what_the_broker_accepts() -> None:
    assert [name for name, count in Counter(TOPIC_NAMES).items() if count > 1] == []
    assert sorted(TOPIC_CONFIGS) == sorted(TOPIC_NAMES)


def test_every_field_of_broker_config_is_a_catalogued_key_but_the_per_listener_settings() -> None:
    names = {field.name for field in fields(BrokerConfig)}
    assert names - {key.attr for key in CATALOGUE} == {"listener_settings"}
    assert len({key.attr for key in CATALOGUE}) == len(CATALOGUE)  # one key per setting


def test_secrecy_and_per_listener_keys_come_from_the_rows() -> None:
    assert {"ssl.key.password", "ssl.keystore.key", "cluster.secret"} == SENSITIVE_KEYS
    assert {key.name for key in CATALOGUE if key.sensitive} == SENSITIVE_KEYS
    assert {name for name in BROKER_NAMES if name.startswith("ssl.")} | {
        "sasl.enabled.mechanisms"} == PER_LISTENER_KEYS


def rows(scope: str, name: str) -> list[str]:
    """The reference page's table rows for `name` at `scope`."""
    return [line for line in PAGE if line.startswith(f"| `{name}` | {scope} |")]


def test_the_reference_page_has_one_row_per_key_and_scope_and_names_each_synonym_once() -> None:
    assert {name: len(rows("broker", name)) for name in (key.name for key in CATALOGUE)} == {
        key.name: 1 for key in CATALOGUE}
    assert {name: len(rows("topic", name)) for name in TOPIC_NAMES} == dict.fromkeys(TOPIC_NAMES, 1)
    for key in CATALOGUE:
        for synonym in key.names[1:]:
            assert sum(f"`{synonym}`" in line.split(" | ")[6] for line in PAGE if " | broker | " in line) == 1
    headings = [line[3:] for line in PAGE if line.startswith("## ")]
    assert headings == [*(group.TITLE for group in GROUPS), GROUP_CONFIGS_TITLE]
    assert [sum(line.startswith(f"| `{key.name}` | ") for line in PAGE) for key in GROUP_CONFIGS] == [1] * len(
        GROUP_CONFIGS)


@pytest.mark.parametrize(("pairs", "expected"), [
    ([], {"log_roll_ms": 7 * 24 * 3_600_000, "node_id": 0, "log_retention_ms": 7 * 24 * 3_600_000}),
    ([("log.roll.hours", "2")], {"log_roll_ms": 7_200_000}),
    ([("log.retention.minutes", "3")], {"log_retention_ms": 180_000}),
    ([("retention.ms", "5"), ("log.retention.hours", "1")], {"log_retention_ms": 3_600_000}),  # the later wins
    ([("log.retention.hours", "1"), ("log.retention.ms", "5")], {"log_retention_ms": 5}),
    ([("broker.id", "3")], {"node_id": 3}),
    ([("message.timestamp.type", "LogAppendTime")], {"message_timestamp_type": "LogAppendTime"}),
    ([("security.inter.broker.protocol", "plaintext")], {"inter_broker_listener_name": "PLAINTEXT"}),
    ([("log.cleaner.min.cleanable.ratio", "0.25")], {"log_cleaner_min_cleanable_ratio": 0.25}),
])
def test_a_key_and_its_synonyms_set_one_setting(pairs: list[tuple[str, str]], expected: dict[str, Any]) -> None:
    config = build_config(pairs)
    assert {attr: getattr(config, attr) for attr in expected} == expected


@pytest.mark.parametrize(("pairs", "message"), [
    ([("num.partitions", "x")], "invalid value for num.partitions: 'x' (expected an integer >= 1)"),
    ([("log.roll.hours", "0")], "invalid value for log.roll.hours: '0' (expected an integer >= 1)"),
    ([("cluster.secret", "short")], "invalid value for cluster.secret: 'short' (expected at least 16 characters"),
    ([("kafka.version", "2.7")], "invalid value for kafka.version: '2.7' (expected an Apache Kafka release, 2.8 to "),
    ([("log.message.format.version", "v2")], "invalid value for log.message.format.version: 'v2' (expected a "),
    ([("listener.name.plaintext.segment.bytes", "1")],
     "listener.name.plaintext.segment.bytes: unknown or unsupported per-listener setting segment.bytes"),
])
def test_a_bad_value_or_a_key_no_listener_takes_is_one_error_naming_it(pairs: list[tuple[str, str]],
                                                                       message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        build_config(pairs)
    assert str(raised.value).startswith(message)


@pytest.mark.parametrize("name", ["segment.bytes", "some.unknown.key", "fault.replication.paused"])
def test_an_unknown_broker_key_is_logged_and_ignored(name: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert build_config([(name, "1")]) == BrokerConfig()
    assert f"ignoring unknown config key {name}" in caplog.text


@pytest.mark.parametrize(("configs", "problem"), [
    ({"segment.bytes": "1024", "cleanup.policy": "compact,delete"}, None),
    ({"log.segment.bytes": "1024"}, "unknown or unsupported topic config log.segment.bytes"),
    ({"min.compaction.lag.ms": "0"}, "unknown or unsupported topic config min.compaction.lag.ms"),
    ({"segment.bytes": "13"}, "invalid value for segment.bytes: '13' (expected an integer >= 14)"),
    ({"compression.type": "brotli"}, "invalid value for compression.type: 'brotli' (expected one of producer, "),
])
def test_topic_configs_are_checked_against_their_rows(configs: dict[str, str], problem: str | None) -> None:
    found = validate_topic_configs(BrokerConfig(), configs)
    if problem is None:
        assert found is None
    else:
        assert found is not None and found.startswith(problem), found


def test_a_topic_takes_its_own_value_else_the_broker_key_it_overrides() -> None:
    config = build_config([("log.segment.bytes", "2048"), ("log.flush.interval.ms", "10")])
    effective = topic_config(config, {"retention.ms": "60000", "flush.ms": "5"})
    assert (effective["segment.bytes"], effective["retention.ms"], effective["flush.ms"]) == (2048, 60000, 5)
    assert effective["flush.messages"] == config.log_flush_interval_messages


def test_a_default_topic_on_a_default_broker_gets_storages_own_defaults() -> None:
    """The storage defaults are declared once, in LogConfig: the catalogue takes them from there."""
    config = BrokerConfig()
    assert log_config_for(config, topic_config(config, {})) == LogConfig()


def test_the_topic_keys_reach_the_log_config() -> None:
    config = build_config([("log.flush.every.append", "true")])
    log_config = log_config_for(config, topic_config(config, {
        "segment.bytes": "4096", "segment.ms": "1000", "retention.ms": "5", "retention.bytes": "6",
        "flush.messages": "7", "flush.ms": "8", "message.timestamp.type": "LogAppendTime", "compression.type": "lz4",
        "cleanup.policy": "compact", "delete.retention.ms": "9", "min.cleanable.dirty.ratio": "0.1",
        "message.timestamp.before.max.ms": "10", "message.timestamp.after.max.ms": "11"}))
    assert (log_config.segment_bytes, log_config.segment_ms, log_config.retention_ms, log_config.retention_bytes,
            log_config.flush_interval_messages, log_config.flush_interval_ms) == (4096, 1000, 5, 6, 7, 8)
    assert (log_config.message_timestamp_type, log_config.compression_type, log_config.cleanup_policy,
            log_config.delete_retention_ms, log_config.min_cleanable_dirty_ratio, log_config.fsync_every_append) == (
        "LogAppendTime", "lz4", frozenset({"compact"}), 9, 0.1, True)
    rules = log_config.validation
    assert (rules.compacted, rules.timestamp_before_max_ms, rules.timestamp_after_max_ms,
            rules.check_timestamps) == (True, 10, 11, False)
