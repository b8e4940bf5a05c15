"""ShareAcknowledge · v1 · a share group member's acknowledgements, without fetching (KIP-932).

Behaviour: as ShareFetch's first steps (`share_fetch.py`): READ on the group and on each topic, an empty group or
member id INVALID_REQUEST, then the share session moves on, or closes with epoch -1 (releasing what the member
still holds on the session's partitions after its acknowledgements). Epoch 0 is INVALID_SHARE_SESSION_EPOCH: only
a ShareFetch opens a session. Each partition's AcknowledgementBatches are applied by its leader
(`Partition.share_acknowledge`): ACCEPT, RELEASE, REJECT and GAP, atomic per partition, INVALID_RECORD_STATE for a
record the member does not hold. A partition not led here answers NOT_LEADER_OR_FOLLOWER with its leader.
Version notes: v1 only; v2's RENEW acknowledgement (KIP-1222) is not served.
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.replica.share_sessions import FINAL_EPOCH, INITIAL_EPOCH, acknowledge, release
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import share_acknowledge

R = share_acknowledge.RESPONSE
_LEADER_HINT_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER})


@handles(share_acknowledge.API, "1")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    broker = context.services
    replicas = broker.replica_manager
    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch
    if not group_id or not member_id:
        return R.cls(error_code=ErrorCode.INVALID_REQUEST, error_message="GroupId and MemberId must be set.")
    if not context.authorized(AclOperation.READ, ResourceType.GROUP, group_id):
        return R.cls(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if epoch == INITIAL_EPOCH:
        return R.cls(error_code=ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                     error_message="A share session is opened by a ShareFetch.")
    error, session = replicas.share_sessions.next(group_id, member_id, epoch)
    if error != ErrorCode.NONE or session is None:
        return R.cls(error_code=error)
    topics = broker.metadata.topics_by_id
    readable = authorized_names(context, AclOperation.READ, ResourceType.TOPIC,
                                [topics[bytes(t.topic_id)].name for t in request.topics if bytes(t.topic_id) in topics])
    responses, leaders = [], set()
    for topic in request.topics:
        topic_id = bytes(topic.topic_id)
        answered = R.ShareAcknowledgeTopicResponse(topic_id=topic_id, partitions=[])
        responses.append(answered)
        for wanted in topic.partitions:
            if topic_id not in topics:
                code = ErrorCode.UNKNOWN_TOPIC_ID
            elif topics[topic_id].name not in readable:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else:
                code = await acknowledge(replicas, group_id, member_id, topic_id, wanted.partition_index,
                                   wanted.acknowledgement_batches)
            leader = R.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
            if code in _LEADER_HINT_ERRORS and (partition := replicas.get_by_id(topic_id,
                                                                                wanted.partition_index)):
                leader = R.LeaderIdAndEpoch(leader_id=partition.leader_id, leader_epoch=partition.leader_epoch)
                leaders.add(partition.leader_id)
            answered.partitions.append(R.PartitionData(partition_index=wanted.partition_index, error_code=code,
                                                       current_leader=leader))
    if epoch == FINAL_EPOCH:
        release(replicas, group_id, member_id, session.partitions)
    return R.cls(responses=responses,
                 node_endpoints=broker.metadata.node_endpoints(leaders, context.listener, R.NodeEndpoint))
