"""DescribeConfigs · v0-4 · the settings of a topic, of this broker, of a client-metrics resource or of a group.

Behaviour: needs DESCRIBE_CONFIGS on the topic (else TOPIC_AUTHORIZATION_FAILED) or, for a broker, on the cluster
(else CLUSTER_AUTHORIZATION_FAILED), checked per resource before anything else; a refused resource is answered
without configs. Resource type 2 (topic): every topic-level key the broker honours, with the topic's override
(source DYNAMIC_TOPIC_CONFIG) or the broker's value: STATIC_BROKER_CONFIG when the broker's key is set to something
other than its default, else DEFAULT_CONFIG; UNKNOWN_TOPIC_OR_PARTITION for an unknown topic. Type 4 (broker,
named by its node id, or "" for any): every broker key it honours (STATIC_BROKER_CONFIG when set away from its
default, else DEFAULT_CONFIG), and the fault hooks in force (`fault.*`, set with IncrementalAlterConfigs:
DYNAMIC_BROKER_CONFIG, as Kafka reports dynamic broker configs). configuration_keys narrows the list. Other
resource types: INVALID_REQUEST. Type 16 (client metrics, KIP-714, on the cluster's DESCRIBE_CONFIGS): the
subscription's keys as set (CLIENT_METRICS_CONFIG, read_only false), none for an unknown name, as Kafka answers.
Type 32 (group, on the group's DESCRIBE_CONFIGS, else GROUP_AUTHORIZATION_FAILED): every group key, as Kafka
4.x's ConfigHelper answers a group: a key the group has set with source DYNAMIC_GROUP_CONFIG (8), the others with
their default (the broker key backing it, e.g. group.share.session.timeout.ms's value, or the key's own) as
DEFAULT_CONFIG; read_only false; any group id, known or not; an empty one is INVALID_REQUEST.
Version notes: v1+ config_source, and with include_synonyms every source of the value in Kafka's order of
precedence: the topic's override, the broker key (log.retention.ms for retention.ms) if set, its default. v3+
config_type (the key's type in the catalogue, broker/config/catalogue.py, Kafka's: LONG retention.ms, INT
segment.bytes, LIST cleanup.policy, ...). Keys, sources, synonyms, types and secrecy all come from the catalogue.
read_only is true for the static broker configs only: topic configs and fault hooks are alterable.
`advertised.listeners` follows the emulated release (`kafka.version`, protocol/releases.py): from 4.0 (and
unset) STATIC_BROKER_CONFIG with the endpoints advertised, read-only; before, a per-broker dynamic config
(read_only false) with the source of its setting, as those releases answer. From 4.1 (and unset),
`min.insync.replicas` comes first from the cluster-level dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG, the
broker's value) that Kafka's controller writes for eligible leader replicas (KIP-966), on topics and brokers.
Sensitive values (the PASSWORD keys: ssl.key.password, ssl.keystore.key, cluster.secret) are answered null with
is_sensitive set, as Kafka does.
Skipped: documentation (null).
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.config import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_GROUP_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    STATIC_BROKER_CONFIG,
    BrokerConfig,
    ConfigKey,
    ConfigType,
    group_config_value,
    render_value,
    topic_config,
)
from epoch_broker.broker.config.catalogue import CATALOGUE, GROUP_CONFIGS
from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation
from epoch_broker.broker.security.authorization import config_resource_refusal
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import describe_configs

Response = describe_configs.RESPONSE.cls
Result = describe_configs.RESPONSE.DescribeConfigsResult
ConfigEntry = describe_configs.RESPONSE.DescribeConfigsResourceResult
Synonym = describe_configs.RESPONSE.DescribeConfigsSynonym

TOPIC, BROKER, CLIENT_METRICS, GROUP = 2, 4, 16, 32
CLIENT_METRICS_CONFIG = 7  # Kafka's ConfigSource of a client-metrics resource's keys (KIP-714)
CLIENT_METRICS_TYPES = {"metrics": ConfigType.LIST, "interval.ms": ConfigType.INT, "match": ConfigType.LIST}
DEFAULTS = BrokerConfig()
ADVERTISED_LISTENERS = "advertised.listeners"
MIN_INSYNC_REPLICAS = "min.insync.replicas"
DYNAMIC_DEFAULT_BROKER_CONFIG = 3  # Kafka's ConfigSource of a cluster-level dynamic broker config


@handles(describe_configs.API, "0-4")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    return Response(results=[_describe(context, resource, request.include_synonyms)
                             for resource in request.resources])


def _describe(context: RequestContext[BrokerServices], resource: Any, request_synonyms: bool) -> Any:
    broker = context.services
    result = Result(error_code=ErrorCode.NONE, error_message=None, resource_type=resource.resource_type,
                    resource_name=resource.resource_name, configs=[])
    refusal = config_resource_refusal(context, AclOperation.DESCRIBE_CONFIGS, resource.resource_type,
                                      resource.resource_name)
    if refusal is not None:
        result.error_code = refusal
        return result
    if resource.resource_type == TOPIC:
        topic = broker.metadata.topics_by_name.get(resource.resource_name)
        if topic is None:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            result.error_message = f"topic {resource.resource_name!r} does not exist"
            return result
        effective = topic_config(broker.config, topic.configs)
        entries = []
        for name, key in broker.config.topic_configs.items():
            sources = _broker_sources(broker.config, key)
            if name in topic.configs:
                sources.insert(0, (name, topic.configs[name], DYNAMIC_TOPIC_CONFIG))
            entries.append((name, render_value(effective[name]), key.type, key.sensitive, sources))
    elif resource.resource_type == BROKER and resource.resource_name in ("", str(broker.node_id)):
        entries = [_broker_entry(broker.config, key) for key in CATALOGUE]
        entries += [(name, value, ConfigType.STRING, False, [(name, value, DYNAMIC_BROKER_CONFIG)])
                    for name, value in sorted(broker.faults.in_force().items())]
    elif resource.resource_type == CLIENT_METRICS and resource.resource_name:
        # a subscription's keys as set, none when it has none (Kafka answers no defaults for them)
        entries = [(name, value, CLIENT_METRICS_TYPES.get(name, ConfigType.STRING), False,
                    [(name, value, CLIENT_METRICS_CONFIG)])
                   for name, value in sorted(broker.metadata.client_metrics.get(resource.resource_name, {}).items())]
    elif resource.resource_type == GROUP and resource.resource_name:
        group = broker.metadata.group_configs.get(resource.resource_name, {})
        entries = [(key.name, value, key.type, False,
                    [(key.name, value, DYNAMIC_GROUP_CONFIG if key.name in group else DEFAULT_CONFIG)])
                   for key in GROUP_CONFIGS for value in [group_config_value(broker.config, group, key.name)]]
    else:
        result.error_code = ErrorCode.INVALID_REQUEST
        result.error_message = f"cannot describe resource type {resource.resource_type} {resource.resource_name!r}"
        return result
    wanted = None if resource.configuration_keys is None else set(resource.configuration_keys)
    release = broker.config.kafka_version
    dynamic_broker_keys = () if release is None or release.static_advertised_listeners else (ADVERTISED_LISTENERS,)
    result.configs = [
        # a topic's configs are alterable (IncrementalAlterConfigs, AlterConfigs); a broker's keys are read at
        # start (the catalogue's broker scope), its fault hooks are not
        ConfigEntry(name=name, value=None if sensitive else value,
                    read_only=resource.resource_type == BROKER and source != DYNAMIC_BROKER_CONFIG
                    and name not in dynamic_broker_keys,
                    is_default=source == DEFAULT_CONFIG, config_source=source, is_sensitive=sensitive,
                    synonyms=[Synonym(name=synonym, value=None if sensitive else text, source=where)
                              for synonym, text, where in sources] if request_synonyms else [],
                    config_type=config_type, documentation=None)
        for name, value, config_type, sensitive, sources in entries
        if wanted is None or name in wanted
        for source in [sources[0][2]]
    ]
    return result


Entry = tuple[str, str, ConfigType, bool, list[tuple[str, str, int]]]  # name, value, type, sensitive, sources


def _broker_entry(config: BrokerConfig, key: ConfigKey) -> Entry:
    release = config.kafka_version
    if key.name == ADVERTISED_LISTENERS and (release is None or release.static_advertised_listeners):
        value = ",".join(str(endpoint) for endpoint in config.advertised_endpoints().values())
        return key.name, value, key.type, key.sensitive, [(key.name, value, STATIC_BROKER_CONFIG)]
    return (key.name, render_value(getattr(config, key.attr)), key.type, key.sensitive,
            _broker_sources(config, key))


def _broker_sources(config: BrokerConfig, key: ConfigKey) -> list[tuple[str, str, int]]:
    """(name, value, source) of a broker key: the cluster-level dynamic default a release's controller writes
    (`min.insync.replicas` from 4.1, and unset), as set when it differs from its default, then the default."""
    value, default = getattr(config, key.attr), getattr(DEFAULTS, key.attr)
    sources = [(key.name, render_value(default), DEFAULT_CONFIG)]
    if value != default:
        sources.insert(0, (key.name, render_value(value), STATIC_BROKER_CONFIG))
    release = config.kafka_version
    if key.name == MIN_INSYNC_REPLICAS and (release is None or release.cluster_min_insync_replicas):
        sources.insert(0, (key.name, render_value(value), DYNAMIC_DEFAULT_BROKER_CONFIG))
    return sources
