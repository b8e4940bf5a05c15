"""The config catalogue: every key the broker accepts, one `define` each, grouped by concern as Kafka's are
(KRaftConfigs, SocketServerConfigs, ServerLogConfigs, CleanerConfig, ReplicationConfigs, GroupCoordinatorConfig,
TransactionLogConfig, ...), and the reference page written from it (`render_reference`, docs/configuration.md).

Rules:
- A group is a frozen dataclass whose fields are its keys' values; BrokerConfig (config/__init__.py) is made of
  every group of GROUPS, so a key's field, name, synonyms, type, default, parser, topic key, importance and doc
  are one declaration. Everything else that knows a key by its name reads it from here: the broker's property
  names (KEYS), the topic keys (TOPIC_KEYS), DescribeConfigs' types, sources, synonyms and secrecy, the storage
  LogConfig a topic's keys make, and the reference page.
- A name is declared once per scope: broker names (each key's name and synonyms) are unique across the catalogue,
  and so are topic names. Three topic names are also broker synonyms of the setting they override
  (`retention.ms`, `retention.bytes`, `message.timestamp.type`: accepted in server.properties, as before), and
  three keys are spelt the same at both scopes, as in Kafka (`min.insync.replicas`, `compression.type`,
  `unclean.leader.election.enable`).
- Project keys, not Kafka's, say so first in their doc; so does a key whose meaning differs from Kafka's.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar

from epoch_broker.broker.config import parsers as p
from epoch_broker.broker.config.definition import (
    KEY,
    LOG_DEFAULTS,
    ConfigKey,
    ConfigType,
    Importance,
    define,
    from_log,
    render_value,
)
from epoch_broker.broker.config.parsers import Endpoint
from epoch_broker.broker.reference import anchor, table
from epoch_broker.protocol.releases import KafkaRelease
from epoch_broker.storage.log_validator import LONG_MAX

BOOLEAN, STRING, INT, LONG, DOUBLE, LIST, PASSWORD = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT,
                                                      ConfigType.LONG, ConfigType.DOUBLE, ConfigType.LIST,
                                                      ConfigType.PASSWORD)
HIGH, MEDIUM, LOW = Importance.HIGH, Importance.MEDIUM, Importance.LOW
HOUR_MS = 3_600_000
INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class KRaftConfigs:
    """A process's roles, its identity and how brokers and controllers find each other."""

    TITLE: ClassVar[str] = "Roles and the controller"

    node_id: int = define("node.id", INT, 0, p.integer(0), HIGH,
                          "This process's id in the cluster, unique among brokers and controllers.",
                          synonyms=("broker.id",))
    process_roles: frozenset[str] = define(
        "process.roles", LIST, frozenset({"broker", "controller"}), p.roles, HIGH,
        "What this process runs: `broker`, `controller`, or both (one process holding a whole cluster).")
    cluster_id: str = define("cluster.id", STRING, "", p.text, LOW,
                             "Project key: the cluster's id; empty, the controller generates one when it first "
                             "starts and keeps it in the metadata log.")
    controller_address: str = define(
        "controller.address", STRING, "", p.text, HIGH,
        "Project key: `host:port[,host:port...]`, the controllers a `process.roles=broker` process registers "
        "with; empty, the process's own embedded controller. With several (controllers sharing a ZooKeeper "
        "store) the broker finds the active one and moves on when answered NOT_CONTROLLER. "
        "`controller.quorum.voters` (`id@host:port,...`, Kafka's spelling) sets the same list.",
        synonyms=(("controller.quorum.voters", p.voters),))
    controller_listener_names: tuple[str, ...] = define(
        "controller.listener.names", LIST, (), p.names, HIGH,
        "The listeners a controller serves its APIs on; a broker does not advertise them to clients.")
    broker_session_timeout_ms: int = define(
        "broker.session.timeout.ms", INT, 9000, p.integer(1), MEDIUM,
        "A broker that has not heartbeated for this long is fenced by the controller.")
    broker_heartbeat_interval_ms: int = define("broker.heartbeat.interval.ms", INT, 2000, p.integer(1), MEDIUM,
                                               "How often a broker heartbeats to the controller.")
    controller_listener_probe_enable: bool = define(
        "controller.listener.probe.enable", BOOLEAN, True, p.boolean, LOW,
        "Project key: when the connection a broker heartbeats on closes, the controller connects to the broker's "
        "registered listener; refused, the process is gone and the broker is fenced at once instead of after the "
        "disconnect grace (broker/controller/server.py). Off, a broker restarted within the grace keeps its "
        "leaderships (KIP-101's returning leader).")
    cluster_max_partitions: int = define(
        "cluster.max.partitions", INT, 50_000, p.integer(1), MEDIUM,
        "Project key: CreateTopics and CreatePartitions that would take the cluster past this many partitions "
        "get POLICY_VIOLATION, checked before anything is allocated (as is Kafka's limit of 10000 new partitions "
        "per request).")


