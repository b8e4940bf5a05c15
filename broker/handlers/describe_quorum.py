"""DescribeQuorum · v0-2 · the metadata log's quorum: leader, epoch, high watermark, voters and observers.

Behaviour: as Kafka's KafkaRaftClient.handleDescribeQuorumRequest, for `__cluster_metadata` partition 0 asked
alone: any other request (another topic or partition, or more than the one) answers UNKNOWN_TOPIC_OR_PARTITION for
every partition it names. Needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED at the top).
The active controller answers (Controller.describe_quorum): it leads, in its ZooKeeper controller epoch (0 with the
file store's one controller); the high watermark is its committed metadata offset; the voters are itself, the
observers the registered brokers at the log end their last heartbeat had applied (-1: not heard from since this
controller started). A broker forwards it to the controller over its controller channel (the one request the
channel already sends for the controller's other APIs), as Kafka 4.x brokers forward it; a standby controller of a
ZooKeeper quorum answers NOT_CONTROLLER (the dispatcher's rule for every controller API) and the broker moves on.
Version notes: v1's timestamps: the leader's are now, as Kafka's leader reports itself; an observer's last fetch is
its last heartbeat (a broker here follows the metadata log by heartbeat and fetch, and reports what it applied in
its heartbeat) and its last caught-up the last heartbeat that had applied every committed record (-1: none since
this controller started). v2: directory ids are zero, as a Kafka quorum with static voters (kraft.version 0)
answers; nodes list the voter with its listeners (those of `controller.listener.names`, else every listener of the
process), 0.0.0.0 answered as 127.0.0.1.
Skipped: a multi-voter KRaft quorum (one controller process decides, or one of a ZooKeeper quorum): the standby
controllers of a ZooKeeper quorum are not listed as voters (the active one does not know how far they have read).
"""

from __future__ import annotations

from typing import Any, cast

from epoch_broker.broker.controller.controller import QuorumReplica
from epoch_broker.broker.metadata.metadata_log import METADATA_TOPIC
from epoch_broker.broker.network.dispatch import BROKER, CONTROLLER, RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation
from epoch_broker.broker.services import ControllerServices, Services
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import describe_quorum as messages

R = messages.RESPONSE


@handles(messages.API, "0-2", roles=(BROKER, CONTROLLER))
async def handle(context: RequestContext[Services], request: Any) -> Any:
    if not context.authorized(AclOperation.DESCRIBE):
        return R.cls(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    asked = [(t.topic_name, p.partition_index) for t in request.topics for p in t.partitions]
    if asked != [(METADATA_TOPIC, 0)]:
        # Kafka's hasValidTopicPartition: exactly the metadata partition, alone
        return R.cls(topics=[R.TopicData(topic_name=t.topic_name, partitions=[R.PartitionData(
            partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            for p in t.partitions]) for t in request.topics])
    quorum = (cast(ControllerServices, context.services).controller.describe_quorum() if context.role == CONTROLLER
              else await context.services.channel.describe_quorum())
    nodes = quorum.nodes or (_own_node(context) if quorum.leader_id == context.services.config.node_id else [])
    return R.cls(
        topics=[R.TopicData(topic_name=METADATA_TOPIC, partitions=[R.PartitionData(
            partition_index=0, leader_id=quorum.leader_id, leader_epoch=quorum.leader_epoch,
            high_watermark=quorum.high_watermark, current_voters=[_replica(r) for r in quorum.voters],
            observers=[_replica(r) for r in quorum.observers])])],
        nodes=[R.Node(node_id=node, listeners=[R.Listener(name=name, host=host, port=port)
                                               for name, host, port in listeners])
               for node, listeners in nodes])


def _replica(replica: QuorumReplica) -> Any:
    return R.ReplicaState(replica_id=replica.replica_id, log_end_offset=replica.log_end_offset,
                          last_fetch_timestamp=replica.last_fetch_timestamp,
                          last_caught_up_timestamp=replica.last_caught_up_timestamp)


def _own_node(context: RequestContext[Services]) -> list[tuple[int, list[tuple[str, str, int]]]]:
    """This process as the voter: its controller listeners (or every listener), bound."""
    config = context.services.config
    listeners = [e for e in config.listeners if e.listener in config.controller_listener_names] or config.listeners
    return [(config.node_id, [(e.listener, "127.0.0.1" if e.host in ("0.0.0.0", "::", "") else e.host, e.port)
                              for e in listeners])]
