"""DescribeProducers · v0 · the producers a partition's leader remembers (Kafka's kafka-transactions.sh
describe-producers: finding a hanging transaction).

Behaviour: needs READ on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions); an unknown partition is
UNKNOWN_TOPIC_OR_PARTITION, one led elsewhere NOT_LEADER_OR_FOLLOWER. Each producer: id, epoch, last sequence and
timestamp (of its last batch; -1 without one), the coordinator epoch of its last marker, and the first offset of
its open transaction (-1: none), from the partition's producer state.
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import BrokerServices
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import describe_producers as messages

Response = messages.RESPONSE


@handles(messages.API, "0")
def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    replicas = context.services.replica_manager
    readable = authorized_names(context, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
    topics = []
    for topic in request.topics:
        partitions = []
        for index in topic.partition_indexes:
            answer = Response.PartitionResponse(partition_index=index, active_producers=[])
            partition = replicas.get(topic.name, index)
            if topic.name not in readable:
                answer.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif partition is None:
                answer.error_code = replicas.lookup_error(topic.name, index)
            else:
                error, producers = partition.active_producers()
                answer.error_code = error
                answer.active_producers = [Response.ProducerState(**p._asdict()) for p in producers]
            partitions.append(answer)
        topics.append(Response.TopicResponse(name=topic.name, partitions=partitions))
    return Response.cls(topics=topics)