@dataclass(frozen=True)
class ZkConfigs:
    """A controller-only process may keep the metadata log in ZooKeeper instead of its data directory."""

    TITLE: ClassVar[str] = "ZooKeeper"

    zookeeper_connect: str = define(
        "zookeeper.connect", STRING, "", p.text, HIGH,
        "`host:port[,host:port...][/chroot]`; empty, the metadata log is a file in the data directory. Set, a "
        "`process.roles=controller` process keeps the metadata log in ZooKeeper and competes there to be the "
        "active controller (broker/controller/store/zookeeper.py, quorum.py); brokers may not set it.")
    zookeeper_session_timeout_ms: int = define("zookeeper.session.timeout.ms", INT, 18_000, p.integer(1), HIGH,
                                               "The ZooKeeper session timeout.")
    zookeeper_connection_timeout_ms: int = define(
        "zookeeper.connection.timeout.ms", INT, 0, p.integer(1), HIGH,
        "How long to wait for a ZooKeeper connection; unset (0), the session timeout.")


@dataclass(frozen=True)
class SocketServerConfigs:
    """Where the process listens, what it advertises, and the limits on connections and requests."""

    TITLE: ClassVar[str] = "Listeners and connections"

    listeners: tuple[Endpoint, ...] = define(
        "listeners", LIST, (Endpoint("PLAINTEXT", "127.0.0.1", 9092),), p.listeners, HIGH,
        "`NAME://host:port,...`: any number of PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL listeners (a name "
        "other than those four needs its protocol in `listener.security.protocol.map`); port 0 takes a free one.")
    advertised_listeners: tuple[Endpoint, ...] | None = define(
        "advertised.listeners", STRING, None, p.listeners, HIGH,
        "What clients of each listener are told to connect to; unset, the listener itself, with `0.0.0.0` "
        "advertised as 127.0.0.1.")
    listener_security_protocol_map: tuple[str, ...] = define(
        "listener.security.protocol.map", LIST, (), p.protocol_map, LOW,
        "`NAME:PROTOCOL` pairs giving each named listener its security protocol; the four protocol names map to "
        "themselves.")
    inter_broker_listener_name: str = define(
        "inter.broker.listener.name", STRING, "", p.name, MEDIUM,
        "The listener brokers reach each other on, and whose address a broker registers; unset, the first "
        "listener that is not a controller listener.",
        synonyms=("security.inter.broker.protocol",))
    socket_request_max_bytes: int = define("socket.request.max.bytes", INT, 100 * 1024 * 1024, p.integer(1), HIGH,
                                           "A request frame larger than this closes the connection.")
    connections_max_idle_ms: int = define("connections.max.idle.ms", LONG, 600_000, p.integer(-1), MEDIUM,
                                          "A connection idle for this long is closed (-1: never).")
    max_connections: int = define(
        "max.connections", INT, INT_MAX, p.integer(0), MEDIUM,
        "Open connections allowed (Kafka's default: no limit but the file-descriptor budget); a connection past "
        "it, or past what the open-files limit leaves beside the logs, is closed at once.")
    max_connections_per_ip: int = define("max.connections.per.ip", INT, INT_MAX, p.integer(0), MEDIUM,
                                         "Open connections allowed from one address, likewise.")


