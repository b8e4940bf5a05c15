"""IncrementalAlterConfigs · v0-1 · this broker's fault hooks (broker/faults.py, docs/cluster.md).

Behaviour: resource type 4 (broker) named by this node id (or "" for any): `fault.replication.paused` and
`fault.high.watermark.held` take true/false with SET (0) and go back to false with DELETE (1);
`fault.power.loss` (SET, any value) cuts every log back to its recovery point, the offset up to which it was
fsynced, and exits at once with status 137 without answering, as a power cut would. A resource's changes are
all validated before any is applied; validate_only applies none. Another key: INVALID_CONFIG; APPEND/SUBTRACT
operations, another node's name or another resource type: INVALID_REQUEST (topic configs are not alterable yet).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from epoch_broker.broker.faults import (
    HIGH_WATERMARK_HELD,
    METADATA_PAUSED,
    POWER_LOSS,
    POWER_LOSS_EXIT_STATUS,
    REPLICATION_PAUSED,
)
from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import incremental_alter_configs

log = logging.getLogger(__name__)

Response = incremental_alter_configs.RESPONSE.cls
Result = incremental_alter_configs.RESPONSE.AlterConfigsResourceResponse

TOPIC, BROKER = 2, 4
SET, DELETE = 0, 1
# fault key -> BrokerFaults attribute
BOOLEAN_FAULTS = {REPLICATION_PAUSED: "replication_paused", HIGH_WATERMARK_HELD: "high_watermark_held",
                  METADATA_PAUSED: "metadata_paused"}


class _Rejected(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@handles(incremental_alter_configs.API, "0-1")
def handle(context: RequestContext, request: Any) -> Any:
    return Response(throttle_time_ms=0, responses=[
        _alter(context.broker, resource, request.validate_only) for resource in request.resources])


def _alter(broker: Any, resource: Any, validate_only: bool) -> Any:
    result = Result(error_code=ErrorCode.NONE, error_message=None, resource_type=resource.resource_type,
                    resource_name=resource.resource_name)
    try:
        changes = _validate(broker, resource)
    except _Rejected as exc:
        result.error_code, result.error_message = exc.code, str(exc)
        return result
    if validate_only:
        return result
    for key, value in changes:
        if key == POWER_LOSS:
            _lose_power(broker)
        setattr(broker.faults, BOOLEAN_FAULTS[key], value)
        log.warning("fault hook %s = %s", key, str(value).lower())
    return result


def _validate(broker: Any, resource: Any) -> list[tuple[str, bool]]:
    """(key, new value) for each change of the resource, or _Rejected naming the first bad one."""
    if resource.resource_type == TOPIC:
        raise _Rejected(ErrorCode.INVALID_REQUEST, "topic configs are not alterable yet")
    if resource.resource_type != BROKER:
        raise _Rejected(ErrorCode.INVALID_REQUEST, f"cannot alter resource type {resource.resource_type}")
    if resource.resource_name not in ("", str(broker.node_id)):
        raise _Rejected(ErrorCode.INVALID_REQUEST,
                        f"this is node {broker.node_id}, not {resource.resource_name!r}: send it to that node")
    changes = []
    for config in resource.configs:
        key, operation = config.name, config.config_operation
        if key not in (*BOOLEAN_FAULTS, POWER_LOSS):
            raise _Rejected(ErrorCode.INVALID_CONFIG, f"{key} is not an alterable broker config (fault hooks: "
                            f"{', '.join((*BOOLEAN_FAULTS, POWER_LOSS))})")
        if operation == DELETE and key != POWER_LOSS:
            changes.append((key, False))
        elif operation != SET:
            raise _Rejected(ErrorCode.INVALID_REQUEST, f"{key}: operation {operation} is not supported")
        elif key == POWER_LOSS:
            changes.append((key, True))
        elif (value := (config.value or "").strip().lower()) in ("true", "false"):
            changes.append((key, value == "true"))
        else:
            raise _Rejected(ErrorCode.INVALID_CONFIG, f"invalid value for {key}: {config.value!r} (expected true "
                            "or false)")
    return changes


def _lose_power(broker: Any) -> None:
    """What survives a power cut: each log up to its recovery point (the last fsync), no checkpoint or
    clean-shutdown marker written; the next start recovers as after a crash."""
    log.warning("fault hook %s: cutting every log back to its recovery point and exiting with status %d",
                POWER_LOSS, POWER_LOSS_EXIT_STATUS)
    for partition_log in broker.log_manager.logs.values():
        if partition_log.recovery_point < partition_log.log_end_offset:
            partition_log.truncate_to(max(partition_log.recovery_point, partition_log.log_start_offset))
    sys.stderr.flush()
    os._exit(POWER_LOSS_EXIT_STATUS)
