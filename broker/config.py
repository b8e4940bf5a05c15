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
- `log.format` (`text` or `json`, default text): the process's own log lines on stderr (epoch_broker/logs.py);
  json writes one object a line (ts, level, logger, msg, node, exc), for machines.
- `controller.address` (host:port[,host:port...], default empty = embedded): the controllers a
  `process.roles=broker` process registers with; with several (controllers sharing a ZooKeeper store), it
  finds the active one and moves on when answered NOT_CONTROLLER. `controller.quorum.voters`
  (`id@host:port,...`) is accepted as the Kafka spelling of the same list.
- `zookeeper.connect` (`host:port[,host:port...][/chroot]`, Kafka's key, default empty = the file store): a
  `process.roles=controller` process keeps the metadata log in ZooKeeper and competes there to be the active
  controller (broker/controller/store/zookeeper.py, quorum.py), with `zookeeper.session.timeout.ms` (default
  18000, as Kafka's) and `zookeeper.connection.timeout.ms` (default: the session timeout).

- `fault.hooks.enable` (bool, default false): whether the fault hooks of broker/faults.py can be set at all.
  Off, a `fault.*` change answers INVALID_CONFIG and nothing happens: no client can pause replication or cut
  the power of a broker it reaches. The cluster launcher, the drill and the test kit turn it on for the
  clusters they start (`epoch-broker cluster --no-fault-hooks` leaves it off).
- `cluster.secret` (text, default empty; also from the environment variable EPOCH_BROKER_CLUSTER_SECRET, which
  keeps it out of `ps`): the brokers and the controller of a cluster log in to each other with it (SCRAM-SHA-512
  as the user `epoch-broker`, on SASL listeners that accept it) and that principal alone may send what only
  brokers send (the controller's APIs, replica fetches), even with no authorizer. `epoch-broker cluster`, the
  drill and the test kit generate one per cluster (broker/security/, drill/launcher.py).
- `metrics.listener` (`http://host:port`, default empty = off): where this process serves its Prometheus
  metrics (`/metrics`), its status page (`/`) and the page's data (`/api/status`); port 0 takes a free port,
  logged at start. Without it no metric is recorded (broker/metrics.py, broker/status.py).
- `controller.listener.probe.enable` (bool, default true): when the connection a broker heartbeats on closes,
  the controller connects to the broker's registered listener; refused, the process is gone and the broker is
  fenced at once instead of after the disconnect grace (broker/controller/server.py). Off, a broker restarted
  within the grace keeps its leaderships (KIP-101's returning leader).
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from epoch_broker.broker.principal import parse_super_users

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


# group.consumer.assignors: this broker's assignors, by name or by Kafka's class name
_ASSIGNOR_CLASSES = {"org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
                     "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range"}


def _assignors(text: str) -> tuple[str, ...]:
    names = tuple(_ASSIGNOR_CLASSES.get(n.strip(), n.strip()) for n in text.split(",") if n.strip())
    if not names or any(n not in ("uniform", "range") for n in names) or len(set(names)) != len(names):
        raise ValueError
    return names


_assignors.expected = "a list of uniform, range (or Kafka's assignor class names)"  # type: ignore[attr-defined]


def _float(minimum: float, maximum: float = float("inf")) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = float(text.strip())
        if not minimum <= value <= maximum:  # NaN too
            raise ValueError
        return value

    parse.expected = f"a number from {minimum} to {maximum}"  # type: ignore[attr-defined]
    return parse


def _cleanup_policy(text: str) -> str:
    """Kafka's cleanup.policy list: delete, compact, or both (`compact,delete`), as given."""
    policies = [part.strip() for part in text.split(",") if part.strip()]
    if not policies or not set(policies) <= {"delete", "compact"}:
        raise ValueError
    return ",".join(policies)


_cleanup_policy.expected = "delete, compact or compact,delete"  # type: ignore[attr-defined]


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


def _name(text: str) -> str:
    if not text.strip():
        raise ValueError
    return text.strip().upper()


_name.expected = "a listener name"  # type: ignore[attr-defined]


def _names(text: str) -> tuple[str, ...]:
    return tuple(part.strip().upper() for part in text.split(",") if part.strip())


_names.expected = "a comma-separated list of names"  # type: ignore[attr-defined]


def _secret(text: str) -> str:
    if text.strip() and len(text.strip()) < MIN_SECRET_LENGTH:
        raise ValueError
    return text.strip()


_secret.expected = "at least 16 characters, or empty"  # type: ignore[attr-defined]


def _super_users(text: str) -> str:
    parse_super_users(text)  # the one parser of principals
    return text.strip()


_super_users.expected = "principals like User:admin;User:broker"  # type: ignore[attr-defined]


def _dirs(text: str) -> tuple[str, ...]:
    dirs = tuple(os.path.abspath(d.strip()) for d in text.split(",") if d.strip())
    if not dirs:
        raise ValueError
    return dirs


_dirs.expected = "a comma-separated list of directories"  # type: ignore[attr-defined]


COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")  # Kafka's compression.type


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


def _voters(text: str) -> str:
    """`id@host:port,...` -> `host:port,...` (the ids are not needed: the active controller says who it is)."""
    voters = [voter.strip() for voter in text.split(",") if voter.strip()]
    if not all(voter.partition("@")[0].isdigit() and voter.partition("@")[2] for voter in voters):
        raise ValueError
    return ",".join(voter.partition("@")[2] for voter in voters)


_voters.expected = "id@host:port[,id@host:port...]"  # type: ignore[attr-defined]


def _http_listener(text: str) -> str:
    """`http://host:port` (port 0: a free one), or empty for none."""
    text = text.strip()
    if text:
        scheme, sep, address = text.partition("://")
        host, colon, port = address.rstrip("/").rpartition(":")
        if scheme.lower() != "http" or not sep or not host or not colon or not port.isdigit() or int(port) > 65535:
            raise ValueError
        text = f"http://{host}:{int(port)}"
    return text


_http_listener.expected = "http://host:port, or empty"  # type: ignore[attr-defined]


def _scaled(parse: Callable[[str], int], factor: int) -> Callable[[str], int]:
    def scaled(text: str) -> int:
        return parse(text) * factor

    scaled.expected = parse.expected  # type: ignore[attr-defined]
    return scaled


MIN_SECRET_LENGTH = 16
CLUSTER_SECRET_ENV = "EPOCH_BROKER_CLUSTER_SECRET"  # how launchers pass cluster.secret (not in argv: ps shows it)
BROKER_USER = "epoch-broker"  # the SASL user brokers and the controller log in as with cluster.secret
BROKER_PRINCIPAL = f"User:{BROKER_USER}"

# The standard ACL authorizer under both of Kafka's names (ZooKeeper-era and KRaft): broker/security/acl.py.
AUTHORIZERS = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer")

# Kafka key -> (BrokerConfig attribute, parser). Several keys may feed one attribute (aliases).
KEYS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "node.id": ("node_id", _int(0)),
    "broker.id": ("node_id", _int(0)),
    "process.roles": ("process_roles", _roles),
    "listeners": ("listeners", _listeners),
    "listener.security.protocol.map": ("listener_security_protocol_map", _protocol_map),
    "advertised.listeners": ("advertised_listeners", _listeners),
    "inter.broker.listener.name": ("inter_broker_listener_name", _name),
    "security.inter.broker.protocol": ("inter_broker_listener_name", _name),
    "controller.listener.names": ("controller_listener_names", _names),
    "sasl.enabled.mechanisms": ("sasl_enabled_mechanisms", _names),
    "sasl.mechanism.inter.broker.protocol": ("sasl_mechanism_inter_broker_protocol", _name),
    "sasl.mechanism.controller.protocol": ("sasl_mechanism_controller_protocol", _name),
    "ssl.keystore.type": ("ssl_keystore_type", _choice("PEM")),
    "ssl.keystore.location": ("ssl_keystore_location", _text),
    "ssl.keystore.certificate.chain": ("ssl_keystore_certificate_chain", _text),
    "ssl.keystore.key": ("ssl_keystore_key", _text),
    "ssl.key.password": ("ssl_key_password", _text),
    "ssl.truststore.type": ("ssl_truststore_type", _choice("PEM")),
    "ssl.truststore.location": ("ssl_truststore_location", _text),
    "ssl.truststore.certificates": ("ssl_truststore_certificates", _text),
    "ssl.client.auth": ("ssl_client_auth", _choice("none", "requested", "required")),
    "ssl.endpoint.identification.algorithm": ("ssl_endpoint_identification_algorithm", _choice("https", "")),
    "cluster.secret": ("cluster_secret", _secret),
    "authorizer.class.name": ("authorizer_class_name", _choice("", *AUTHORIZERS)),
    "super.users": ("super_users", _super_users),
    "allow.everyone.if.no.acl.found": ("allow_everyone_if_no_acl_found", _bool),
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
    "log.format": ("log_format", _choice("text", "json")),
    "fault.hooks.enable": ("fault_hooks_enable", _bool),
    "controller.listener.probe.enable": ("controller_listener_probe_enable", _bool),
    "message.timestamp.type": ("message_timestamp_type", _choice("CreateTime", "LogAppendTime")),
    "log.message.timestamp.type": ("message_timestamp_type", _choice("CreateTime", "LogAppendTime")),
    "group.initial.rebalance.delay.ms": ("group_initial_rebalance_delay_ms", _int(0)),
    "group.min.session.timeout.ms": ("group_min_session_timeout_ms", _int(1)),
    "group.max.session.timeout.ms": ("group_max_session_timeout_ms", _int(1)),
    "group.consumer.session.timeout.ms": ("group_consumer_session_timeout_ms", _int(1)),
    "group.consumer.heartbeat.interval.ms": ("group_consumer_heartbeat_interval_ms", _int(1)),
    "group.consumer.assignors": ("group_consumer_assignors", _assignors),
    "offsets.topic.num.partitions": ("offsets_topic_num_partitions", _int(1)),
    "offsets.topic.replication.factor": ("offsets_topic_replication_factor", _int(1)),
    "offsets.retention.minutes": ("offsets_retention_minutes", _int(1)),
    "transaction.state.log.num.partitions": ("transaction_state_log_num_partitions", _int(1)),
    "transaction.state.log.replication.factor": ("transaction_state_log_replication_factor", _int(1)),
    "transaction.max.timeout.ms": ("transaction_max_timeout_ms", _int(1)),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": ("transaction_abort_interval_ms", _int(1)),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", _bool),
    "min.insync.replicas": ("min_insync_replicas", _int(1)),
    "broker.session.timeout.ms": ("broker_session_timeout_ms", _int(1)),
    "broker.heartbeat.interval.ms": ("broker_heartbeat_interval_ms", _int(1)),
    "replica.lag.time.max.ms": ("replica_lag_time_max_ms", _int(1)),
    "controller.address": ("controller_address", _text),
    "controller.quorum.voters": ("controller_address", _voters),
    "zookeeper.connect": ("zookeeper_connect", _text),
    "zookeeper.session.timeout.ms": ("zookeeper_session_timeout_ms", _int(1)),
    "zookeeper.connection.timeout.ms": ("zookeeper_connection_timeout_ms", _int(1)),
    "cluster.id": ("cluster_id", _text),
    "log.cleanup.policy": ("log_cleanup_policy", _cleanup_policy),
    "log.cleaner.enable": ("log_cleaner_enable", _bool),
    "log.cleaner.backoff.ms": ("log_cleaner_backoff_ms", _int(1)),
    "log.cleaner.delete.retention.ms": ("log_cleaner_delete_retention_ms", _int(0)),
    "log.cleaner.min.cleanable.ratio": ("log_cleaner_min_cleanable_ratio", _float(0, 1)),
    "log.cleaner.io.max.bytes.per.second": ("log_cleaner_io_max_bytes_per_second", _float(1)),
    "compression.type": ("compression_type", _choice(*COMPRESSION_TYPES)),
    "cluster.max.partitions": ("cluster_max_partitions", _int(1)),
    "max.connections": ("max_connections", _int(0)),
    "max.connections.per.ip": ("max_connections_per_ip", _int(0)),
    "metrics.listener": ("metrics_listener", _http_listener),
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
    inter_broker_listener_name: str = ""  # empty: the first listener that is not a controller listener
    controller_listener_names: tuple[str, ...] = ()
    sasl_enabled_mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")  # Kafka: GSSAPI
    sasl_mechanism_inter_broker_protocol: str = "PLAIN"  # Kafka: GSSAPI, which is not served here
    sasl_mechanism_controller_protocol: str = "PLAIN"
    ssl_keystore_type: str = "PEM"  # JKS and PKCS12 are not read: PEM files or PEM text
    ssl_keystore_location: str = ""
    ssl_keystore_certificate_chain: str = ""
    ssl_keystore_key: str = ""
    ssl_key_password: str = ""
    ssl_truststore_type: str = "PEM"
    ssl_truststore_location: str = ""
    ssl_truststore_certificates: str = ""
    ssl_client_auth: str = "none"
    ssl_endpoint_identification_algorithm: str = "https"
    cluster_secret: str = ""  # what brokers and the controller log in to each other with (empty: none)
    authorizer_class_name: str = ""  # empty: no authorizer, every request allowed (Kafka's default)
    super_users: str = ""  # "User:a;User:b"
    allow_everyone_if_no_acl_found: bool = False
    # `listener.name.<listener>.<key>` settings (lower-case listener name, as Kafka spells them), in order:
    # a listener's own value of an ssl.* or sasl key, and its `<mechanism>.sasl.jaas.config`.
    listener_settings: tuple[tuple[str, str], ...] = ()
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
    log_format: str = "text"  # the process's own log lines (not Kafka's log.*): text, or json, one object a line
    fault_hooks_enable: bool = False
    controller_listener_probe_enable: bool = True
    message_timestamp_type: str = "CreateTime"
    group_initial_rebalance_delay_ms: int = 0  # Kafka: 3000, but 0 in its shipped server.properties
    group_min_session_timeout_ms: int = 6_000  # JoinGroup's session timeout bounds (INVALID_SESSION_TIMEOUT outside)
    group_max_session_timeout_ms: int = 1_800_000
    # KIP-848 consumer groups (group.protocol=consumer): Kafka's defaults; the test kit heartbeats every 500 ms
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")  # the first is the default
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3  # capped at the live brokers when the topic is made
    offsets_retention_minutes: int = 10080
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3  # capped at the live brokers when the topic is made
    transaction_max_timeout_ms: int = 900_000  # a longer transaction.timeout.ms is INVALID_TRANSACTION_TIMEOUT
    transaction_abort_interval_ms: int = 10_000  # how often timed-out transactions are looked for and aborted
    unclean_leader_election_enable: bool = False
    min_insync_replicas: int = 1
    broker_session_timeout_ms: int = 9000
    broker_heartbeat_interval_ms: int = 2000
    replica_lag_time_max_ms: int = 30000
    controller_address: str = ""  # host:port[,host:port...]
    zookeeper_connect: str = ""
    zookeeper_session_timeout_ms: int = 18_000
    zookeeper_connection_timeout_ms: int = 0  # 0: the session timeout
    cluster_id: str = ""
    log_cleanup_policy: str = "delete"
    log_cleaner_enable: bool = True  # storage/log_cleaner.py: compaction of cleanup.policy=compact logs
    log_cleaner_backoff_ms: int = 15_000  # between two cleaning passes
    log_cleaner_delete_retention_ms: int = 86_400_000  # delete.retention.ms's default
    log_cleaner_min_cleanable_ratio: float = 0.5  # min.cleanable.dirty.ratio's default
    log_cleaner_io_max_bytes_per_second: float = 1.7976931348623157e308  # Kafka's default: Double.MaxValue
    compression_type: str = "producer"
    cluster_max_partitions: int = 50_000
    max_connections: int = 2**31 - 1  # Kafka's defaults: no limit but the file-descriptor budget
    max_connections_per_ip: int = 2**31 - 1
    metrics_listener: str = ""  # http://host:port of /metrics, the status page and /api/status (empty: off)
    message_timestamp_before_max_ms: int = 2**63 - 1  # Kafka's defaults: any timestamp is accepted
    message_timestamp_after_max_ms: int = 2**63 - 1

    @property
    def advertised(self) -> Endpoint:
        """Where other brokers reach this one (the inter-broker listener's advertised endpoint): what it
        registers as its address."""
        return self.advertised_endpoints()[self.inter_broker_listener]

    def advertised_endpoints(self) -> dict[str, Endpoint]:
        """Listener name -> the endpoint clients of that listener are told to use: its entry in
        advertised.listeners, else the listener itself (0.0.0.0 made concrete, since a client cannot connect to
        it). Controller listeners are not advertised to clients."""
        advertised = {e.listener: e for e in self.advertised_listeners or ()}
        endpoints = {}
        for listener in self.listeners:
            if listener.listener in self.controller_listener_names and "broker" in self.process_roles:
                continue
            endpoint = advertised.get(listener.listener, listener)
            if endpoint.host in ("0.0.0.0", "::", ""):
                endpoint = Endpoint(endpoint.listener, "127.0.0.1", endpoint.port)
            endpoints[listener.listener] = endpoint
        return endpoints

    @property
    def inter_broker_listener(self) -> str:
        if self.inter_broker_listener_name:
            return self.inter_broker_listener_name
        served = [e.listener for e in self.listeners if e.listener not in self.controller_listener_names]
        return (served or [self.listeners[0].listener])[0]

    def security_protocol(self, listener: str) -> str:
        """The listener's security protocol: its entry in listener.security.protocol.map, else its own name
        (PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL map to themselves, as in Kafka)."""
        protocols = dict(pair.split(":", 1) for pair in self.listener_security_protocol_map)
        return protocols.get(listener, listener)

    def listener_setting(self, listener: str, key: str) -> str:
        """`listener.name.<listener>.<key>` if set, else the broker-wide value of `key` (empty if none)."""
        prefixed = f"listener.name.{listener.lower()}.{key}"
        for name, value in reversed(self.listener_settings):
            if name == prefixed:
                return value
        spec = KEYS.get(key)
        return render_value(getattr(self, spec[0])) if spec is not None else ""

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


# Keys whose values DescribeConfigs never shows (Kafka's PASSWORD type): null, with is_sensitive set.
SENSITIVE_KEYS = frozenset({"ssl.key.password", "ssl.keystore.key", "cluster.secret"})

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
    listener_settings: list[tuple[str, str]] = []
    for key, text in pairs:
        if key.startswith(LISTENER_PREFIX):
            listener_settings.append(_listener_setting(key, text))
            continue
        spec = KEYS.get(key)
        if spec is None:
            log.warning("ignoring unknown config key %s", key)
            continue
        attr, parse = spec
        values[attr] = _parse(key, parse, text)
    config = BrokerConfig(**values, listener_settings=tuple(listener_settings))
    _check_listeners(config)
    if config.group_min_session_timeout_ms > config.group_max_session_timeout_ms:
        raise ConfigError(f"group.min.session.timeout.ms ({config.group_min_session_timeout_ms}) is above "
                          f"group.max.session.timeout.ms ({config.group_max_session_timeout_ms})")
    if config.zookeeper_connect and config.process_roles != {"controller"}:
        raise ConfigError("zookeeper.connect: only a controller process (process.roles=controller) keeps the "
                          "metadata in ZooKeeper; brokers find the controllers by controller.address")
    return config


def _parse(key: str, parse: Callable[[str], Any], text: str) -> Any:
    try:
        return parse(text)
    except ValueError:
        expected = getattr(parse, "expected", "a valid value")
        raise ConfigError(f"invalid value for {key}: {text!r} (expected {expected})") from None


LISTENER_PREFIX = "listener.name."
KAFKA_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# What may follow `listener.name.<listener>.`: a key of KEYS with a per-listener value, or a mechanism's JAAS.
_PER_LISTENER_KEYS = ("ssl.", "sasl.enabled.mechanisms")


def _listener_setting(key: str, text: str) -> tuple[str, str]:
    """A `listener.name.<listener>.<key>` pair, checked: the key must be one a listener can have."""
    rest = key[len(LISTENER_PREFIX):]
    listener, _, setting = rest.partition(".")
    jaas = setting.endswith(".sasl.jaas.config") and setting[: -len(".sasl.jaas.config")].upper() in (
        SUPPORTED_MECHANISMS)
    if not (jaas or (setting.startswith(_PER_LISTENER_KEYS) and setting in KEYS)):
        raise ConfigError(f"{key}: unknown or unsupported per-listener setting {setting or '(none)'} (listeners "
                          "take ssl.* keys, sasl.enabled.mechanisms and <mechanism>.sasl.jaas.config)")
    if not jaas:
        _parse(key, KEYS[setting][1], text)
    return f"{LISTENER_PREFIX}{listener.lower()}.{setting}", text.strip()


def _check_listeners(config: BrokerConfig) -> None:
    """A listener this broker cannot serve as asked is a start-up error, never a silent plaintext one."""
    names = [e.listener for e in config.listeners]
    if len(set(names)) != len(names):
        raise ConfigError(f"listeners: a listener name appears twice in {','.join(names)}")
    ports = [e.port for e in config.listeners if e.port]
    if len(set(ports)) != len(ports):
        raise ConfigError(f"listeners: two listeners share a port in {','.join(map(str, config.listeners))}")
    for pair in config.listener_security_protocol_map:
        if pair.split(":", 1)[1] not in KAFKA_PROTOCOLS:
            raise ConfigError(f"listener.security.protocol.map: unknown security protocol in {pair} (one of "
                              f"{', '.join(KAFKA_PROTOCOLS)})")
    for endpoint in config.listeners:
        protocol = config.security_protocol(endpoint.listener)
        if protocol not in KAFKA_PROTOCOLS:
            raise ConfigError(f"listeners: listener {endpoint.listener} has no security protocol (add it to "
                              f"listener.security.protocol.map, e.g. {endpoint.listener}:PLAINTEXT)")
        if protocol.startswith("SASL_"):
            mechanisms = _names(config.listener_setting(endpoint.listener, "sasl.enabled.mechanisms"))
            unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
            if unsupported or not mechanisms:
                raise ConfigError(f"sasl.enabled.mechanisms for listener {endpoint.listener}: "
                                  f"{','.join(unsupported) or '(none)'} not supported (only "
                                  f"{', '.join(SUPPORTED_MECHANISMS)}); it will not serve it unauthenticated")
        if protocol in ("SSL", "SASL_SSL"):
            location = config.listener_setting(endpoint.listener, "ssl.keystore.location")
            chain = config.listener_setting(endpoint.listener, "ssl.keystore.certificate.chain")
            if not location and not chain:
                raise ConfigError(f"listener {endpoint.listener} uses {protocol} but has no certificate: set "
                                  f"ssl.keystore.location (a PEM file with the certificate and key) or "
                                  f"ssl.keystore.certificate.chain and ssl.keystore.key")
    for setting, _ in config.listener_settings:
        listener = setting[len(LISTENER_PREFIX):].partition(".")[0].upper()
        if listener not in names and listener not in config.controller_listener_names:
            raise ConfigError(f"{setting}: no listener named {listener} in listeners or controller.listener.names")
    for endpoint in config.advertised_listeners or ():
        if endpoint.listener not in names:
            raise ConfigError(f"advertised.listeners: {endpoint} names no listener in listeners")
    for name in config.controller_listener_names:
        if "controller" in config.process_roles and "broker" not in config.process_roles and name not in names:
            raise ConfigError(f"controller.listener.names: {name} is not in listeners")
        if config.security_protocol(name) not in KAFKA_PROTOCOLS:
            raise ConfigError(f"controller.listener.names: {name} has no security protocol (add it to "
                              f"listener.security.protocol.map)")
    if "broker" in config.process_roles and config.inter_broker_listener not in names:
        raise ConfigError(f"inter.broker.listener.name: {config.inter_broker_listener} is not in listeners")
    for key in ("sasl_mechanism_inter_broker_protocol", "sasl_mechanism_controller_protocol"):
        if getattr(config, key) not in SUPPORTED_MECHANISMS:
            raise ConfigError(f"{key.replace('_', '.')}: {getattr(config, key)} not supported (only "
                              f"{', '.join(SUPPORTED_MECHANISMS)})")


def load_config(properties_path: str | None, overrides: list[str]) -> BrokerConfig:
    """The properties file, then the cluster secret from the environment, then each override."""
    pairs = read_properties(properties_path) if properties_path else []
    if secret := os.environ.get(CLUSTER_SECRET_ENV):
        pairs.append(("cluster.secret", secret))
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
    # delete: retention deletes old segments; compact: the log cleaner keeps the latest record of each key (and no
    # retention by time or size); compact,delete: both
    "cleanup.policy": ("log_cleanup_policy", _cleanup_policy),
    "delete.retention.ms": ("log_cleaner_delete_retention_ms", _int(0)),
    "min.cleanable.dirty.ratio": ("log_cleaner_min_cleanable_ratio", _float(0, 1)),
    # producer: batches stored as the producer compressed them; a codec: batches with another one recompressed
    "compression.type": ("compression_type", _choice(*COMPRESSION_TYPES)),
    "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", _int(0)),
    "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", _int(0)),
}


def validate_topic_configs(configs: Mapping[str, str | None]) -> str | None:
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