@dataclass(frozen=True)
class BrokerSecurityConfigs:
    """TLS and SASL on the listeners, the cluster's own credential, and the authorizer. The `ssl.*` keys and
    `sasl.enabled.mechanisms` may be set per listener: `listener.name.<listener>.<key>`, as may a mechanism's
    `listener.name.<listener>.<mechanism>.sasl.jaas.config`."""

    TITLE: ClassVar[str] = "Security"

    sasl_enabled_mechanisms: tuple[str, ...] = define(
        "sasl.enabled.mechanisms", LIST, ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"), p.names, MEDIUM,
        "The SASL mechanisms a SASL listener serves: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default, "
        "GSSAPI, is not served); a listener asking for another is refused at start, never served unauthenticated.",
        per_listener=True)
    sasl_mechanism_inter_broker_protocol: str = define(
        "sasl.mechanism.inter.broker.protocol", STRING, "PLAIN", p.name, MEDIUM,
        "The mechanism brokers log in to each other with (Kafka's default, GSSAPI, is not served).")
    sasl_mechanism_controller_protocol: str = define("sasl.mechanism.controller.protocol", STRING, "PLAIN", p.name,
                                                     HIGH, "The mechanism brokers log in to the controller with.")
    ssl_keystore_type: str = define("ssl.keystore.type", STRING, "PEM", p.choice("PEM"), MEDIUM,
                                    "Only PEM: JKS and PKCS12 stores are not read.", per_listener=True)
    ssl_keystore_location: str = define("ssl.keystore.location", STRING, "", p.text, MEDIUM,
                                        "A PEM file holding the certificate chain and the private key.",
                                        per_listener=True)
    ssl_keystore_certificate_chain: str = define("ssl.keystore.certificate.chain", STRING, "", p.text, MEDIUM,
                                                 "The certificate chain as PEM text (with `ssl.keystore.key`).",
                                                 per_listener=True)
    ssl_keystore_key: str = define("ssl.keystore.key", PASSWORD, "", p.text, MEDIUM,
                                   "The private key as PEM text.", per_listener=True)
    ssl_key_password: str = define("ssl.key.password", PASSWORD, "", p.text, MEDIUM,
                                   "The password of an encrypted private key.", per_listener=True)
    ssl_truststore_type: str = define("ssl.truststore.type", STRING, "PEM", p.choice("PEM"), MEDIUM,
                                      "Only PEM.", per_listener=True)
    ssl_truststore_location: str = define("ssl.truststore.location", STRING, "", p.text, MEDIUM,
                                          "A PEM file of the certificates trusted to sign clients' and peers' "
                                          "certificates.", per_listener=True)
    ssl_truststore_certificates: str = define("ssl.truststore.certificates", STRING, "", p.text, MEDIUM,
                                              "The trusted certificates as PEM text.", per_listener=True)
    ssl_client_auth: str = define("ssl.client.auth", STRING, "none", p.choice("none", "requested", "required"),
                                  MEDIUM, "Whether a TLS listener asks clients for a certificate.",
                                  per_listener=True)
    ssl_endpoint_identification_algorithm: str = define(
        "ssl.endpoint.identification.algorithm", STRING, "https", p.choice("https", ""), LOW,
        "`https`: a broker connecting over TLS checks the peer's host name against its certificate; empty: not.",
        per_listener=True)
    cluster_secret: str = define(
        "cluster.secret", PASSWORD, "", p.secret, HIGH,
        "Project key, also read from the environment variable EPOCH_BROKER_CLUSTER_SECRET (which keeps it out of "
        "`ps`): the brokers and the controller of a cluster log in to each other with it (SCRAM-SHA-512 as the "
        "user `epoch-broker`, on SASL listeners that accept it), and that principal alone may send what only "
        "brokers send (the controller's APIs, replica fetches), even with no authorizer. `epoch-broker cluster`, "
        "the drill and the test kit generate one per cluster (broker/security/, drill/launcher.py).")
    authorizer_class_name: str = define(
        "authorizer.class.name", STRING, "", p.choice("", *p.AUTHORIZERS), HIGH,
        "The standard ACL authorizer under either of Kafka's names; empty, no authorizer: every request is "
        "allowed (Kafka's default).")
    super_users: str = define("super.users", STRING, "", p.super_users, HIGH,
                              "Principals the authorizer allows everything, separated by `;` "
                              "(`User:admin;User:ops`).")
    allow_everyone_if_no_acl_found: bool = define(
        "allow.everyone.if.no.acl.found", BOOLEAN, False, p.boolean, HIGH,
        "With an authorizer, whether a resource that no ACL names is open to all.")


