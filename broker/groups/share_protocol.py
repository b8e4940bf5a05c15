"""The share group protocol (KIP-932): ShareGroupHeartbeat's decisions and session timeouts.

A heartbeat goes through the steps of Kafka's `GroupMetadataManager.shareGroupHeartbeat`:
1. the member is created or updated; a new member, a changed subscription or a change in the subscribed topics
   (created, deleted, partitions added) bumps the group epoch;
2. when the group epoch is ahead of the assignment epoch, the target assignment is computed for every member
   (`share_group.share_assignment`);
3. the member's current assignment becomes its target at once (no revocation step: a partition may be shared).

Every decision is a record (`share_group.py`), replayed into the group as it is made and returned to the caller,
which appends them to `__consumer_offsets` and answers once they are replicated.

Rules:
- Member epochs: 0 joins (with the member id the client made, KIP-1082; one is made here if it sent none), -1
  leaves. A higher epoch than the coordinator's, or a lower one that is not the member's previous epoch (a lost
  response), is FENCED_MEMBER_EPOCH; an unknown member with a non-zero epoch is UNKNOWN_MEMBER_ID.
- The first heartbeat must name the subscribed topics; an empty group id or rack id is INVALID_REQUEST. A group
  at `group.share.max.size` members refuses another with GROUP_MAX_SIZE_REACHED.
- Session: a member that does not heartbeat within its group's `share.session.timeout.ms` (a group config, else
  the broker's `group.share.session.timeout.ms`; the heartbeat interval likewise) is removed (the records it
  had acquired come back when their acquisition locks expire on the partitions' leaders).
- The response carries the assignment when the member joins and whenever it changed.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from epoch_broker.broker.groups.consumer_group import Assignment, TopicMetadata
from epoch_broker.broker.groups.current_assignment_builder import normalised
from epoch_broker.broker.groups.share_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    ShareCurrentAssignmentRecord,
    ShareGroup,
    ShareGroupEpochRecord,
    ShareGroupMember,
    ShareGroupRecord,
    ShareMemberAssignment,
    ShareMemberMetadataRecord,
    ShareMemberSubscription,
    ShareTargetAssignmentEpochRecord,
    ShareTargetAssignmentMemberRecord,
    member_removal_records,
    share_assignment,
)
from epoch_broker.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ShareGroupConfig:
    session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.share.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size


@dataclass(frozen=True, slots=True)
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None
    subscribed_topic_names: list[str] | None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None  # when the member joined or its assignment changed


def _invalid(message: str) -> KafkaError:
    return KafkaError(message, ErrorCode.INVALID_REQUEST)


class ShareGroupProtocol:
    """The decisions of the share group protocol over the share groups of one coordinator."""

    def __init__(self, config: ShareGroupConfig, topics: Callable[[], Mapping[str, Any]],
                 now_ms: Callable[[], int], write: Callable[[ShareGroup, list[ShareGroupRecord]], None],
                 group_config: Callable[[str, str], str | None] = lambda group_id, name: None) -> None:
        self.config = config
        self._topics = topics  # the metadata image's topics by name
        self._now_ms = now_ms
        self._write = write  # appends records decided outside a request (session timeouts)
        self._group_config = group_config  # a group config the group set (the GROUP resource), else None

    def _session_timeout_ms(self, group_id: str) -> int:
        value = self._group_config(group_id, "share.session.timeout.ms")
        return self.config.session_timeout_ms if value is None else int(value)

    def _heartbeat_interval_ms(self, group_id: str) -> int:
        value = self._group_config(group_id, "share.heartbeat.interval.ms")
        return self.config.heartbeat_interval_ms if value is None else int(value)

    def validate(self, request: ShareHeartbeatRequest) -> None:
        """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid."""
        if not request.group_id:
            raise _invalid("GroupId can't be empty.")
        if request.rack_id == "":
            raise _invalid("RackId can't be empty.")
        epoch = request.member_epoch
        if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not request.member_id:
                raise _invalid("MemberId can't be empty.")
        elif epoch == 0:
            if not request.subscribed_topic_names:
                raise _invalid("SubscribedTopicNames must be set in first request.")
        else:
            raise _invalid("MemberEpoch is invalid.")

    def heartbeat(self, group: ShareGroup, request: ShareHeartbeatRequest,
                  emit: Callable[[ShareGroupRecord], None]) -> ShareHeartbeatResult:
        """Decide one heartbeat of a validated request to `group` (created by the caller for epoch 0). `emit`
        replays each record into the group as it is decided and keeps it for the caller to append.
        Raises KafkaError with the heartbeat's error."""
        if request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            return self._leave(group, request, emit)
        member_id = request.member_id or str(uuid.uuid4())
        member = self._member_for(group, member_id, request)

        # 1. the member, and the group epoch when its subscription or the subscribed topics moved
        old = member.subscription
        names = request.subscribed_topic_names
        subscription = ShareMemberSubscription(
            rack_id=request.rack_id if request.rack_id is not None else old.rack_id,
            client_id=request.client_id, client_host=request.client_host,
            subscribed_topic_names=tuple(sorted(set(names))) if names is not None else old.subscribed_topic_names)
        new_member = member_id not in group.members
        bump = new_member or subscription.subscribed_topic_names != old.subscribed_topic_names
        if new_member or subscription != old:
            emit(ShareMemberMetadataRecord(group.group_id, member_id, subscription))
            member = group.members[member_id]
        if bump or group.metadata_refresh:
            group.metadata_refresh = False
            metadata = self.subscription_metadata(group)
            if metadata != group.subscription_metadata:
                group.subscription_metadata = metadata  # computed, not persisted (share_group.py)
                bump = True
            if bump:
                emit(ShareGroupEpochRecord(group.group_id, group.group_epoch + 1))
                log.info("share group %s: group epoch %d (%s)", group.group_id, group.group_epoch,
                         f"member {member_id} joined" if new_member else "subscriptions changed")

        # 2. the target assignment, when the group epoch moved past it
        if group.group_epoch > group.assignment_epoch:
            self._update_target_assignment(group, emit)

        # 3. the member's assignment is its target
        before = member.assignment.assigned
        if member.member_epoch != group.assignment_epoch:
            emit(ShareCurrentAssignmentRecord(group.group_id, member_id, ShareMemberAssignment(
                member_epoch=group.assignment_epoch, previous_member_epoch=member.member_epoch,
                assigned=group.target_of(member_id))))
        self._arm_session(group, member)
        changed = normalised(before) != normalised(member.assignment.assigned)
        return ShareHeartbeatResult(member_id, member.member_epoch, self._heartbeat_interval_ms(group.group_id),
                                    member.assignment.assigned if request.member_epoch == 0 or changed else None)

    def _member_for(self, group: ShareGroup, member_id: str, request: ShareHeartbeatRequest) -> ShareGroupMember:
        member = group.members.get(member_id)
        if member is None:
            if request.member_epoch != 0:
                raise KafkaError(f"Member {member_id} is not a member of group {group.group_id}.",
                                 ErrorCode.UNKNOWN_MEMBER_ID)
            if len(group.members) >= self.config.max_size:
                raise KafkaError(f"The share group has reached its maximum capacity of {self.config.max_size} "
                                 f"members.", ErrorCode.GROUP_MAX_SIZE_REACHED)
            return ShareGroupMember(member_id)
        received, expected = request.member_epoch, member.member_epoch
        if received == 0:
            return member  # a rejoin under its own id: it gets the current assignment again
        if received > expected or (received < expected and received != member.assignment.previous_member_epoch):
            raise KafkaError(f"The share group member has epoch {received}, the group coordinator knows it at "
                             f"{expected}. The member must abandon all its partitions and rejoin.",
                             ErrorCode.FENCED_MEMBER_EPOCH)
        return member

    def _leave(self, group: ShareGroup, request: ShareHeartbeatRequest,
               emit: Callable[[ShareGroupRecord], None]) -> ShareHeartbeatResult:
        member = group.members.get(request.member_id)
        if member is None:
            raise KafkaError(f"Member {request.member_id} is not a member of group {group.group_id}.",
                             ErrorCode.UNKNOWN_MEMBER_ID)
        log.info("share group %s: member %s left", group.group_id, member.member_id)
        self.fence_member(group, member, emit)
        return ShareHeartbeatResult(request.member_id, LEAVE_GROUP_MEMBER_EPOCH,
                                    self._heartbeat_interval_ms(group.group_id), None)

    def fence_member(self, group: ShareGroup, member: ShareGroupMember,
                     emit: Callable[[ShareGroupRecord], None]) -> None:
        """Kafka's shareGroupFenceMember: remove the member; the group epoch moves so the others are reassigned."""
        for record in member_removal_records(group.group_id, member.member_id):
            emit(record)
        group.subscription_metadata = self.subscription_metadata(group)
        emit(ShareGroupEpochRecord(group.group_id, group.group_epoch + 1))

    def subscription_metadata(self, group: ShareGroup) -> dict[str, TopicMetadata]:
        topics = self._topics()
        names = {name for member in group.members.values() for name in member.subscription.subscribed_topic_names
                 if name in topics}
        return {name: TopicMetadata(topics[name].topic_id, name, len(topics[name].partitions))
                for name in sorted(names)}

    def _update_target_assignment(self, group: ShareGroup, emit: Callable[[ShareGroupRecord], None]) -> None:
        metadata = group.subscription_metadata
        subscribed = {member_id: frozenset(metadata[name].topic_id
                                           for name in member.subscription.subscribed_topic_names if name in metadata)
                      for member_id, member in group.members.items()}
        target = share_assignment(subscribed, {t.topic_id: t.partitions for t in metadata.values()})
        for member_id, partitions in sorted(target.items()):
            if normalised(partitions) != normalised(group.target_of(member_id)):
                emit(ShareTargetAssignmentMemberRecord(group.group_id, member_id, normalised(partitions)))
        emit(ShareTargetAssignmentEpochRecord(group.group_id, group.group_epoch))

    # -- timers ---------------------------------------------------------------------------------------------

    def _arm_session(self, group: ShareGroup, member: ShareGroupMember) -> None:
        member.cancel_timers()
        member.session_timer = asyncio.get_running_loop().call_later(
            self._session_timeout_ms(group.group_id) / 1000, self._expire, group, member.member_id)

    def _expire(self, group: ShareGroup, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is None or group.dead:
            return
        member.session_timer = None
        log.info("share group %s: member %s removed: its session expired", group.group_id, member_id)
        decided: list[ShareGroupRecord] = []

        def emit(record: ShareGroupRecord) -> None:
            group.replay(record, self._now_ms())
            decided.append(record)

        self.fence_member(group, member, emit)
        self._write(group, decided)

    def on_loaded(self, group: ShareGroup) -> None:
        """A new coordinator loaded the group: every member's session starts now; the subscribed topics are
        recomputed at the next heartbeat."""
        group.metadata_refresh = True
        for member in group.members.values():
            self._arm_session(group, member)

    def on_topics_changed(self, groups: Iterable[ShareGroup]) -> None:
        for group in groups:
            group.metadata_refresh = True
