"""AlterPartitionReassignments · v0-1 · move partitions to new replica sets (KIP-455), through the controller.

Behaviour: needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED, at the top and for every partition). Per
partition, target replicas start (or replace) a reassignment and null cancels one
(Controller.alter_partition_reassignments): the new replicas are added and catch up, then the old ones are removed,
each step a new leader epoch. UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (replicas that are not
distinct registered brokers), NO_REASSIGNMENT_IN_PROGRESS (a cancel with none) or NONE. The answer comes once the
reassignment has started, not when it is done (ListPartitionReassignments follows it). A broker forwards to the
controller; a controller-only process answers itself.
Version notes: v1 (Kafka 4.1) allow_replication_factor_change false makes a target of another size than the
replicas before the reassignment INVALID_REPLICATION_FACTOR for its partition; the answer echoes the flag.
Skipped: timeout_ms (the start is immediate).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from epoch_broker.broker.network.dispatch import BROKER, CONTROLLER, RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation
from epoch_broker.broker.security.authorization import require_cluster_operation
from epoch_broker.broker.services import Services
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import alter_partition_reassignments

R = alter_partition_reassignments.RESPONSE


@handles(alter_partition_reassignments.API, "0-1", roles=(BROKER, CONTROLLER))
async def handle(context: RequestContext[Services], request: Any) -> Any:
    require_cluster_operation(context, AclOperation.ALTER)
    wanted = [(topic.name, p.partition_index, None if p.replicas is None else tuple(p.replicas))
              for topic in request.topics for p in topic.partitions]
    allowed = request.allow_replication_factor_change
    results = await context.services.channel.alter_partition_reassignments(wanted, allowed)
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for topic, partition, error, message in results:
        by_topic[topic].append(R.ReassignablePartitionResponse(partition_index=partition, error_code=error,
                                                               error_message=message))
    return R.cls(error_code=ErrorCode.NONE, allow_replication_factor_change=allowed, responses=[
        R.ReassignableTopicResponse(name=name, partitions=partitions) for name, partitions in by_topic.items()])
