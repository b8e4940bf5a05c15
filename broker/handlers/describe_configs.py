"""DescribeConfigs · v0-4 · the settings of a topic or of this broker.

Behaviour: needs DESCRIBE_CONFIGS on the topic (else TOPIC_AUTHORIZATION_FAILED) or, for a broker, on the cluster
(else CLUSTER_AUTHORIZATION_FAILED), checked per resource before anything else; a refused resource is answered
without configs. Resource type 2 (topic): every topic-level key the broker honours, with the topic's override
(source DYNAMIC_TOPIC_CONFIG) or the broker's value: STATIC_BROKER_CONFIG when the broker's key is set to something
other than Kafka's default, else DEFAULT_CONFIG; UNKNOWN_TOPIC_OR_PARTITION for an unknown topic. Type 4 (broker,
named by its node id, or "" for any): every broker key it honours (STATIC_BROKER_CONFIG when set away from its
default, else DEFAULT_CONFIG), and the fault hooks in force (`fault.*`, set with IncrementalAlterConfigs:
DYNAMIC_BROKER_CONFIG, as Kafka reports dynamic broker configs). configuration_keys narrows the list. Other
resource types: INVALID_REQUEST.
Version notes: v1+ config_source, and with include_synonyms every source of the value in Kafka's order of
precedence: the topic's override, the broker key (log.retention.ms for retention.ms) if set, its default. v3+
config_type (Kafka's type of the key: LONG retention.ms, INT segment.bytes, LIST cleanup.policy, ...).
read_only is true for the static broker configs only: topic configs and fault hooks are alterable.
Sensitive values (ssl.key.password, ssl.keystore.key) are answered null with is_sensitive set, as Kafka does.
Skipped: documentation (null).
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.config import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    KEYS,
    SENSITIVE_KEYS,
    STATIC_BROKER_CONFIG,
    TOPIC_CONFIGS,
    BrokerConfig,
    render_value,
    topic_config,
)
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

TOPIC, BROKER = 2, 4
# Kafka's ConfigType codes
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST, PASSWORD = 1, 2, 3, 5, 6, 7, 9
# Kafka's types of the topic keys (LogConfig's definitions); a broker key sharing a setting has the same type
TOPIC_TYPES = {
    "retention.ms": LONG, "retention.bytes": LONG, "segment.bytes": INT, "segment.ms": LONG,
    "max.message.bytes": INT, "message.timestamp.type": STRING, "min.insync.replicas": INT,
    "unclean.leader.election.enable": BOOLEAN, "flush.messages": LONG, "flush.ms": LONG, "cleanup.policy": LIST,
    "compression.type": STRING, "message.timestamp.before.max.ms": LONG, "message.timestamp.after.max.ms": LONG,
    "delete.retention.ms": LONG, "min.cleanable.dirty.ratio": DOUBLE, "min.compaction.lag.ms": LONG,
    "max.compaction.lag.ms": LONG,
}
# broker keys Kafka declares LONG (the other integers are INT)
BROKER_LONGS = frozenset({"log.retention.ms", "log.retention.bytes", "log.roll.ms", "log.flush.interval.messages",
                          "log.flush.interval.ms", "replica.lag.time.max.ms", "connections.max.idle.ms",
                          "transaction.abort.timed.out.transaction.cleanup.interval.ms"})
DEFAULTS = BrokerConfig()
BROKER_KEY_OF: dict[str, str] = {}  # setting -> its broker key: the first, a broker's own name over a topic key's
for _key, (_attr, _) in KEYS.items():
    if _attr not in BROKER_KEY_OF or (BROKER_KEY_OF[_attr] in TOPIC_CONFIGS and _key not in TOPIC_CONFIGS):
        BROKER_KEY_OF[_attr] = _key


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
        for key, (attr, _) in TOPIC_CONFIGS.items():
            sources = _broker_sources(broker.config, attr)
            if key in topic.configs:
                sources.insert(0, (key, topic.configs[key], DYNAMIC_TOPIC_CONFIG))
            entries.append((key, render_value(effective[key]), TOPIC_TYPES.get(key, STRING), sources))
    elif resource.resource_type == BROKER and resource.resource_name in ("", str(broker.node_id)):
        entries = [(key, render_value(getattr(broker.config, attr)), _broker_type(key),
                    _broker_sources(broker.config, attr)) for attr, key in BROKER_KEY_OF.items()]
        entries += [(key, value, STRING, [(key, value, DYNAMIC_BROKER_CONFIG)])
                    for key, value in sorted(broker.faults.in_force().items())]
    else:
        result.error_code = ErrorCode.INVALID_REQUEST
        result.error_message = f"cannot describe resource type {resource.resource_type} {resource.resource_name!r}"
        return result
    wanted = None if resource.configuration_keys is None else set(resource.configuration_keys)
    result.configs = [
        # a topic's configs are alterable (IncrementalAlterConfigs, AlterConfigs); a broker's static ones are not
        ConfigEntry(name=key, value=None if key in SENSITIVE_KEYS else value,
                    read_only=resource.resource_type == BROKER and source != DYNAMIC_BROKER_CONFIG,
                    is_default=source == DEFAULT_CONFIG, config_source=source, is_sensitive=key in SENSITIVE_KEYS,
                    synonyms=[Synonym(name=name, value=None if name in SENSITIVE_KEYS else text, source=where)
                              for name, text, where in sources] if request_synonyms else [],
                    config_type=config_type, documentation=None)
        for key, value, config_type, sources in entries
        if wanted is None or key in wanted
        for source in [sources[0][2]]
    ]
    return result


def _broker_sources(config: BrokerConfig, attr: str) -> list[tuple[str, str, int]]:
    """(key, value, source) of a broker setting: as set, when it differs from Kafka's default, then the default."""
    key = BROKER_KEY_OF[attr]
    value, default = getattr(config, attr), getattr(DEFAULTS, attr)
    sources = [(key, render_value(default), DEFAULT_CONFIG)]
    if value != default:
        sources.insert(0, (key, render_value(value), STATIC_BROKER_CONFIG))
    return sources


def _broker_type(key: str) -> int:
    value = getattr(DEFAULTS, KEYS[key][0])
    if key in SENSITIVE_KEYS:
        return PASSWORD
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int):
        return LONG if key in BROKER_LONGS else INT
    if isinstance(value, float):
        return DOUBLE
    return LIST if isinstance(value, tuple | frozenset | list) else STRING
