"""Broker configuration: Kafka's server.properties key names, parsed and validated once at start, and the topic
configs. Every key is declared once, in config/catalogue.py; this module reads the properties into a BrokerConfig.

Rules:
- Keys are Kafka's (`node.id`/`broker.id`, `listeners`, `log.dirs`, ...); a key's synonyms set the same setting,
  and a later source wins: the properties file, then `cluster.secret` from the environment variable
  EPOCH_BROKER_CLUSTER_SECRET, then each `--override key=value` in order.
- Unknown keys: a broker property the catalogue does not know is logged ("ignoring unknown config key") and
  ignored, as a Kafka properties file carries many we do not need; but a `listener.name.<listener>.<key>` whose
  key cannot be set per listener is a ConfigError. A topic config the catalogue does not know is refused with
  INVALID_CONFIG ("unknown or unsupported topic config") by CreateTopics, AlterConfigs and
  IncrementalAlterConfigs alike (the controller checks them with `validate_topic_configs`), and nothing changes;
  so is a broker key sent to IncrementalAlterConfigs, which alters only the `fault.*` hooks at run time.
- A bad value raises `ConfigError` naming the key; the CLI turns it into ONE line and exit status 2.
- Defaults just work: `PLAINTEXT://127.0.0.1:9092` and a data dir `./data` under the current directory.
- A topic's effective configs (`topic_config`) are its own values over the broker keys they are synonyms of.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from epoch_broker.broker.config import parsers
from epoch_broker.broker.config.catalogue import (
    CATALOGUE,
    GROUP_CONFIGS,
    GROUP_SESSION_HEARTBEAT,
    BrokerSecurityConfigs,
    CleanerConfig,
    GroupConfigKey,
    GroupCoordinatorConfig,
    KRaftConfigs,
    OperationsConfigs,
    ReplicationConfigs,
    ServerLogConfigs,
    SocketServerConfigs,
    TransactionConfigs,
    ZkConfigs,
)
from epoch_broker.broker.config.definition import ConfigKey, ConfigType, render_value
from epoch_broker.broker.config.parsers import Endpoint, Parser

__all__ = ["ConfigKey", "ConfigType", "Endpoint", "render_value"]  # declared below, used with the rest

log = logging.getLogger(__name__)


class ConfigError(ValueError):
    """A config value that cannot be used; the message is the one line shown to the user."""


class StartupError(Exception):
    """The environment does not let the process start (a port in use, an unwritable or foreign data dir, too
    few file descriptors): one line for the user, exit status 2."""


CLUSTER_SECRET_ENV = "EPOCH_BROKER_CLUSTER_SECRET"  # how launchers pass cluster.secret (not in argv: ps shows it)
BROKER_USER = "epoch-broker"  # the SASL user brokers and the controller log in as with cluster.secret
BROKER_PRINCIPAL = f"User:{BROKER_USER}"

# Every broker property name (a key's own and its synonyms') -> (the BrokerConfig field it sets, its parser).
KEYS: dict[str, tuple[str, Parser]] = {
    name: (key.attr, parse) for key in CATALOGUE for name, parse in ((key.name, key.parse), *key.synonyms)}
# Topic-level keys the broker honours: topic key -> the broker key holding its default (same parser and type).
TOPIC_CONFIGS: dict[str, ConfigKey] = {key.topic: key for key in CATALOGUE if key.topic}
# ... as Kafka 4.0 on knows them (KIP-724 removed the message format version)
_TOPIC_CONFIGS_SINCE_4_0 = {name: key for name, key in TOPIC_CONFIGS.items() if name != "message.format.version"}
# Keys whose values DescribeConfigs never shows (Kafka's PASSWORD type): null, with is_sensitive set.
SENSITIVE_KEYS = frozenset(name for key in CATALOGUE if key.sensitive for name in key.names)
# What may follow `listener.name.<listener>.`: a key with a per-listener value (or a mechanism's JAAS config).
PER_LISTENER_KEYS = frozenset(key.name for key in CATALOGUE if key.per_listener)

# Group config keys (ConfigResource type 32) by name.
GROUP_CONFIG_KEYS: dict[str, GroupConfigKey] = {key.name: key for key in GROUP_CONFIGS}
_BROKER_KEYS = {key.name: key for key in CATALOGUE}

# Kafka's ConfigSource codes, as DescribeConfigs and CreateTopics (v5+) report where a value comes from.
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 2, 4, 5
DYNAMIC_GROUP_CONFIG = 8  # Kafka's GROUP_CONFIG: a key set for the group


@dataclass(frozen=True)
class BrokerConfig(KRaftConfigs, ZkConfigs, SocketServerConfigs, BrokerSecurityConfigs, ServerLogConfigs,
                   CleanerConfig, ReplicationConfigs, GroupCoordinatorConfig, TransactionConfigs, OperationsConfigs):
    """Every key's value (the fields of the catalogue's groups), and the per-listener settings."""

    # `listener.name.<listener>.<key>` settings (lower-case listener name, as Kafka spells them), in order:
    # a listener's own value of an ssl.* or sasl key, and its `<mechanism>.sasl.jaas.config`.
    listener_settings: tuple[tuple[str, str], ...] = ()

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
    def topic_configs(self) -> Mapping[str, ConfigKey]:
        """The topic keys this process knows: every one, but those the release it emulates lacks."""
        release = self.kafka_version
        return TOPIC_CONFIGS if release is None or release.accepts_message_format_version else _TOPIC_CONFIGS_SINCE_4_0

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


def _parse(key: str, parse: Parser, text: str) -> Any:
    try:
        return parse(text)
    except ValueError:
        raise ConfigError(f"invalid value for {key}: {text!r} (expected {parsers.expected(parse)})") from None


LISTENER_PREFIX = "listener.name."
KAFKA_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def _listener_setting(key: str, text: str) -> tuple[str, str]:
    """A `listener.name.<listener>.<key>` pair, checked: the key must be one a listener can have."""
    rest = key[len(LISTENER_PREFIX):]
    listener, _, setting = rest.partition(".")
    jaas = setting.endswith(".sasl.jaas.config") and setting[: -len(".sasl.jaas.config")].upper() in (
        SUPPORTED_MECHANISMS)
    if not (jaas or setting in PER_LISTENER_KEYS):
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
            mechanisms = parsers.names(config.listener_setting(endpoint.listener, "sasl.enabled.mechanisms"))
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


def validate_topic_configs(config: BrokerConfig, configs: Mapping[str, str | None]) -> str | None:
    """Why these topic configs cannot be used (one line), or None."""
    known = config.topic_configs
    for name, text in configs.items():
        key = known.get(name)
        if key is None:
            return f"unknown or unsupported topic config {name}"
        try:
            key.parse(text or "")
        except ValueError:
            return f"invalid value for {name}: {text!r} (expected {parsers.expected(key.parse)})"
    return None


def topic_config(config: BrokerConfig, overrides: dict[str, str]) -> dict[str, Any]:
    """The effective value of every topic-level key: the topic's override, else the broker default."""
    return {
        name: key.parse(overrides[name]) if name in overrides else getattr(config, key.attr)
        for name, key in config.topic_configs.items()
    }