@dataclass(frozen=True)
class ServerLogConfigs:
    """Where the logs are and how each partition's log is rolled, retained, flushed and stamped. A key with a topic
    key is that key's default: a topic's own value overrides it."""

    TITLE: ClassVar[str] = "Logs"

    log_dirs: tuple[str, ...] = define(
        "log.dirs", LIST, "data", p.dirs, HIGH,
        "The data directories (relative to the current directory): the partitions' logs and, on a controller, "
        "the metadata log.", synonyms=("log.dir",), parse_default=True)
    num_partitions: int = define("num.partitions", INT, 1, p.integer(1), MEDIUM,
                                 "Partitions of a topic created without a count (-1), or by a Metadata request.")
    auto_create_topics_enable: bool = define("auto.create.topics.enable", BOOLEAN, True, p.boolean, HIGH,
                                             "Whether a Metadata request naming an unknown topic creates it.")
    log_segment_bytes: int = define("log.segment.bytes", INT, from_log("segment_bytes"), p.integer(14), HIGH,
                                    "A segment is rolled before it grows past this size.", topic="segment.bytes")
    log_roll_ms: int = define("log.roll.ms", LONG, from_log("segment_ms"), p.integer(1), HIGH,
                              "A segment older than this is rolled.", topic="segment.ms",
                              synonyms=(("log.roll.hours", p.scaled(p.integer(1), HOUR_MS)),))
    log_segment_delete_delay_ms: int = define(
        "log.segment.delete.delay.ms", LONG, from_log("file_delete_delay_ms"), p.integer(0), HIGH,
        "How long a deleted segment's files stay open before they are removed, so reads in flight finish.",
        topic="file.delete.delay.ms")
    log_retention_ms: int = define(
        "log.retention.ms", LONG, from_log("retention_ms"), p.integer(-1), HIGH,
        "Segments whose records are all older than this are deleted (`delete` policy; -1: kept).",
        topic="retention.ms", synonyms=("retention.ms", ("log.retention.minutes", p.scaled(p.integer(1), 60_000)),
                                        ("log.retention.hours", p.scaled(p.integer(1), HOUR_MS))))
    log_retention_bytes: int = define(
        "log.retention.bytes", LONG, from_log("retention_bytes"), p.integer(-1), HIGH,
        "The oldest segments are deleted while a partition's log is larger than this (`delete` policy; -1: no "
        "limit).", topic="retention.bytes", synonyms=("retention.bytes",))
    message_max_bytes: int = define("message.max.bytes", INT, 1048588, p.integer(0), HIGH,
                                    "A larger record batch is refused with MESSAGE_TOO_LARGE.",
                                    topic="max.message.bytes")
    log_flush_interval_messages: int = define(
        "log.flush.interval.messages", LONG, from_log("flush_interval_messages"), p.integer(1), HIGH,
        "The log is fsynced once this many records were appended since the last fsync (default: never, rely on "
        "replication).", topic="flush.messages")
    log_flush_interval_ms: int | None = define(
        "log.flush.interval.ms", LONG, None, p.integer(0), HIGH,
        "The log is fsynced once the oldest record not yet fsynced is this old; unset: never.", topic="flush.ms")
    log_flush_every_append: bool = define(
        "log.flush.every.append", BOOLEAN, from_log("fsync_every_append"), p.boolean, MEDIUM,
        "Project key: fsync the log before acknowledging every produce, for single-node durability (kill -9 loses "
        "nothing acknowledged). Kafka instead relies on replication.")
    message_timestamp_type: str = define(
        "log.message.timestamp.type", STRING, from_log("message_timestamp_type"),
        p.choice("CreateTime", "LogAppendTime"), MEDIUM,
        "`CreateTime` keeps the producer's timestamps; `LogAppendTime` stamps each batch with the broker's clock.",
        topic="message.timestamp.type", synonyms=("message.timestamp.type",))
    message_timestamp_before_max_ms: int = define(
        "log.message.timestamp.before.max.ms", LONG, LOG_DEFAULTS.validation.timestamp_before_max_ms, p.integer(0),
        MEDIUM, "A CreateTime record stamped more than this before the broker's clock gets INVALID_TIMESTAMP "
        "(default: any).", topic="message.timestamp.before.max.ms")
    message_timestamp_after_max_ms: int = define(
        "log.message.timestamp.after.max.ms", LONG, LOG_DEFAULTS.validation.timestamp_after_max_ms, p.integer(0),
        MEDIUM, "Likewise for a timestamp more than this ahead of the broker's clock.",
        topic="message.timestamp.after.max.ms")
    message_format_version: str = define(
        "log.message.format.version", STRING, "3.0-IV1", p.message_format_version, LOW,
        "Accepted and ignored, as Kafka 3.x does once every batch is v2 (deprecated by KIP-724); unknown with "
        "`kafka.version` 4.0 or later, as Kafka 4.0 removed it.", topic="message.format.version")
    compression_type: str = define(
        "compression.type", STRING, from_log("compression_type"), p.choice(*p.COMPRESSION_TYPES), HIGH,
        "`producer` stores batches as the producer compressed them; a codec (or `uncompressed`): the leader "
        "recompresses batches of another codec.", topic="compression.type")


