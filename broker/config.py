"""Broker configuration: Kafka's server.properties key names, parsed and validated once at start.

Rules:
- Keys are Kafka's (`node.id`/`broker.id`, `listeners`, `log.dirs`, ...); aliases map to one setting, and a
  later source wins: the properties file, then each `--override key=value` in order.
- An unknown key is warned about and ignored (a Kafka properties file carries many we do not need).
- A bad value raises `ConfigError` naming the key; the CLI turns it into ONE line and exit status 2.
- Defaults just work: `PLAINTEXT://127.0.0.1:9092` and a data dir `./data` under the current directory.

Project keys (not Kafka's):
- `log.flush.every.append` (bool, default false): fsync the log before acknowledging every produce, for
  single-node durability (kill -9 loses nothing acknowledged). Kafka instead relies on replication.
- `controller.address` (host:port, default empty = embedded): the controller to register with when this
  process runs only `process.roles=broker` (the cluster work of issue 6). `controller.quorum.voters`
  (`id@host:port`) is accepted as the Kafka spelling of the same thing.

- `fault.hooks.enable` (bool, default false): whether the fault hooks of broker/faults.py can be set at all.
  Off, a `fault.*` change answers INVALID_CONFIG and nothing happens: no client can pause replication or cut
  the power of a broker it reaches. The cluster launcher, the drill and the test kit turn it on for the
  clusters they start (`epoch-broker cluster --no-fault-hooks` leaves it off).
- `cluster.max.partitions` (default 50000): CreateTopics and CreatePartitions that would take the cluster
  past it get POLICY_VIOLATION, checked before anything is allocated (as is Kafka's limit of 10000 new
  partitions per request).

Differences from Kafka's meaning:
- `offsets.topic.replication.factor` (default 3, as Kafka's) is capped at the number of live brokers when
  `__consumer_offsets` is created, so a single test broker works without setting it; Kafka refuses instead.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


class ConfigError(ValueError):
    """A config value that cannot be used; the message is the one line shown to the user."""


class StartupError(Exception):
    """The environment does not let the process start (a port in use, an unwritable or foreign data dir, too
    few file descriptors): one line for the user, exit status 2."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    listener: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"


def _int(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text.strip())
        if value < minimum:
            raise ValueError
        return value

    parse.expected = f"an integer >= {minimum}"  # type: ignore[attr-defined]
    return parse


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError
    return lowered == "true"


_bool.expected = "true or false"  # type: ignore[attr-defined]


def _listeners(text: str) -> tuple[Endpoint, ...]:
    endpoints = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, address = item.partition("://")
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError
        endpoints.append(Endpoint(name.upper(), host or "0.0.0.0", int(port)))
    if not endpoints:
        raise ValueError
    return tuple(endpoints)


_listeners.expected = "a list like PLAINTEXT://host:port"  # type: ignore[attr-defined]


def _protocol_map(text: str) -> tuple[str, ...]:
    """`NAME:PROTOCOL` pairs, upper-cased (kept as text: DescribeConfigs shows them as given)."""
    pairs = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, colon, protocol = item.partition(":")
        if not colon or not name.strip() or not protocol.strip():
            raise ValueError
        pairs.append(f"{name.strip().upper()}:{protocol.strip().upper()}")
    return tuple(pairs)


_protocol_map.expected = "a list like INTERNAL:PLAINTEXT,EXTERNAL:SSL"  # type: ignore[attr-defined]


def _dirs(text: str) -> tuple[str, ...]:
    dirs = tuple(os.path.abspath(d.strip()) for d in text.split(",") if d.strip())
    if not dirs:
        raise ValueError
    return dirs


_dirs.expected = "a comma-separated list of directories"  # type: ignore[attr-defined]


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text.strip() not in allowed:
            raise ValueError
        return text.strip()

    parse.expected = "one of " + ", ".join(allowed)  # type: ignore[attr-defined]
    return parse


def _roles(text: str) -> frozenset[str]:
    roles = frozenset(r.strip() for r in text.split(",") if r.strip())
    if not roles or not roles <= {"broker", "controller"}:
        raise ValueError
    return roles


