"""IncrementalAlterConfigs · v0-1 · topic configs, client-metrics subscriptions, group configs, this process's
fault hooks.

Behaviour: needs ALTER_CONFIGS on the topic (else TOPIC_AUTHORIZATION_FAILED) or, for a broker, on the cluster
(else CLUSTER_AUTHORIZATION_FAILED), checked per resource before anything else; a resource setting or clearing a
fault hook (`fault.*`: it can stop replication, drop requests or end the process) needs ALTER on the cluster as
well (CLUSTER_AUTHORIZATION_FAILED, and nothing of that resource is applied). Resource type 2 (topic): SET (0) and
DELETE (1, back to the broker default) of the topic keys of the config catalogue (broker/config/catalogue.py),
through the controller as one TopicConfigRecord; every broker applies it to its partitions (retention, segments,
flushing, timestamps, min.insync.replicas) when it arrives, and the answer waits until the broker that answers has
it. APPEND (2) and SUBTRACT (3) on a list-typed topic key (`cleanup.policy`) add the comma-separated items not
there yet to, or remove them from, the topic's current value (its override, else the broker default), decided
by the controller as Kafka's ConfigurationControlManager does; on a key of another type INVALID_CONFIG.
Unknown topic: UNKNOWN_TOPIC_OR_PARTITION; an unknown key or a bad value: INVALID_CONFIG, nothing changed.
Resource type 16 (client metrics, KIP-714): a subscription named by the resource (`metrics`, `interval.ms`,
`match`, checked as Kafka's ClientMetricsConfigs: broker/client_metrics.py), the same four operations, through the
controller as one ClientMetricsConfigRecord; deleting its last key removes the subscription.
Resource type 32 (group, needs ALTER_CONFIGS on the group, else GROUP_AUTHORIZATION_FAILED): the group id's
configs (Kafka's GroupConfig keys: broker/config/catalogue.py's GROUP_CONFIGS, checked as a whole set as Kafka's
GroupConfig.validate), SET and DELETE, through the controller as one GroupConfigRecord; the group need not exist.
Resource type 4 (broker) named by this node id (or "" for any): every `fault.*` key of the catalogue; SET sets it,
DELETE clears it (a flag goes back to false, a request rule is removed). `fault.power.loss` (SET, any value) cuts
every log back to its recovery point, the offset up to which it was fsynced, and exits at once with status 137
without answering, as a power cut would. A resource's changes are all validated before any is applied;
validate_only applies none. A fault key or value the catalogue refuses: INVALID_CONFIG; another node's name or
another resource type: INVALID_REQUEST. Served by controller-only processes too (request rules, and topic configs,
which they apply themselves).
Skipped: APPEND and SUBTRACT on a broker resource (its fault hooks are no lists): INVALID_REQUEST.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from epoch_broker.broker.controller.config_control import ListChange, TopicConfigChange
from epoch_broker.broker.faults import FaultConfigError
from epoch_broker.broker.network.dispatch import BROKER, CONTROLLER, RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation
from epoch_broker.broker.security.authorization import config_resource_refusal
from epoch_broker.broker.services import Services
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import incremental_alter_configs

Response = incremental_alter_configs.RESPONSE.cls
Result = incremental_alter_configs.RESPONSE.AlterConfigsResourceResponse

TOPIC_RESOURCE, BROKER_RESOURCE = incremental_alter_configs.TOPIC_RESOURCE, incremental_alter_configs.BROKER_RESOURCE
CLIENT_METRICS_RESOURCE = incremental_alter_configs.CLIENT_METRICS_RESOURCE
GROUP_RESOURCE = incremental_alter_configs.GROUP_RESOURCE
SET, DELETE = incremental_alter_configs.SET, incremental_alter_configs.DELETE
APPEND, SUBTRACT = incremental_alter_configs.APPEND, incremental_alter_configs.SUBTRACT
FAULT_KEY_PREFIX = "fault."


class _Rejected(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@handles(incremental_alter_configs.API, "0-1", roles=(BROKER, CONTROLLER))
async def handle(context: RequestContext[Services], request: Any) -> Any:
    return Response(throttle_time_ms=0, responses=[
        await _alter(context, resource, request.validate_only) for resource in request.resources])


async def _alter(context: RequestContext[Services], resource: Any, validate_only: bool) -> Any:
    services = context.services
    result = Result(error_code=ErrorCode.NONE, error_message=None, resource_type=resource.resource_type,
                    resource_name=resource.resource_name)
    try:
        _authorize(context, resource)
        if resource.resource_type == TOPIC_RESOURCE:
            result.error_code, result.error_message = await services.channel.alter_topic_configs(
                resource.resource_name, _topic_changes(resource), validate_only)
            return result
        if resource.resource_type == CLIENT_METRICS_RESOURCE:
            result.error_code, result.error_message = await services.channel.alter_client_metrics_configs(
                resource.resource_name, _topic_changes(resource), validate_only)
            return result
        if resource.resource_type == GROUP_RESOURCE:
            result.error_code, result.error_message = await services.channel.alter_group_configs(
                resource.resource_name, _topic_changes(resource), validate_only)
            return result
        changes = _validate(services, resource)
    except _Rejected as exc:
        result.error_code, result.error_message = exc.code, str(exc)
        return result
    if not validate_only:
        for change in changes:
            change()
    return result


def _authorize(context: RequestContext[Services], resource: Any) -> None:
    """_Rejected unless the request may alter the resource's configs, and (fault hooks) ALTER the cluster."""
    refusal = config_resource_refusal(context, AclOperation.ALTER_CONFIGS, resource.resource_type,
                                      resource.resource_name)
    if refusal is not None:
        raise _Rejected(refusal, f"{context.principal} may not alter the configs of {resource.resource_name!r}")
    if any(config.name.startswith(FAULT_KEY_PREFIX) for config in resource.configs) and (
            not context.authorized(AclOperation.ALTER)):
        raise _Rejected(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        f"{context.principal} may not set fault hooks: they need ALTER on the cluster")