@dataclass(frozen=True)
class CleanerConfig:
    """Compaction of `cleanup.policy=compact` logs by the log cleaner (storage/log_cleaner.py), which keeps the
    latest record of each key at its offset."""

    TITLE: ClassVar[str] = "Log cleaner"

    log_cleanup_policy: str = define(
        "log.cleanup.policy", LIST, ",".join(sorted(LOG_DEFAULTS.cleanup_policy)), p.cleanup_policy, MEDIUM,
        "`delete`: retention deletes old segments; `compact`: the log cleaner keeps the latest record of each key "
        "(and nothing is deleted by time or size); `compact,delete`: both.", topic="cleanup.policy")
    log_cleaner_enable: bool = define("log.cleaner.enable", BOOLEAN, True, p.boolean, MEDIUM,
                                      "Whether the log cleaner runs.")
    log_cleaner_backoff_ms: int = define("log.cleaner.backoff.ms", INT, 15_000, p.integer(1), MEDIUM,
                                         "The pause before each cleaning pass.")
    log_cleaner_delete_retention_ms: int = define(
        "log.cleaner.delete.retention.ms", LONG, from_log("delete_retention_ms"), p.integer(0), MEDIUM,
        "How long the cleaner keeps a tombstone (a null value) after it reached the cleaned part of the log.",
        topic="delete.retention.ms")
    log_cleaner_min_cleanable_ratio: float = define(
        "log.cleaner.min.cleanable.ratio", DOUBLE, from_log("min_cleanable_dirty_ratio"), p.number(0, 1), MEDIUM,
        "The share of a log's bytes not yet cleaned past which the cleaner cleans it.",
        topic="min.cleanable.dirty.ratio")
    log_cleaner_io_max_bytes_per_second: float = define(
        "log.cleaner.io.max.bytes.per.second", DOUBLE, sys.float_info.max, p.number(1), MEDIUM,
        "The cleaner's read and write throttle (default: unlimited).")


@dataclass(frozen=True)
class ReplicationConfigs:
    """How many copies a partition has, how far a follower may fall behind, and who may lead."""

    TITLE: ClassVar[str] = "Replication"

    default_replication_factor: int = define("default.replication.factor", INT, 1, p.integer(1), MEDIUM,
                                             "Replicas of a topic created without a replication factor (-1).")
    min_insync_replicas: int = define(
        "min.insync.replicas", INT, 1, p.integer(1), HIGH,
        "An acks=all produce to a partition with fewer in-sync replicas gets NOT_ENOUGH_REPLICAS.",
        topic="min.insync.replicas")
    replica_lag_time_max_ms: int = define(
        "replica.lag.time.max.ms", LONG, 30_000, p.integer(1), HIGH,
        "A follower that has not caught up with the leader's log end for this long leaves the ISR.")
    unclean_leader_election_enable: bool = define(
        "unclean.leader.election.enable", BOOLEAN, False, p.boolean, MEDIUM,
        "Whether a replica outside the ISR may be elected when no in-sync replica is alive (acknowledged records "
        "may be lost).", topic="unclean.leader.election.enable")


@dataclass(frozen=True)
class GroupCoordinatorConfig:
    """Consumer groups, classic and KIP-848's, share groups (KIP-932), and their committed offsets in
    `__consumer_offsets`."""

    TITLE: ClassVar[str] = "Group coordinator"

    group_initial_rebalance_delay_ms: int = define(
        "group.initial.rebalance.delay.ms", INT, 0, p.integer(0), MEDIUM,
        "How long an empty classic group waits for more members before its first rebalance. Differs from "
        "Kafka's built-in 3000: 0, as in Kafka's shipped server.properties, so a classic consumer joining after "
        "another gets its own generation first.")
    group_min_session_timeout_ms: int = define(
        "group.min.session.timeout.ms", INT, 6_000, p.integer(1), MEDIUM,
        "A JoinGroup's session timeout below this is INVALID_SESSION_TIMEOUT.")
    group_max_session_timeout_ms: int = define(
        "group.max.session.timeout.ms", INT, 1_800_000, p.integer(1), MEDIUM,
        "A JoinGroup's session timeout above this is INVALID_SESSION_TIMEOUT.")
    group_consumer_session_timeout_ms: int = define(
        "group.consumer.session.timeout.ms", INT, 45_000, p.integer(1), MEDIUM,
        "KIP-848 consumer groups (`group.protocol=consumer`): a member silent for this long is removed.")
    group_consumer_heartbeat_interval_ms: int = define(
        "group.consumer.heartbeat.interval.ms", INT, 5_000, p.integer(1), MEDIUM,
        "The heartbeat interval answered to KIP-848 members (the test kit, `epoch-broker cluster`, the drills "
        "and the compose files use 500: each step of a rebalance waits for a heartbeat).")
    group_consumer_assignors: tuple[str, ...] = define(
        "group.consumer.assignors", LIST, ("uniform", "range"), p.assignors, MEDIUM,
        "The server-side assignors of KIP-848 groups; the first is the default, a member's "
        "`group.remote.assignor` picks another.")
    group_share_session_timeout_ms: int = define(
        "group.share.session.timeout.ms", INT, 45_000, p.integer(1), MEDIUM,
        "Share groups (KIP-932): a member silent for this long is removed, and the records it held are released.")
    group_share_heartbeat_interval_ms: int = define(
        "group.share.heartbeat.interval.ms", INT, 5_000, p.integer(1), MEDIUM,
        "The heartbeat interval answered to share group members (the test kit uses 500, as for KIP-848 groups).")
    group_share_max_size: int = define(
        "group.share.max.size", INT, 200, p.integer(1), MEDIUM,
        "Members a share group may have; one more is GROUP_MAX_SIZE_REACHED.")
    group_share_record_lock_duration_ms: int = define(
        "group.share.record.lock.duration.ms", INT, 30_000, p.integer(1_000, 60_000), MEDIUM,
        "How long a share consumer holds the records a share fetch gave it (the acquisition lock): unacknowledged "
        "by then, they are delivered again (or archived at the delivery count limit).")
    group_share_delivery_count_limit: int = define(
        "group.share.delivery.count.limit", INT, 5, p.integer(2, 10), MEDIUM,
        "Deliveries of one record to a share group before it is archived instead of delivered again (a poison "
        "record stops coming back).")
    group_share_partition_max_record_locks: int = define(
        "group.share.partition.max.record.locks", INT, 2_000, p.integer(100, 10_000), MEDIUM,
        "In-flight records (acquired or waiting to be delivered again) one share group may have on one "
        "partition; past it, share fetches wait for acknowledgements.")
    offsets_topic_num_partitions: int = define("offsets.topic.num.partitions", INT, 50, p.integer(1), HIGH,
                                               "Partitions of `__consumer_offsets`.")
    offsets_topic_replication_factor: int = define(
        "offsets.topic.replication.factor", INT, 3, p.integer(1), HIGH,
        "Replicas of `__consumer_offsets`. Differs from Kafka: capped at the number of live brokers when the "
        "topic is created, so a single test broker works without setting it; Kafka refuses instead.")
    offsets_retention_minutes: int = define("offsets.retention.minutes", INT, 10080, p.integer(1), HIGH,
                                            "How long a group's committed offsets are kept once it is empty (KIP-211).")


