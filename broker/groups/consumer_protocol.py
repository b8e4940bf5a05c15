"""The KIP-848 consumer group protocol: ConsumerGroupHeartbeat's decisions, session and rebalance timeouts.

A heartbeat goes through Kafka's three steps (`GroupMetadataManager.consumerGroupHeartbeat`):
1. the member is created or updated; a changed subscription, a new member, or a change in the subscribed topics'
   metadata (created, deleted, partitions added) bumps the group epoch;
2. when the group epoch is ahead of the assignment epoch, the preferred assignor (the one most members name, else
   the first of `group.consumer.assignors`) computes a new target assignment from every member's subscription and
   its previous target (sticky);
3. the member's current assignment is reconciled toward its target (`current_assignment_builder.reconcile`): it is
   told to revoke first, and is given a partition only once its previous owner stopped listing it.

Every decision is a record (`consumer_group.py`), replayed into the group as it is made and returned to the caller,
which appends them to `__consumer_offsets` and answers once they are replicated.

Rules:
- Member epochs: 0 joins (a member id the client made, KIP-1082, or one made here for v0), -1 leaves, -2 is a static
  member's temporary leave: it keeps its assignment (nobody else gets its partitions) until its session expires or
  its instance id rejoins, which takes the assignment over (UNRELEASED_INSTANCE_ID while the old instance has not
  left). A higher epoch than the coordinator's, or a lower one that is not the previous epoch sent with a subset of
  the assignment (a lost response), is FENCED_MEMBER_EPOCH.
- A rejoin with epoch 0 under a member id the group still holds (a client fenced by an epoch mismatch gives up its
  partitions and rejoins with its own id, KIP-1082) starts that member afresh rather than fence it again.
- Session: a member that does not heartbeat within `group.consumer.session.timeout.ms` is removed. Rebalance: a
  member told to revoke that has not done so within its rebalance timeout is removed.
- Regular expressions (`SubscribedTopicRegex`) match whole topic names (RE2/J's `matches()`, broker/regex.py: a
  construct RE2 does not have is INVALID_REGULAR_EXPRESSION, so a pattern accepted here means the same as in Kafka).
  Internal topics never match. New matching topics join the subscription at the member's next heartbeat after the
  metadata change.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from epoch_broker.broker.groups.assignors import ASSIGNORS, MemberSubscriptionSpec
from epoch_broker.broker.groups.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupRecord,
    CurrentAssignmentRecord,
    GroupEpochRecord,
    MemberMetadataRecord,
    MemberSubscription,
    SubscriptionMetadataRecord,
    TargetAssignmentEpochRecord,
    TargetAssignmentMemberRecord,
    TopicMetadata,
    member_removal_records,
)
from epoch_broker.broker.groups.current_assignment_builder import MemberState, normalised, reconcile
from epoch_broker.broker.regex import compile_regex
from epoch_broker.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__cluster_metadata"})


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors, the first is the default


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: list[str] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    owned: Mapping[bytes, frozenset[int]] | None  # TopicPartitions, None when not sent
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None  # sent on a full request or when it changed


class TopicLike(Protocol):
    topic_id: bytes
    partitions: Mapping[int, Any]


def _invalid(message: str) -> KafkaError:
    return KafkaError(message, ErrorCode.INVALID_REQUEST)


class ConsumerGroupProtocol:
    """The decisions of the consumer protocol over the consumer groups of one coordinator."""

    def __init__(self, config: ConsumerGroupConfig, topics: Callable[[], Mapping[str, TopicLike]],
                 now_ms: Callable[[], int],
                 write: Callable[[ConsumerGroup, list[ConsumerGroupRecord]], None]) -> None:
        self.config = config
        self._topics = topics  # the metadata image's topics by name
        self._now_ms = now_ms
        # Appends records decided outside a request (timeouts): replayed already, appended in the background.
        self._write = write

    # -- validation -----------------------------------------------------------------------------------------

    def validate(self, request: HeartbeatRequest) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
        if not request.group_id:
            raise _invalid("GroupId can't be empty.")
        if request.instance_id == "":
            raise _invalid("InstanceId can't be empty.")
        if request.rack_id == "":
            raise _invalid("RackId can't be empty.")
        epoch = request.member_epoch
        if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not request.member_id:
                raise _invalid("MemberId can't be empty.")
        elif epoch == 0:
            if request.rebalance_timeout_ms == -1:
                raise _invalid("RebalanceTimeoutMs must be provided in first request.")
            if request.owned is None or any(request.owned.values()):
                raise _invalid("TopicPartitions must be empty when (re-)joining.")
            if not request.subscribed_topic_names and not request.subscribed_topic_regex:
                raise _invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not request.member_id:
                raise _invalid("MemberId can't be empty.")
            if request.instance_id is None:
                raise _invalid("InstanceId can't be null.")
        else:
            raise _invalid("MemberEpoch is invalid.")
        if request.server_assignor is not None and request.server_assignor not in self.config.assignors:
            raise KafkaError(f"ServerAssignor {request.server_assignor} is not supported. Supported assignors: "
                             f"{', '.join(self.config.assignors)}.", ErrorCode.UNSUPPORTED_ASSIGNOR)
        if request.subscribed_topic_regex:
            compile_regex(request.subscribed_topic_regex)

    # -- the heartbeat --------------------------------------------------------------------------------------

    def heartbeat(self, group: ConsumerGroup, request: HeartbeatRequest,
                  emit: Callable[[ConsumerGroupRecord], None]) -> HeartbeatResult:
        """Decide one heartbeat of a validated request to `group` (created by the caller for epoch 0). `emit`
        replays each record into the group as it is decided and keeps it for the caller to append.
        Raises KafkaError with the heartbeat's error."""
        if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(group, request, emit)
        member_id = request.member_id or str(uuid.uuid4())
        member = self._member_for(group, member_id, request, emit)

        # 1. the member, and the group epoch when its subscription or the subscribed topics moved
        old = member.subscription
        names = request.subscribed_topic_names
        subscription = MemberSubscription(
            instance_id=request.instance_id if request.instance_id is not None else old.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else old.rack_id,
            client_id=request.client_id, client_host=request.client_host,
            rebalance_timeout_ms=(request.rebalance_timeout_ms if request.rebalance_timeout_ms != -1
                                  else old.rebalance_timeout_ms),
            subscribed_topic_names=tuple(sorted(set(names))) if names is not None else old.subscribed_topic_names,
            subscribed_topic_regex=(request.subscribed_topic_regex if request.subscribed_topic_regex is not None
                                    else old.subscribed_topic_regex) or None,
            server_assignor=request.server_assignor if request.server_assignor is not None else old.server_assignor,
        )
        new_member = member_id not in group.members
        bump = new_member or (subscription.subscribed_topic_names != old.subscribed_topic_names
                              or subscription.subscribed_topic_regex != old.subscribed_topic_regex)
        if new_member or subscription != old:
            emit(MemberMetadataRecord(group.group_id, member_id, subscription))
            member = group.members[member_id]
        if bump or group.metadata_refresh:
            group.metadata_refresh = False
            metadata = self.subscription_metadata(group)
            if metadata != group.subscription_metadata:
                emit(SubscriptionMetadataRecord(group.group_id, metadata))
                bump = True
            if bump:
                emit(GroupEpochRecord(group.group_id, group.group_epoch + 1))
                log.info("consumer group %s: group epoch %d (%s)", group.group_id, group.group_epoch,
                         f"member {member_id} joined" if new_member else "subscriptions changed")

        # 2. the target assignment, when the group epoch moved past it
        if group.group_epoch > group.assignment_epoch:
            self._update_target_assignment(group, emit)

        # 3. the member's assignment toward its target
        before = member.assignment
        self._maybe_reconcile(group, member, request.owned, emit)
        self._arm_session(group, member)

        full_request = request.member_epoch == 0 or (
            request.rebalance_timeout_ms != -1 and names is not None and request.owned is not None)
        changed = before.assigned != member.assignment.assigned
        return HeartbeatResult(member_id, member.member_epoch, self.config.heartbeat_interval_ms,
                               member.assignment.assigned if full_request or changed else None)

    def _member_for(self, group: ConsumerGroup, member_id: str, request: HeartbeatRequest,
                    emit: Callable[[ConsumerGroupRecord], None]) -> ConsumerGroupMember:
        """The member the heartbeat is for: an existing one (its epoch checked), a static member taking over its
        instance id, or a new one (not in the group until its first record)."""
        joining = request.member_epoch == 0
        if request.instance_id is not None:
            existing = group.static_member(request.instance_id)
            if joining and existing is not None and existing.member_id != member_id:
                if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    raise KafkaError(f"Static member {member_id} with instance id {request.instance_id} cannot join "
                                     f"the group because the instance id is owned by member {existing.member_id}.",
                                     ErrorCode.UNRELEASED_INSTANCE_ID)
                self._replace_static(group, existing, member_id, emit)
                return group.members[member_id]
            if not joining:
                if existing is None:
                    raise KafkaError(f"Instance id {request.instance_id} is unknown.", ErrorCode.UNKNOWN_MEMBER_ID)
                if existing.member_id != member_id:
                    raise KafkaError(f"Static member {member_id} with instance id {request.instance_id} was fenced "
                                     f"by member {existing.member_id}.", ErrorCode.FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise KafkaError(f"Member {member_id} is not a member of group {group.group_id}.",
                                 ErrorCode.UNKNOWN_MEMBER_ID)
            return ConsumerGroupMember(member_id)
        if joining and member.member_epoch != 0:
            # A rejoin under a known id: the client gave its partitions up; start it afresh (see the rules).
            log.info("consumer group %s: member %s rejoins with epoch 0 (was %d)", group.group_id, member_id,
                     member.member_epoch)
            emit(CurrentAssignmentRecord(group.group_id, member_id, None))
            return member
        self._check_member_epoch(member, request.member_epoch, request.owned)
        return member

    @staticmethod
    def _check_member_epoch(member: ConsumerGroupMember, received: int,
                            owned: Mapping[bytes, frozenset[int]] | None) -> None:
        """Kafka's throwIfConsumerGroupMemberEpochIsInvalid."""
        expected = member.member_epoch
        if received > expected or (received < expected and (
                received != member.assignment.previous_member_epoch
                or not _is_subset(owned, member.assignment.assigned))):
            raise KafkaError(f"The consumer group member has epoch {received}, the group coordinator knows it at "
                             f"{expected}. The member must abandon all its partitions and rejoin.",
                             ErrorCode.FENCED_MEMBER_EPOCH)

    def _replace_static(self, group: ConsumerGroup, old: ConsumerGroupMember, member_id: str,
                        emit: Callable[[ConsumerGroupRecord], None]) -> None:
        """Kafka's replaceMember: the new instance takes over the old one's target and current assignment."""
        target = group.target_of(old.member_id)
        assignment = replace(old.assignment, member_epoch=0, previous_member_epoch=0)
        subscription = old.subscription
        log.info("consumer group %s: static member %s (instance %s) replaces %s", group.group_id, member_id,
                 subscription.instance_id, old.member_id)
        for record in member_removal_records(group.group_id, old.member_id):
            emit(record)
        emit(MemberMetadataRecord(group.group_id, member_id, subscription))
        emit(TargetAssignmentMemberRecord(group.group_id, member_id, target))
        emit(CurrentAssignmentRecord(group.group_id, member_id, assignment))

    def _leave(self, group: ConsumerGroup, request: HeartbeatRequest,
               emit: Callable[[ConsumerGroupRecord], None]) -> HeartbeatResult:
        if request.instance_id is None:
            member = group.members.get(request.member_id)
            if member is None:
                raise KafkaError(f"Member {request.member_id} is not a member of group {group.group_id}.",
                                 ErrorCode.UNKNOWN_MEMBER_ID)
        else:
            member = group.static_member(request.instance_id)
            if member is None:
                raise KafkaError(f"Instance id {request.instance_id} is unknown.", ErrorCode.UNKNOWN_MEMBER_ID)
            if member.member_id != request.member_id:
                raise KafkaError(f"Static member {request.member_id} with instance id {request.instance_id} was "
                                 f"fenced by member {member.member_id}.", ErrorCode.FENCED_INSTANCE_ID)
            if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                log.info("consumer group %s: static member %s (instance %s) left for now; its partitions wait for "
                         "it until its session expires", group.group_id, member.member_id, request.instance_id)
                emit(CurrentAssignmentRecord(group.group_id, member.member_id, replace(
                    member.assignment, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})))
                return HeartbeatResult(member.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                                       self.config.heartbeat_interval_ms, None)
        log.info("consumer group %s: member %s left", group.group_id, member.member_id)
        self.fence_member(group, member, emit)
        return HeartbeatResult(request.member_id, request.member_epoch, self.config.heartbeat_interval_ms, None)

    def fence_member(self, group: ConsumerGroup, member: ConsumerGroupMember,
                     emit: Callable[[ConsumerGroupRecord], None]) -> None:
        """Kafka's consumerGroupFenceMember: remove the member; the group epoch moves so the others rebalance."""
        for record in member_removal_records(group.group_id, member.member_id):
            emit(record)
        metadata = self.subscription_metadata(group)
        if metadata != group.subscription_metadata:
            emit(SubscriptionMetadataRecord(group.group_id, metadata))
        emit(GroupEpochRecord(group.group_id, group.group_epoch + 1))

    # -- assignment -----------------------------------------------------------------------------------------

    def subscribed_topics(self, subscription: MemberSubscription) -> set[str]:
        """The existing topics a member subscribes to: by name, and by its regular expression."""
        topics = self._topics()
        names = {name for name in subscription.subscribed_topic_names if name in topics}
        if subscription.subscribed_topic_regex:
            pattern = compile_regex(subscription.subscribed_topic_regex)
            names.update(name for name in topics if name not in INTERNAL_TOPICS and pattern.fullmatch(name))
        return names

    def subscription_metadata(self, group: ConsumerGroup) -> dict[str, TopicMetadata]:
        topics = self._topics()
        names: set[str] = set()
        for member in group.members.values():
            names |= self.subscribed_topics(member.subscription)
        return {name: TopicMetadata(topics[name].topic_id, name, len(topics[name].partitions))
                for name in sorted(names)}

    def _update_target_assignment(self, group: ConsumerGroup, emit: Callable[[ConsumerGroupRecord], None]) -> None:
        """Kafka's TargetAssignmentBuilder: records for the members whose target moved, then the epoch."""
        metadata = group.subscription_metadata
        specs = {
            member_id: MemberSubscriptionSpec(
                member_id=member_id, instance_id=member.instance_id, rack_id=member.subscription.rack_id,
                subscribed_topic_ids=frozenset(metadata[name].topic_id
                                               for name in self.subscribed_topics(member.subscription)
                                               if name in metadata),
                assignment=group.target_of(member_id))
            for member_id, member in group.members.items()
        }
        assignor = group.preferred_assignor(self.config.assignors[0])
        target = ASSIGNORS[assignor].assign(specs, {t.topic_id: t.partitions for t in metadata.values()})
        for member_id, partitions in sorted(target.items()):
            if normalised(partitions) != normalised(group.target_of(member_id)):
                emit(TargetAssignmentMemberRecord(group.group_id, member_id, normalised(partitions)))
        emit(TargetAssignmentEpochRecord(group.group_id, group.group_epoch))
        log.info("consumer group %s: target assignment for epoch %d by the %s assignor", group.group_id,
                 group.group_epoch, assignor)

    def _maybe_reconcile(self, group: ConsumerGroup, member: ConsumerGroupMember,
                         owned: Mapping[bytes, frozenset[int]] | None,
                         emit: Callable[[ConsumerGroupRecord], None]) -> None:
        if member.is_reconciled_to(group.assignment_epoch):
            return
        updated = reconcile(member.assignment, group.assignment_epoch, group.target_of(member.member_id), owned,
                            group.partition_epochs)
        if updated == member.assignment:
            return
        emit(CurrentAssignmentRecord(group.group_id, member.member_id, updated))
        if updated.state is MemberState.UNREVOKED_PARTITIONS:
            self._arm_rebalance(group, member)
        elif member.rebalance_timer is not None:
            member.rebalance_timer.cancel()
            member.rebalance_timer = None

    # -- timers ---------------------------------------------------------------------------------------------

    def _arm_session(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        member.session_timer = asyncio.get_running_loop().call_later(
            self.config.session_timeout_ms / 1000, self._expire, group, member.member_id, None,
            "its session expired")

    def _arm_rebalance(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        if member.rebalance_timer is not None:
            member.rebalance_timer.cancel()
        timeout_ms = member.subscription.rebalance_timeout_ms
        if timeout_ms < 0:
            return
        member.rebalance_timer = asyncio.get_running_loop().call_later(
            timeout_ms / 1000, self._expire, group, member.member_id, member.member_epoch,
            f"it did not revoke its partitions within its rebalance timeout ({timeout_ms} ms)")

    def _expire(self, group: ConsumerGroup, member_id: str, epoch: int | None, why: str) -> None:
        member = group.members.get(member_id)
        if member is None or group.dead or (epoch is not None and member.member_epoch != epoch):
            return
        member.session_timer = member.rebalance_timer = None
        log.info("consumer group %s: member %s removed: %s", group.group_id, member_id, why)
        decided: list[ConsumerGroupRecord] = []

        def emit(record: ConsumerGroupRecord) -> None:
            group.replay(record, self._now_ms())
            decided.append(record)

        self.fence_member(group, member, emit)
        self._write(group, decided)

    def on_loaded(self, group: ConsumerGroup) -> None:
        """A new coordinator loaded the group: every member's session starts now, and a member owing a revocation
        has its rebalance timeout again (Kafka's onLoaded)."""
        for member in group.members.values():
            self._arm_session(group, member)
            if member.assignment.state is MemberState.UNREVOKED_PARTITIONS:
                self._arm_rebalance(group, member)

    def on_topics_changed(self, groups: Iterable[ConsumerGroup]) -> None:
        """Topics were created, deleted or grew: each group rechecks its subscription at its next heartbeat."""
        for group in groups:
            group.metadata_refresh = True


def _is_subset(owned: Mapping[bytes, frozenset[int]] | None, assigned: Mapping[bytes, frozenset[int]]) -> bool:
    if owned is None:
        return False
    return all(partitions <= assigned.get(topic_id, frozenset()) for topic_id, partitions in owned.items())
