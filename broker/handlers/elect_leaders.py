"""ElectLeaders · v0-2 · force leader elections (an admin and fault hook), through the controller.

Behaviour: needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED, at the top and for every partition named,
and no election). election_type 0 (clean: a live ISR member) or 1 (unclean: any live replica, the ISR becomes just
it); a null topic_partitions means every partition. The tagged target_leader (project extension, tag 10000) names
the replica to elect; -1 lets the controller pick the next live ISR member. Per partition:
UNKNOWN_TOPIC_OR_PARTITION, ELIGIBLE_LEADERS_NOT_AVAILABLE, ELECTION_NOT_NEEDED or NONE (Controller.elect_leaders).
A broker forwards to the controller; a controller-only process answers itself.
Version notes: v0 has no election type (clean); v1+ top-level error_code.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from epoch_broker.broker.network.dispatch import BROKER, CONTROLLER, RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation
from epoch_broker.broker.services import Services
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import elect_leaders

Response = elect_leaders.RESPONSE.cls
Result = elect_leaders.RESPONSE.ReplicaElectionResult
PartitionResult = elect_leaders.RESPONSE.PartitionResult
UNCLEAN = 1


@handles(elect_leaders.API, "0-2", roles=(BROKER, CONTROLLER))
async def handle(context: RequestContext[Services], request: Any) -> Any:
    wanted = None if request.topic_partitions is None else [
        (t.topic, p) for t in request.topic_partitions for p in t.partitions]
    if not context.authorized(AclOperation.ALTER):
        # by hand, not the dispatcher's error answer: that one cannot list the partitions (named by int)
        refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        message = f"{context.principal} may not ALTER the cluster"
        return _response(refused, [(topic, partition, refused, message) for topic, partition in wanted or ()])
    results = await context.services.channel.elect_leaders(wanted, request.election_type == UNCLEAN,
                                                         request.target_leader)
    return _response(ErrorCode.NONE, results)


def _response(error: ErrorCode, results: list[tuple[str, int, ErrorCode, str | None]]) -> Any:
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for topic, partition, partition_error, message in results:
        by_topic[topic].append(PartitionResult(partition_id=partition, error_code=partition_error,
                                               error_message=message))
    return Response(error_code=error,
                    replica_election_results=[Result(topic=t, partition_result=r) for t, r in by_topic.items()])