@dataclass(frozen=True)
class TransactionConfigs:
    """The transaction coordinator (KIP-98) and its `__transaction_state` topic."""

    TITLE: ClassVar[str] = "Transactions"

    transaction_state_log_num_partitions: int = define(
        "transaction.state.log.num.partitions", INT, 50, p.integer(1), HIGH, "Partitions of `__transaction_state`.")
    transaction_state_log_replication_factor: int = define(
        "transaction.state.log.replication.factor", INT, 3, p.integer(1), HIGH,
        "Replicas of `__transaction_state`, capped at the number of live brokers when the topic is created (as "
        "`offsets.topic.replication.factor`).")
    transaction_max_timeout_ms: int = define(
        "transaction.max.timeout.ms", INT, 900_000, p.integer(1), HIGH,
        "A producer's longer `transaction.timeout.ms` is INVALID_TRANSACTION_TIMEOUT.")
    transaction_abort_interval_ms: int = define(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms", LONG, 10_000, p.integer(1), LOW,
        "How often timed-out transactions are looked for and aborted.")
    transaction_partition_verification_enable: bool = define(
        "transaction.partition.verification.enable", BOOLEAN, True, p.boolean, LOW,
        "KIP-890: before a transactional produce opens its producer's transaction in a partition, the partition's "
        "leader asks the transaction coordinator whether the partition was added to that transaction, and refuses "
        "the write if not (INVALID_TXN_STATE, TRANSACTION_ABORTABLE from Produce v11). A broker claiming a "
        "release before 3.6 (`kafka.version`) never verifies, as those releases did not.")


@dataclass(frozen=True)
class OperationsConfigs:
    """Project keys for running the process: its log lines, its metrics and status page, and the fault hooks
    (docs/faults.md)."""

    TITLE: ClassVar[str] = "Operations"

    log_format: str = define(
        "log.format", STRING, "text", p.choice("text", "json"), LOW,
        "Project key (not Kafka's `log.*`): the process's own log lines on stderr (epoch_broker/logs.py); `json` "
        "writes one object a line (ts, level, logger, msg, node, exc), for machines.")
    metrics_listener: str = define(
        "metrics.listener", STRING, "", p.http_listener, LOW,
        "Project key: `http://host:port` where this process serves its Prometheus metrics (`/metrics`), its "
        "status page (`/`) and the page's data (`/api/status`); port 0 takes a free port, logged at start. "
        "Empty: off, and no metric is recorded (broker/metrics.py, broker/status.py).")
    fault_hooks_enable: bool = define(
        "fault.hooks.enable", BOOLEAN, False, p.boolean, LOW,
        "Project key: whether the fault hooks of broker/faults.py can be set at all. Off, a `fault.*` change "
        "answers INVALID_CONFIG and nothing happens: no client can pause replication or cut the power of a broker "
        "it reaches. The cluster launcher, the drill and the test kit turn it on for the clusters they start "
        "(`epoch-broker cluster --no-fault-hooks` leaves it off).")
    kafka_version: KafkaRelease | None = define(
        "kafka.version", STRING, None, p.kafka_release, MEDIUM,
        "Project key: the Apache Kafka release (2.8 to 4.2) this process answers as: ApiVersions lists that "
        "release's APIs at the versions both it and this broker have (protocol/release_data.py, from Kafka's "
        "schemas at the release's tag), a request for another API or version is refused as that release refuses "
        "it, and the configs it differs on follow it (docs/releases.md). 2.8 to 3.9 answer as a ZooKeeper-mode "
        "broker, 4.0 on as KRaft. Unset: every API and version this broker serves, Kafka 4.2's client APIs "
        "with the older versions kept.")


