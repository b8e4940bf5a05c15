"""CreateTopics · v0-7 · create topics through the controller.

Behaviour: a topic needs CREATE on the cluster or on itself (TOPIC_AUTHORIZATION_FAILED, nothing checked further);
its configs are answered only with DESCRIBE_CONFIGS on it (else topic_config_error_code TOPIC_AUTHORIZATION_FAILED,
as Kafka's controller answers). Then per topic: name validation (INVALID_TOPIC_EXCEPTION), TOPIC_ALREADY_EXISTS,
num_partitions and replication_factor (-1: num.partitions / default.replication.factor), explicit assignments
(INVALID_REPLICA_ASSIGNMENT), INVALID_PARTITIONS below 1, INVALID_REPLICATION_FACTOR above the live broker count,
topic configs limited to the keys the broker honours (INVALID_CONFIG otherwise). validate_only checks everything
and creates nothing.
Version notes: v5+ answers num_partitions, replication_factor and the topic's configs; v7 the topic id.
Skipped: timeout_ms (creation completes before the answer), config synonyms and documentation.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.config import DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG, render_value, topic_config
from epoch_broker.broker.controller.replication_control import NewTopic
from epoch_broker.broker.network.dispatch import BROKER, CONTROLLER, RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import Services
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import create_topics

Response = create_topics.RESPONSE.cls
TopicResult = create_topics.RESPONSE.CreatableTopicResult
TopicConfig = create_topics.RESPONSE.CreatableTopicConfigs


@handles(create_topics.API, "0-7", roles=(BROKER, CONTROLLER))
async def handle(context: RequestContext[Services], request: Any) -> Any:
    broker = context.services
    creatable = authorized_names(context, AclOperation.CREATE, ResourceType.TOPIC,
                                 (t.name for t in request.topics), or_cluster=AclOperation.CREATE)
    configs_visible = authorized_names(context, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, creatable)
    wanted = [t for t in request.topics if t.name in creatable]
    new_topics = [
        NewTopic(t.name, t.num_partitions, t.replication_factor,
                 {a.partition_index: list(a.broker_ids) for a in t.assignments},
                 {c.name: c.value for c in t.configs})
        for t in wanted
    ]
    results = iter(await broker.channel.create_topics(new_topics, request.validate_only) if new_topics else ())
    topics = []
    for topic in request.topics:
        if topic.name not in creatable:
            topics.append(TopicResult(name=topic.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                      error_message="Authorization failed."))
            continue
        result = next(results)
        answer = TopicResult(name=result.name, error_code=result.error_code, error_message=result.error_message)
        if result.error_code == ErrorCode.NONE:
            answer.topic_id = result.topic_id
            answer.num_partitions = result.num_partitions
            answer.replication_factor = result.replication_factor
            if result.name not in configs_visible:
                answer.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else:
                effective = topic_config(broker.config, result.configs)
                answer.configs = [
                    TopicConfig(name=key, value=render_value(effective[key]), read_only=False, is_sensitive=False,
                                config_source=DYNAMIC_TOPIC_CONFIG if key in result.configs else DEFAULT_CONFIG)
                    for key in broker.config.topic_configs
                ]
        topics.append(answer)
    return Response(topics=topics)
