"""ConsumerGroupHeartbeat · v0-1 · join, heartbeat and leave a KIP-848 consumer group (`group.protocol=consumer`).

Behaviour: needs READ on the group (GROUP_AUTHORIZATION_FAILED), and DESCRIBE on the subscribed topics is not checked
(Kafka checks it only for regex subscriptions in 4.1+). Then `broker/groups/consumer_protocol.py` decides; the
answer waits until the decision's records are replicated in `__consumer_offsets`. A group id held by a classic
group is GROUP_ID_NOT_FOUND, as Kafka 4.0 answers with `group.consumer.migration.policy` off. Errors carry Kafka's
message in `error_message`.
Version notes: v1 (Kafka 4.0, KIP-1082) adds subscribed_topic_regex; clients then make their member id
themselves, which v0 clients leave empty for the coordinator to make. librdkafka uses the consumer protocol only
with v1 advertised.
Skipped: rack-aware assignment (rack_id is kept and described, not used).
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.handlers.join_group import client_host
from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.services import BrokerServices, group_coordinator
from epoch_broker.protocol.errors import ErrorCode, KafkaError
from epoch_broker.protocol.messages import consumer_group_heartbeat as messages

R = messages.RESPONSE


@handles(messages.API, "0-1")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    from epoch_broker.broker.groups.consumer_protocol import HeartbeatRequest  # on first group use, not at start

    if not context.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return R.cls(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    owned = request.topic_partitions
    heartbeat = HeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        instance_id=request.instance_id, rack_id=request.rack_id, rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=request.subscribed_topic_names, subscribed_topic_regex=request.subscribed_topic_regex,
        server_assignor=request.server_assignor,
        owned=None if owned is None else {bytes(tp.topic_id): frozenset(tp.partitions) for tp in owned},
        client_id=context.client_id or "", client_host=client_host(context.peer))
    try:
        result = await group_coordinator(context.services).consumer_group_heartbeat(heartbeat)
    except KafkaError as e:
        return R.cls(error_code=e.code, error_message=str(e))
    assignment = None
    if result.assignment is not None:
        assignment = R.Assignment(topic_partitions=[
            R.TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
            for topic_id, partitions in sorted(result.assignment.items())])
    return R.cls(member_id=result.member_id, member_epoch=result.member_epoch,
                 heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment)