GROUPS: tuple[type[Any], ...] = (KRaftConfigs, ZkConfigs, SocketServerConfigs, BrokerSecurityConfigs, ServerLogConfigs,
                            CleanerConfig, ReplicationConfigs, GroupCoordinatorConfig, TransactionConfigs,
                            OperationsConfigs)


def _keys(group: type[Any]) -> tuple[ConfigKey, ...]:
    """The group's keys in declaration order, each knowing its field and group."""
    return tuple(replace(key, attr=field.name, group=group.TITLE)
                 for field in fields(group) if (key := field.metadata.get(KEY)) is not None)


CATALOGUE: tuple[ConfigKey, ...] = tuple(key for group in GROUPS for key in _keys(group))


@dataclass(frozen=True, slots=True)
class GroupConfigKey:
    """A group config (Kafka's GroupConfig): a key set per group id, ConfigResource type GROUP (32)."""

    name: str
    type: ConfigType
    parse: p.Parser  # Kafka's check of the value alone: its ConfigDef type and validator
    doc: str
    broker: str = ""  # the broker key whose value is the default, and whose valid values bound this key's
    default: str = ""  # the default of a key no broker key backs


GROUP_CONFIGS_TITLE = "Group configs"
# Kafka 4.2's GroupConfig keys for the group types this broker serves (consumer and share groups); its streams.*
# and share.renew.acknowledge.enable keys are left out (no streams groups, no ShareFetch v2 renewals here).
GROUP_CONFIGS: tuple[GroupConfigKey, ...] = (
    GroupConfigKey("consumer.session.timeout.ms", INT, p.integer(1),
                   "The group's own `group.consumer.session.timeout.ms` (KIP-848 consumer groups).",
                   broker="group.consumer.session.timeout.ms"),
    GroupConfigKey("consumer.heartbeat.interval.ms", INT, p.integer(1),
                   "The group's own `group.consumer.heartbeat.interval.ms`.",
                   broker="group.consumer.heartbeat.interval.ms"),
    GroupConfigKey("share.session.timeout.ms", INT, p.integer(1),
                   "The share group's own `group.share.session.timeout.ms`.", broker="group.share.session.timeout.ms"),
    GroupConfigKey("share.heartbeat.interval.ms", INT, p.integer(1),
                   "The share group's own `group.share.heartbeat.interval.ms`.",
                   broker="group.share.heartbeat.interval.ms"),
    GroupConfigKey("share.record.lock.duration.ms", INT, p.integer(1_000),
                   "The share group's own `group.share.record.lock.duration.ms`.",
                   broker="group.share.record.lock.duration.ms"),
    GroupConfigKey("share.delivery.count.limit", INT, p.integer(2),
                   "The share group's own `group.share.delivery.count.limit`.",
                   broker="group.share.delivery.count.limit"),
    GroupConfigKey("share.partition.max.record.locks", INT, p.integer(100),
                   "The share group's own `group.share.partition.max.record.locks`.",
                   broker="group.share.partition.max.record.locks"),
    GroupConfigKey("share.auto.offset.reset", STRING, p.share_auto_offset_reset,
                   "Where a share-partition starts when the share group first reads it: `latest` (the log end), "
                   "`earliest` (the log start), or `by_duration:<duration>` (the first record written within that "
                   "ISO-8601 duration before now, e.g. `by_duration:PT1H`).", default="latest"),
    GroupConfigKey("share.isolation.level", STRING, p.choice("read_committed", "read_uncommitted"),
                   "`read_committed`: the share group is given committed transactional records only; "
                   "`read_uncommitted`: every record, aborted ones too.", default="read_uncommitted"),
)
# (session timeout, heartbeat interval): the first must stay above the second, each the group's or the broker's
GROUP_SESSION_HEARTBEAT = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                           ("share.session.timeout.ms", "share.heartbeat.interval.ms"))


