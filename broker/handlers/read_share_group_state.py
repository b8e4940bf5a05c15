"""ReadShareGroupState · v0 · a share-partition leader reads its share group's state here (KIP-932).

Behaviour: between brokers: needs CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every
partition. Each partition's state is read from the group's coordinator (broker/groups/share_state.py): the state
epoch, start offset (-1: never written) and state batches; a newer leader epoch than the stored one is recorded
first (fencing the leaders before it), an older one is FENCED_LEADER_EPOCH; NOT_COORDINATOR and
COORDINATOR_LOAD_IN_PROGRESS as for any group request.
Version notes: v0 only (apache/kafka's JSON).
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.groups.records import ShareSnapshotKey
from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation
from epoch_broker.broker.services import BrokerServices, group_coordinator
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import read_share_group_state as messages

R = messages.RESPONSE


@handles(messages.API, "0")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    allowed = context.authorized(AclOperation.CLUSTER_ACTION)
    coordinator = group_coordinator(context.services)
    results = []
    for topic in request.topics:
        topic_id = bytes(topic.topic_id)
        answered = R.ReadStateResult(topic_id=topic_id, partitions=[])
        results.append(answered)
        for wanted in topic.partitions:
            if not allowed:
                answered.partitions.append(R.PartitionResult(
                    partition=wanted.partition, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, state_epoch=0,
                    start_offset=-1, state_batches=[]))
                continue
            error, state = await coordinator.read_share_state(
                ShareSnapshotKey(request.group_id, topic_id, wanted.partition), wanted.leader_epoch)
            answered.partitions.append(R.PartitionResult(
                partition=wanted.partition, error_code=error, state_epoch=state.state_epoch,
                start_offset=state.start_offset,
                state_batches=[R.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                            delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                               for b in state.state_batches]))
    return R.cls(results=results)
