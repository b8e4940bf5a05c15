"""ListPartitionReassignments · v0 · the reassignments in progress (KIP-455), from the controller.

Behaviour: needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED). Per partition in progress its
replicas (target and leaving ones), those being added and those being removed; a null topics lists every partition,
partitions not being reassigned are left out. A broker asks the controller; a controller-only process answers
itself.
Skipped: timeout_ms.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from epoch_broker.broker.network.dispatch import BROKER, CONTROLLER, RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation
from epoch_broker.broker.security.authorization import require_cluster_operation
from epoch_broker.broker.services import Services
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import list_partition_reassignments

R = list_partition_reassignments.RESPONSE


@handles(list_partition_reassignments.API, "0", roles=(BROKER, CONTROLLER))
async def handle(context: RequestContext[Services], request: Any) -> Any:
    require_cluster_operation(context, AclOperation.DESCRIBE)
    wanted = None if request.topics is None else [
        (topic.name, index) for topic in request.topics for index in topic.partition_indexes]
    ongoing = await context.services.channel.list_partition_reassignments(wanted)
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for topic, partition, replicas, adding, removing in ongoing:
        by_topic[topic].append(R.OngoingPartitionReassignment(
            partition_index=partition, replicas=list(replicas), adding_replicas=list(adding),
            removing_replicas=list(removing)))
    return R.cls(error_code=ErrorCode.NONE, topics=[
        R.OngoingTopicReassignment(name=name, partitions=partitions) for name, partitions in by_topic.items()])
