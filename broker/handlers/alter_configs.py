"""AlterConfigs · v0-2 · replace a topic's configs (the legacy form of IncrementalAlterConfigs).

Behaviour: needs ALTER_CONFIGS on the topic (else TOPIC_AUTHORIZATION_FAILED) or, for a broker, on the cluster
(else CLUSTER_AUTHORIZATION_FAILED), checked per resource before anything else. Resource type 2 (topic): the
request's configs become the topic's whole override set; a key it leaves out (or sends with a null value) goes back
to the broker default. The change goes through the controller as IncrementalAlterConfigs' does (one
TopicConfigRecord, same validation and errors), computed against the topic's configs as this broker knows them.
Skipped: resource type 4 (broker): INVALID_REQUEST naming IncrementalAlterConfigs, which sets the fault hooks
(a whole-set replace would clear every hook the request does not name). Other resource types: INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import BROKER, CONTROLLER, RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation
from epoch_broker.broker.security.authorization import config_resource_refusal
from epoch_broker.broker.services import Services
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import alter_configs
from epoch_broker.protocol.messages.incremental_alter_configs import TOPIC_RESOURCE

Response = alter_configs.RESPONSE.cls
Result = alter_configs.RESPONSE.AlterConfigsResourceResponse


@handles(alter_configs.API, "0-2", roles=(BROKER, CONTROLLER))
async def handle(context: RequestContext[Services], request: Any) -> Any:
    results = []
    for resource in request.resources:
        result = Result(error_code=ErrorCode.NONE, error_message=None, resource_type=resource.resource_type,
                        resource_name=resource.resource_name)
        refusal = config_resource_refusal(context, AclOperation.ALTER_CONFIGS, resource.resource_type,
                                          resource.resource_name)
        if refusal is not None:
            result.error_code = refusal
        elif resource.resource_type != TOPIC_RESOURCE:
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = (f"AlterConfigs changes topic configs only (resource type {TOPIC_RESOURCE}); "
                                    "a broker's fault hooks are set with IncrementalAlterConfigs")
        else:
            topic = context.services.metadata.topics_by_name.get(resource.resource_name)
            wanted = {config.name: config.value for config in resource.configs}
            # keys the topic has and the request leaves out go back to their defaults
            changes = {**dict.fromkeys(topic.configs if topic else ()), **wanted}
            result.error_code, result.error_message = await context.services.channel.alter_topic_configs(
                resource.resource_name, changes, request.validate_only)
        results.append(result)
    return Response(throttle_time_ms=0, responses=results)
