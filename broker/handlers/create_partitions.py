"""CreatePartitions · v0-3 · add partitions to a topic through the controller.

Behaviour: a topic needs ALTER on itself (TOPIC_AUTHORIZATION_FAILED, before its existence is looked at).
UNKNOWN_TOPIC_OR_PARTITION for an unknown topic, INVALID_PARTITIONS when the count does not grow,
INVALID_REPLICA_ASSIGNMENT for assignments that are not one list of distinct live brokers per new partition,
INVALID_REPLICATION_FACTOR when the topic's replication factor exceeds the live brokers. validate_only checks and
changes nothing. New partitions start at leader epoch 0.
Skipped: timeout_ms.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import BROKER, CONTROLLER, RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import Services
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import create_partitions

Response = create_partitions.RESPONSE.cls
Result = create_partitions.RESPONSE.CreatePartitionsTopicResult


@handles(create_partitions.API, "0-3", roles=(BROKER, CONTROLLER))
async def handle(context: RequestContext[Services], request: Any) -> Any:
    channel = context.services.channel
    alterable = authorized_names(context, AclOperation.ALTER, ResourceType.TOPIC, (t.name for t in request.topics))
    results = []
    for topic in request.topics:
        if topic.name not in alterable:
            results.append(Result(name=topic.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        assignments = None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
        error, message = await channel.create_partitions(topic.name, topic.count, assignments,
                                                        request.validate_only)
        results.append(Result(name=topic.name, error_code=error, error_message=message))
    return Response(results=results)
