"""ShareGroupHeartbeat · v1 · join, heartbeat and leave a share group (KIP-932).

Behaviour: needs READ on the group (GROUP_AUTHORIZATION_FAILED). Then `broker/groups/share_protocol.py` decides;
the answer waits until the decision's records are replicated in `__consumer_offsets`. A group id held by a classic
or consumer group is GROUP_ID_NOT_FOUND, as Kafka answers. Errors carry Kafka's message in `error_message`.
Version notes: v1 only (v0 was Kafka 4.0's early access, removed in 4.1); confluent-kafka's ShareConsumer sends
exactly v1.
Skipped: rack-aware assignment (rack_id is kept and described, not used).
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.handlers.join_group import client_host
from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.services import BrokerServices, group_coordinator
from epoch_broker.protocol.errors import ErrorCode, KafkaError
from epoch_broker.protocol.messages import share_group_heartbeat as messages

R = messages.RESPONSE


@handles(messages.API, "1")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    from epoch_broker.broker.groups.share_protocol import ShareHeartbeatRequest  # on first group use, not at start

    if not context.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return R.cls(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    heartbeat = ShareHeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        rack_id=request.rack_id, subscribed_topic_names=request.subscribed_topic_names,
        client_id=context.client_id or "", client_host=client_host(context.peer))
    try:
        result = await group_coordinator(context.services).share_group_heartbeat(heartbeat)
    except KafkaError as e:
        return R.cls(error_code=e.code, error_message=str(e))
    assignment = None
    if result.assignment is not None:
        assignment = R.Assignment(topic_partitions=[
            R.TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
            for topic_id, partitions in sorted(result.assignment.items()) if partitions])
    return R.cls(member_id=result.member_id, member_epoch=result.member_epoch,
                 heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment)
