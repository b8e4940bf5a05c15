"""WriteShareGroupState · v0 · a share-partition leader writes its share group's state here (KIP-932).

Behaviour: between brokers: needs CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every
partition. Each partition's state replaces the stored one at the group's coordinator (broker/groups/
share_state.py), answered once replicated: FENCED_LEADER_EPOCH for a leader epoch older than the newest one read
or written, FENCED_STATE_EPOCH for a state epoch other than the stored one; NOT_COORDINATOR and
COORDINATOR_LOAD_IN_PROGRESS as for any group request.
Version notes: v0 only (apache/kafka's JSON). The state batches are the whole state, not a delta: only our own
brokers send this.
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.groups.records import ShareSnapshotKey
from epoch_broker.broker.groups.share_state import ShareState, StateBatch
from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation
from epoch_broker.broker.services import BrokerServices, group_coordinator
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import write_share_group_state as messages

R = messages.RESPONSE


@handles(messages.API, "0")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    allowed = context.authorized(AclOperation.CLUSTER_ACTION)
    coordinator = group_coordinator(context.services)
    results = []
    for topic in request.topics:
        topic_id = bytes(topic.topic_id)
        answered = R.WriteStateResult(topic_id=topic_id, partitions=[])
        results.append(answered)
        for wanted in topic.partitions:
            error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            if allowed:
                state = ShareState(wanted.state_epoch, wanted.leader_epoch, wanted.start_offset,
                                   tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                         for b in wanted.state_batches))
                error = await coordinator.write_share_state(
                    ShareSnapshotKey(request.group_id, topic_id, wanted.partition), state)
            answered.partitions.append(R.PartitionResult(partition=wanted.partition, error_code=error))
    return R.cls(results=results)