def _topic_changes(resource: Any) -> dict[str, TopicConfigChange]:
    """key -> its change: a value (SET), None (DELETE) or a ListChange (APPEND, SUBTRACT); _Rejected for another
    operation."""
    _check_operations(resource, (SET, DELETE, APPEND, SUBTRACT))
    changes: dict[str, TopicConfigChange] = {}
    for config in resource.configs:
        if config.config_operation in (APPEND, SUBTRACT):
            changes[config.name] = ListChange.parse(config.config_operation == APPEND, config.value)
        else:
            changes[config.name] = None if config.config_operation == DELETE else (config.value or "")
    return changes


def _check_operations(resource: Any, allowed: tuple[int, ...]) -> None:
    for config in resource.configs:
        if config.config_operation not in allowed:
            raise _Rejected(ErrorCode.INVALID_REQUEST,
                            f"{config.name}: operation {config.config_operation} is not supported")


def _validate(services: Services, resource: Any) -> list[Callable[[], None]]:
    """The change for each fault hook of a broker resource, or _Rejected naming the first bad one."""
    if resource.resource_type != BROKER_RESOURCE:
        raise _Rejected(ErrorCode.INVALID_REQUEST, f"cannot alter resource type {resource.resource_type}")
    if resource.resource_name not in ("", str(services.node_id)):
        raise _Rejected(ErrorCode.INVALID_REQUEST,
                        f"this is node {services.node_id}, not {resource.resource_name!r}: send it to that node")
    _check_operations(resource, (SET, DELETE))  # fault hooks are no lists
    changes = []
    for config in resource.configs:
        try:
            changes.append(services.faults.validate(
                config.name, None if config.config_operation == DELETE else (config.value or "")))
        except FaultConfigError as exc:
            raise _Rejected(ErrorCode.INVALID_CONFIG, str(exc)) from exc
    # an action (power loss) ends the process: every other change of the request comes first
    return sorted(changes, key=lambda change: change == services.faults.lose_power)
