"""DescribeConfigs · v0-4 · the settings of a topic or of this broker.

Behaviour: needs DESCRIBE_CONFIGS on the topic (else TOPIC_AUTHORIZATION_FAILED) or, for a broker, on the cluster
(else CLUSTER_AUTHORIZATION_FAILED), checked per resource before anything else; a refused resource is answered
without configs. Resource type 2 (topic): every topic-level key the broker honours, with the topic's override
(source DYNAMIC_TOPIC_CONFIG) or the broker default (DEFAULT_CONFIG); UNKNOWN_TOPIC_OR_PARTITION for an unknown
topic. Type 4 (broker, named by its node id, or "" for any): every broker key it honours, from the properties file
and overrides (STATIC_BROKER_CONFIG), and the fault hooks in force (`fault.*`, set with IncrementalAlterConfigs:
DYNAMIC_BROKER_CONFIG, as Kafka reports dynamic broker configs). configuration_keys narrows the list. Other
resource types: INVALID_REQUEST.
Version notes: v1+ config_source and synonyms (always empty here), v3+ config_type and documentation (null).
read_only is true for the static broker configs only: topic configs and fault hooks are alterable.
Sensitive values (ssl.key.password, ssl.keystore.key) are answered null with is_sensitive set, as Kafka does.
Skipped: synonyms, documentation.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.config import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    SENSITIVE_KEYS,
    STATIC_BROKER_CONFIG,
    TOPIC_CONFIGS,
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

TOPIC, BROKER = 2, 4


@handles(describe_configs.API, "0-4")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    return Response(results=[_describe(context, resource) for resource in request.resources])


def _describe(context: RequestContext[BrokerServices], resource: Any) -> Any:
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
        entries = [(key, render_value(effective[key]), DYNAMIC_TOPIC_CONFIG if key in topic.configs
                    else DEFAULT_CONFIG) for key in TOPIC_CONFIGS]
    elif resource.resource_type == BROKER and resource.resource_name in ("", str(broker.node_id)):
        entries = [(key, value, STATIC_BROKER_CONFIG) for key, value in broker.config.as_properties().items()]
        entries += [(key, value, DYNAMIC_BROKER_CONFIG) for key, value in sorted(broker.faults.in_force().items())]
    else:
        result.error_code = ErrorCode.INVALID_REQUEST
        result.error_message = f"cannot describe resource type {resource.resource_type} {resource.resource_name!r}"
        return result
    wanted = None if resource.configuration_keys is None else set(resource.configuration_keys)
    result.configs = [
        # a topic's configs are alterable (IncrementalAlterConfigs, AlterConfigs); a broker's static ones are not
        ConfigEntry(name=key, value=None if key in SENSITIVE_KEYS else value, read_only=source == STATIC_BROKER_CONFIG,
                    is_default=source == DEFAULT_CONFIG, config_source=source, is_sensitive=key in SENSITIVE_KEYS,
                    synonyms=[],
                    documentation=None)
        for key, value, source in entries
        if wanted is None or key in wanted
    ]
    return result