def _group_config_section() -> str:
    rows = [(f"`{key.name}`", key.type.name, p.expected(key.parse),
             f"`{key.broker}`" if key.broker else key.default, key.doc) for key in GROUP_CONFIGS]
    return f"""## {GROUP_CONFIGS_TITLE}

Set per group id, before or while its members are there: IncrementalAlterConfigs on a GROUP resource (type 32;
SET, DELETE), as `kafka-configs --entity-type groups` or an AdminClient's `incremental_alter_configs` send it,
through the controller; every broker has the change at once. Unset, a key is the broker key named as its default.
A key not listed or a bad value is refused with INVALID_CONFIG and nothing changes; so is a value outside what its
broker key takes (Kafka bounds these by its `group.*.min.*` and `group.*.max.*` keys, which this broker does not
have), or a session timeout not above its heartbeat interval. Not yet read by the group coordinator nor by share
fetches (issue 34 wires them): until then a group runs with the broker keys whatever it has set.

{table(("key", "type", "valid values", "default", "doc"), rows)}"""


def default_text(key: ConfigKey) -> str:
    """A key's default as the reference page shows it."""
    if key.default is None:
        return "(unset)"
    text = render_value(key.default)
    if not text:
        return "(empty)"
    if key.type in (INT, LONG) and isinstance(key.default, int):
        if key.default in (INT_MAX, LONG_MAX):
            return f"{text} ({'Integer' if key.default == INT_MAX else 'Long'}.MAX_VALUE)"
        for unit, ms in (("day", 24 * HOUR_MS), ("hour", HOUR_MS), ("minute", 60_000)):
            if key.name.endswith(".ms") and key.default >= ms and key.default % ms == 0:
                count = key.default // ms
                return f"{text} ({count} {unit}{'s' if count > 1 else ''})"
        for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20)):
            if key.name.endswith(".bytes") and key.default >= size and key.default % size == 0:
                return f"{text} ({key.default // size} {unit})"
    return text


def _row(key: ConfigKey, scope: str) -> tuple[str, ...]:
    if scope == "topic":
        return (f"`{key.topic}`", "topic", key.type.name, p.expected(key.parse), default_text(key), "yes",
                f"default: `{key.name}`", key.importance.value, key.doc)
    synonyms = ", ".join(f"`{name}`" for name in key.names[1:])
    if key.per_listener:
        synonyms = ", ".join(filter(None, (synonyms, f"`listener.name.<listener>.{key.name}`")))
    return (f"`{key.name}`", "broker", key.type.name, p.expected(key.parse), default_text(key), "no", synonyms,
            key.importance.value, key.doc)


def render_reference() -> str:
    """docs/configuration.md: every key of the catalogue, by group, broker keys with their topic keys."""
    header = ("key", "scope", "type", "valid values", "default", "dynamic", "synonyms", "importance", "doc")
    sections = []
    for group in GROUPS:
        keys = _keys(group)
        rows: list[tuple[str, ...]] = []
        for key in keys:
            rows.append(_row(key, "broker"))
            if key.topic:
                rows.append(_row(key, "topic"))
        doc = " ".join((group.__doc__ or "").split())
        sections.append(f"## {group.TITLE}\n\n{doc}\n\n{table(header, rows)}")
    contents = "\n".join(f"- [{group.TITLE}]({anchor(group.TITLE)})" for group in GROUPS)
    return f"""# Configuration

Every key the broker accepts, with its type, default and meaning, grouped by concern as Kafka's are.

- **Broker keys** are read once at start, from the properties file (`epoch-broker serve FILE`), then
  `cluster.secret` from the environment, then each `--override key=value` in order; a later value wins, whichever
  of a key's synonyms sets it. A key the broker does not know is logged (`ignoring unknown config key`) and
  ignored, as a Kafka properties file carries many; a bad value stops the start with one line naming the key.
  DescribeConfigs answers them read-only, with where each value came from.
- **Topic keys** are set per topic at creation (CreateTopics) and changed at run time (IncrementalAlterConfigs SET
  and DELETE, APPEND and SUBTRACT on a list key such as `cleanup.policy`; AlterConfigs), through the controller;
  every broker applies a change at once. A topic without its own value takes the broker key named as its
  synonym. An unknown topic key or a bad value is refused with INVALID_CONFIG and nothing changes.
- **Group keys** are set per group id at run time: [{GROUP_CONFIGS_TITLE}]({anchor(GROUP_CONFIGS_TITLE)}).
- The `fault.*` hooks, which a broker started with `fault.hooks.enable=true` takes at run time, are in
  [faults.md](faults.md).

{contents}
- [{GROUP_CONFIGS_TITLE}]({anchor(GROUP_CONFIGS_TITLE)})

""" + "\n\n".join([*sections, _group_config_section()])