_roles.expected = "broker, controller or broker,controller"  # type: ignore[attr-defined]


def _text(text: str) -> str:
    return text.strip()


_text.expected = "a string"  # type: ignore[attr-defined]


def _scaled(parse: Callable[[str], int], factor: int) -> Callable[[str], int]:
    def scaled(text: str) -> int:
        return parse(text) * factor

    scaled.expected = parse.expected  # type: ignore[attr-defined]
    return scaled


# Kafka key -> (BrokerConfig attribute, parser). Several keys may feed one attribute (aliases).
KEYS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "node.id": ("node_id", _int(0)),
    "broker.id": ("node_id", _int(0)),
    "process.roles": ("process_roles", _roles),
    "listeners": ("listeners", _listeners),
    "listener.security.protocol.map": ("listener_security_protocol_map", _protocol_map),
    "advertised.listeners": ("advertised_listeners", _listeners),
    "log.dirs": ("log_dirs", _dirs),
    "log.dir": ("log_dirs", _dirs),
    "num.partitions": ("num_partitions", _int(1)),
    "default.replication.factor": ("default_replication_factor", _int(1)),
    "auto.create.topics.enable": ("auto_create_topics_enable", _bool),
    "log.segment.bytes": ("log_segment_bytes", _int(14)),
    "log.roll.ms": ("log_roll_ms", _int(1)),
    "log.roll.hours": ("log_roll_ms", _scaled(_int(1), 3_600_000)),
    "retention.ms": ("log_retention_ms", _int(-1)),
    "log.retention.ms": ("log_retention_ms", _int(-1)),
    "log.retention.minutes": ("log_retention_ms", _scaled(_int(1), 60_000)),
    "log.retention.hours": ("log_retention_ms", _scaled(_int(1), 3_600_000)),
    "retention.bytes": ("log_retention_bytes", _int(-1)),
    "log.retention.bytes": ("log_retention_bytes", _int(-1)),
    "message.max.bytes": ("message_max_bytes", _int(0)),
    "socket.request.max.bytes": ("socket_request_max_bytes", _int(1)),
    "connections.max.idle.ms": ("connections_max_idle_ms", _int(-1)),
    "log.flush.interval.messages": ("log_flush_interval_messages", _int(1)),
    "log.flush.interval.ms": ("log_flush_interval_ms", _int(0)),
    "log.flush.every.append": ("log_flush_every_append", _bool),
    "fault.hooks.enable": ("fault_hooks_enable", _bool),
    "message.timestamp.type": ("message_timestamp_type", _choice("CreateTime", "LogAppendTime")),
    "log.message.timestamp.type": ("message_timestamp_type", _choice("CreateTime", "LogAppendTime")),
    "group.initial.rebalance.delay.ms": ("group_initial_rebalance_delay_ms", _int(0)),
    "offsets.topic.num.partitions": ("offsets_topic_num_partitions", _int(1)),
    "offsets.topic.replication.factor": ("offsets_topic_replication_factor", _int(1)),
    "offsets.retention.minutes": ("offsets_retention_minutes", _int(1)),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", _bool),
    "min.insync.replicas": ("min_insync_replicas", _int(1)),
    "broker.session.timeout.ms": ("broker_session_timeout_ms", _int(1)),
    "broker.heartbeat.interval.ms": ("broker_heartbeat_interval_ms", _int(1)),
    "replica.lag.time.max.ms": ("replica_lag_time_max_ms", _int(1)),
    "controller.address": ("controller_address", _text),
    "controller.quorum.voters": ("controller_address", lambda text: text.strip().partition("@")[2]),
    "cluster.id": ("cluster_id", _text),
    "log.cleanup.policy": ("log_cleanup_policy", _choice("delete", "compact")),
    "compression.type": ("compression_type", _choice("producer")),
    "cluster.max.partitions": ("cluster_max_partitions", _int(1)),
    "max.connections": ("max_connections", _int(0)),
    "max.connections.per.ip": ("max_connections_per_ip", _int(0)),
    "log.message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", _int(0)),
    "log.message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", _int(0)),
}


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    node_id: int = 0
    process_roles: frozenset[str] = frozenset({"broker", "controller"})
    listeners: tuple[Endpoint, ...] = (Endpoint("PLAINTEXT", "127.0.0.1", 9092),)
    advertised_listeners: tuple[Endpoint, ...] | None = None
    listener_security_protocol_map: tuple[str, ...] = ()  # NAME:PROTOCOL pairs
    log_dirs: tuple[str, ...] = field(default_factory=lambda: (os.path.abspath("data"),))
    num_partitions: int = 1
    default_replication_factor: int = 1
    auto_create_topics_enable: bool = True
    log_segment_bytes: int = 1024 * 1024 * 1024
    log_roll_ms: int = 7 * 24 * 3_600_000
    log_retention_ms: int = 7 * 24 * 3_600_000
    log_retention_bytes: int = -1
    message_max_bytes: int = 1048588
    socket_request_max_bytes: int = 100 * 1024 * 1024
    connections_max_idle_ms: int = 600_000
    log_flush_interval_messages: int = 2**63 - 1
    log_flush_interval_ms: int | None = None
    log_flush_every_append: bool = False
    fault_hooks_enable: bool = False
    message_timestamp_type: str = "CreateTime"
    group_initial_rebalance_delay_ms: int = 0  # Kafka: 3000, but 0 in its shipped server.properties
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3  # capped at the live brokers when the topic is made
    offsets_retention_minutes: int = 10080
    unclean_leader_election_enable: bool = False
    min_insync_replicas: int = 1
    broker_session_timeout_ms: int = 9000
    broker_heartbeat_interval_ms: int = 2000
    replica_lag_time_max_ms: int = 30000
    controller_address: str = ""
    cluster_id: str = ""
    log_cleanup_policy: str = "delete"
    compression_type: str = "producer"
    cluster_max_partitions: int = 50_000
    max_connections: int = 2**31 - 1  # Kafka's defaults: no limit but the file-descriptor budget
    max_connections_per_ip: int = 2**31 - 1
    message_timestamp_before_max_ms: int = 2**63 - 1  # Kafka's defaults: any timestamp is accepted
    message_timestamp_after_max_ms: int = 2**63 - 1

    @property
    def advertised(self) -> Endpoint:
        """The endpoint clients are told to use: advertised.listeners, else the first listener (0.0.0.0 made
        concrete, since a client cannot connect to it)."""
        endpoint = (self.advertised_listeners or self.listeners)[0]
        if endpoint.host in ("0.0.0.0", "::", ""):
            return Endpoint(endpoint.listener, "127.0.0.1", endpoint.port)
        return endpoint

    @property
    def data_dir(self) -> str:
        return self.log_dirs[0]

    def as_properties(self) -> dict[str, str]:
        """The honoured settings under their first Kafka key, for DescribeConfigs and logs."""
        rendered: dict[str, str] = {}
        attrs_seen: set[str] = set()
        for key, (attr, _) in KEYS.items():
            if attr not in attrs_seen:
                attrs_seen.add(attr)
                rendered[key] = render_value(getattr(self, attr))
        return rendered