def group_config_value(config: BrokerConfig, configs: Mapping[str, str], name: str) -> str:
    """A group config's value as text: the group's (`configs`), else its default: the broker key backing it (as
    Kafka's GroupCoordinatorConfig.extractGroupConfigMap), else its own."""
    if name in configs:
        return configs[name]
    key = GROUP_CONFIG_KEYS[name]
    return render_value(getattr(config, _BROKER_KEYS[key.broker].attr)) if key.broker else key.default


def validate_group_configs(config: BrokerConfig, configs: Mapping[str, str]) -> str | None:
    """Why a group cannot have these configs (its whole set), in Kafka's words (GroupConfig.validate), or None.
    Checked in Kafka's order: the names, each value alone, each value within what its broker key takes (Kafka
    bounds it by the broker's `group.*.min.*` / `group.*.max.*` keys, which this broker does not have), then each
    session timeout above its heartbeat interval, the broker's values standing in for keys the group has not set."""
    for name in configs:
        if name not in GROUP_CONFIG_KEYS:
            return f"Unknown group config name: {name}"
    for name, text in configs.items():
        try:
            GROUP_CONFIG_KEYS[name].parse(text)
        except ValueError as exc:
            return f"Invalid value {text} for configuration {name}: {exc}"
    for name, text in configs.items():
        if broker := GROUP_CONFIG_KEYS[name].broker:
            parse = _BROKER_KEYS[broker].parse
            try:
                parse(text)
            except ValueError:
                return f"{name} must be {parsers.expected(parse)}, as {broker} is"
    for session, heartbeat in GROUP_SESSION_HEARTBEAT:
        if int(group_config_value(config, configs, session)) <= int(group_config_value(config, configs, heartbeat)):
            return f"{session} must be greater than {heartbeat}"
    return None
