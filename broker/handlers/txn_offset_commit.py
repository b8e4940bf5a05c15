"""TxnOffsetCommit · v0-4 · a transactional producer's consumed positions, committed with its transaction (KIP-98).

Behaviour: needs WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition),
READ on the group (else GROUP_AUTHORIZATION_FAILED for every partition) and READ on each topic (else
TOPIC_AUTHORIZATION_FAILED for its partitions, the others committed), nothing committed on the first two. The offsets
are appended to the group's `__consumer_offsets` partition (made if missing) in one transactional batch of the
producer before the answer (a stale producer epoch: INVALID_PRODUCER_EPOCH, as Kafka's log answers it), and stay
pending until the transaction's marker commits them or its abort drops them (see `broker/groups/coordinator.py`).
A group that does not exist yet is created empty. Unknown partitions get UNKNOWN_TOPIC_OR_PARTITION, metadata over
4096 bytes OFFSET_METADATA_TOO_LARGE.
Version notes: committed_leader_epoch v2+ (-1 before); generation_id, member_id and group_instance_id v3+ (KIP-447:
when given, checked as an OffsetCommit's: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID); v0-1 get
COORDINATOR_NOT_AVAILABLE for COORDINATOR_LOAD_IN_PROGRESS, which producers before Kafka 2.0 cannot handle (as Kafka);
v4 (Kafka 3.8) the same: nothing here answers TRANSACTION_ABORTABLE.
Skipped: KIP-890's check that the group's partition is in the transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from epoch_broker.broker.handlers.offset_commit import per_partition, readable_offsets
from epoch_broker.broker.network.dispatch import RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.services import BrokerServices, group_coordinator
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import txn_offset_commit as messages


@handles(messages.API, "0-4")
async def handle(context: RequestContext[BrokerServices], request: Any) -> Any:
    if not context.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return _response(request, lambda topic: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not context.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _response(request, lambda topic: ErrorCode.GROUP_AUTHORIZATION_FAILED)
    readable, offsets = readable_offsets(context, request)
    errors = iter(await group_coordinator(context.services).commit_txn_offsets(
        request.group_id,
        request.producer_id,
        request.producer_epoch,
        request.generation_id,
        request.member_id,
        request.group_instance_id,
        offsets,
    ) if offsets else ())
    old_client = context.api_version < 2

    def error_of(topic: str) -> ErrorCode:
        if topic not in readable:
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
        error = next(errors)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE if old_client and error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS \
            else error

    return _response(request, error_of)


def _response(request: Any, error_of: Callable[[str], ErrorCode]) -> Any:
    R = messages.RESPONSE
    return R.cls(topics=per_partition(request, R.TxnOffsetCommitResponseTopic, R.TxnOffsetCommitResponsePartition,
                                      error_of))