# Kafka's ConfigSource codes, as DescribeConfigs and CreateTopics (v5+) report where a value comes from.
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 2, 4, 5


def render_value(value: Any) -> str:
    """A setting as Kafka writes it in properties and DescribeConfigs."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, frozenset):
        return ",".join(sorted(value))
    return "" if value is None else str(value)


def read_properties(path: str) -> list[tuple[str, str]]:
    """key=value (or key: value) lines of a Java properties file; # and ! start comments."""
    pairs = []
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if not line or line[0] in "#!":
                continue
            separator = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
            if separator < 0:
                raise ConfigError(f"{path}: line without '=': {line!r}")
            pairs.append((line[:separator].strip(), line[separator + 1 :].strip()))
    return pairs


def build_config(pairs: list[tuple[str, str]]) -> BrokerConfig:
    """Apply (key, value) pairs in order over the defaults."""
    values: dict[str, Any] = {}
    for key, text in pairs:
        spec = KEYS.get(key)
        if spec is None:
            log.warning("ignoring unknown config key %s", key)
            continue
        attr, parse = spec
        try:
            values[attr] = parse(text)
        except ValueError:
            expected = getattr(parse, "expected", "a valid value")
            raise ConfigError(f"invalid value for {key}: {text!r} (expected {expected})") from None
    config = BrokerConfig(**values)
    _check_listeners(config.listeners, dict(pair.split(":") for pair in config.listener_security_protocol_map))
    return config


KAFKA_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_PROTOCOLS = ("PLAINTEXT",)


def _check_listeners(listeners: tuple[Endpoint, ...], protocols: dict[str, str]) -> None:
    """A listener this broker cannot serve as asked is a start-up error, never a silent plaintext one."""
    if len(listeners) > 1:
        raise ConfigError(f"listeners: {len(listeners)} listeners given, but binding more than one is not "
                          "supported yet (TLS and SASL listeners come with them)")
    for endpoint in listeners:
        protocol = protocols.get(endpoint.listener, endpoint.listener)
        if protocol not in KAFKA_PROTOCOLS:
            raise ConfigError(f"listeners: listener {endpoint.listener} has no security protocol (add it to "
                              f"listener.security.protocol.map, e.g. {endpoint.listener}:PLAINTEXT)")
        if protocol not in SUPPORTED_PROTOCOLS:
            raise ConfigError(f"listeners: {endpoint.listener}://{endpoint.host}:{endpoint.port} uses security "
                              f"protocol {protocol}, which this broker does not support yet (only "
                              f"{', '.join(SUPPORTED_PROTOCOLS)}); it will not serve it as plaintext")


def load_config(properties_path: str | None, overrides: list[str]) -> BrokerConfig:
    pairs = read_properties(properties_path) if properties_path else []
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--override needs key=value, got {item!r}")
        pairs.append((key.strip(), value.strip()))
    return build_config(pairs)


# Topic-level keys the broker honours: topic key -> (the BrokerConfig attribute holding its default, parser).
TOPIC_CONFIGS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "retention.ms": ("log_retention_ms", _int(-1)),
    "retention.bytes": ("log_retention_bytes", _int(-1)),
    "segment.bytes": ("log_segment_bytes", _int(14)),
    "segment.ms": ("log_roll_ms", _int(1)),
    "max.message.bytes": ("message_max_bytes", _int(0)),
    "message.timestamp.type": ("message_timestamp_type", _choice("CreateTime", "LogAppendTime")),
    "min.insync.replicas": ("min_insync_replicas", _int(1)),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", _bool),
    "flush.messages": ("log_flush_interval_messages", _int(1)),
    "flush.ms": ("log_flush_interval_ms", _int(0)),
    # compact: kept forever (no time or size retention); segments are not compacted.
    "cleanup.policy": ("log_cleanup_policy", _choice("delete", "compact")),
    # Batches are stored as the producer compressed them: "producer" is the only value honoured.
    "compression.type": ("compression_type", _choice("producer")),
    "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", _int(0)),
    "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", _int(0)),
}


def validate_topic_configs(configs: dict[str, str | None]) -> str | None:
    """Why these topic configs cannot be used (one line), or None."""
    for key, text in configs.items():
        spec = TOPIC_CONFIGS.get(key)
        if spec is None:
            return f"unknown or unsupported topic config {key}"
        try:
            spec[1](text or "")
        except ValueError:
            return f"invalid value for {key}: {text!r} (expected {getattr(spec[1], 'expected', 'a valid value')})"
    return None


def topic_config(config: BrokerConfig, overrides: dict[str, str]) -> dict[str, Any]:
    """The effective value of every topic-level key: the topic's override, else the broker default."""
    return {
        key: parse(overrides[key]) if key in overrides else getattr(config, attr)
        for key, (attr, parse) in TOPIC_CONFIGS.items()
    }
