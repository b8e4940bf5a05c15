"""The classic group membership protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) over `ClassicGroup`s:
Kafka's GroupMetadataManager classicGroup* methods, with their timers and parked requests.

Rules:
- All state is owned by the event loop and mutated between awaits. JoinGroup and SyncGroup park a future on
  the member until the phase completes; every deadline is a loop timer (session expiry per member, the join
  phase per group, the initial rebalance delay), never a polling loop. The timers live here and on the group's
  members (`session_timer`, `join_timer`, `pending_members`); `unload` stops them.
- A join phase completes as soon as every known member has rejoined and no MEMBER_ID_REQUIRED member is
  outstanding, else at the rebalance timeout, which removes the dynamic members that did not rejoin. Only
  the first join phase of an empty group waits `group.initial.rebalance.delay.ms` (extended while new
  members keep arriving, up to the rebalance timeout), as Kafka does, so a group forms in one generation.
- A member parked in JoinGroup or SyncGroup is kept alive; its session timer restarts with the answer, and with
  each Heartbeat and each OffsetCommit that names it (`arm_session`).
- Static members (KIP-345) keep their place across a rejoin under a new member id, which fences the old one; a
  restarted static follower gets its assignment back without a rebalance, and so does the leader of a JoinGroup
  v9+ client (KIP-814). New dynamic members of JoinGroup v4+ get MEMBER_ID_REQUIRED first (KIP-394).
- Persistence: the group's metadata record is written (`ShardRuntime.append`) when the leader's assignment is
  synced (the members wait for it; a failed write makes them rejoin), when the group turns empty and when a
  static member takes a new id (writes nobody waits for).
- The coordinator has answered NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS before a request gets here; a
  group id of another type answers the `GroupMetadataManager.classic_group` error (GROUP_ID_NOT_FOUND).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from epoch_broker.broker.groups.classic_group import ClassicGroup, ClassicGroupMember, ClassicGroupState
from epoch_broker.broker.groups.runtime import ShardRuntime
from epoch_broker.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from epoch_broker.broker.groups.group_metadata_manager import GroupMetadataManager

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    # (member_id, group_instance_id, metadata), only for the leader.
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False  # KIP-814: a static leader back in a Stable group keeps the assignment it made


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


class ClassicGroupProtocol:
    def __init__(self, runtime: ShardRuntime, groups: GroupMetadataManager) -> None:
        self.runtime = runtime
        self.groups = groups

    def _store_group(self, group: ClassicGroup) -> asyncio.Future[Any]:
        """Write the group's metadata record (Kafka's GroupMetadataValue v3)."""
        return self.runtime.append([group.metadata_record()])

    def unload(self, group: ClassicGroup) -> None:
        """The partition is led elsewhere now: timers stop, parked members get NOT_COORDINATOR (and find the new
        coordinator)."""
        if group.join_timer is not None:
            group.join_timer.cancel()
        for timer in group.pending_members.values():
            timer.cancel()
        for member in group.members.values():
            self.cancel_session(member)
            _resolve(member.join_waiter, JoinResult(ErrorCode.NOT_COORDINATOR, member.member_id))
            _resolve(member.sync_waiter, SyncResult(ErrorCode.NOT_COORDINATOR))

    # -- JoinGroup ------------------------------------------------------------------------------------------

    async def join_group(
        self,
        *,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        client_id: str,
        client_host: str,
        require_known_member_id: bool,
        skip_assignment_supported: bool = False,
    ) -> JoinResult:
        """`skip_assignment_supported`: JoinGroup v9+ (KIP-814), whose clients keep a Stable group's assignment
        when their static leader rejoins."""
        if not group_id:
            return JoinResult(ErrorCode.INVALID_GROUP_ID, member_id)
        low, high = self.runtime.session_timeout_bounds_ms
        if not low <= session_timeout_ms <= high:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        try:
            # A new member (no member id) creates the group; a member id from a group gone here is unknown.
            group = self.groups.classic_group(group_id, create_if_missing=not member_id)
        except KafkaError as exc:  # a group of another type
            return JoinResult(exc.code, member_id)
        if group is None:
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        if group.state is ClassicGroupState.DEAD:
            # Deleted while this request was on its way: the client rediscovers the coordinator.
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
        if rebalance_timeout_ms < 0:  # JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout
            rebalance_timeout_ms = session_timeout_ms
        if not group.supports(protocol_type, protocols):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        member = ClassicGroupMember("", group_instance_id, client_id, client_host, rebalance_timeout_ms,
                                    session_timeout_ms, protocol_type, protocols)
        if member_id:
            outcome = self._join_known(group, member_id, member)
        else:
            outcome = self._join_new(group, member, require_known_member_id, skip_assignment_supported)
        return await outcome if isinstance(outcome, asyncio.Future) else outcome

    def _join_new(self, group: ClassicGroup, joining: ClassicGroupMember, require_known_member_id: bool,
                  skip_assignment_supported: bool) -> JoinResult | asyncio.Future[JoinResult]:
        joining.member_id = f"{joining.group_instance_id or joining.client_id}-{uuid.uuid4()}"
        if joining.group_instance_id is not None:
            # Static members skip the MEMBER_ID_REQUIRED round trip (KIP-345).
            old_id = group.static_members.get(joining.group_instance_id)
            if old_id is not None:
                return self._replace_static(group, group.members[old_id], joining, skip_assignment_supported)
        elif require_known_member_id:
            # KIP-394 (v4+ only: older clients cannot handle it): hand out the id, count it as joining.
            timer = asyncio.get_running_loop().call_later(
                joining.session_timeout_ms / 1000, self._expire_pending, group, joining.member_id
            )
            group.pending_members[joining.member_id] = timer
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, joining.member_id)
        return self._add_and_rebalance(group, joining)

    def _join_known(self, group: ClassicGroup, member_id: str,
                    joining: ClassicGroupMember) -> JoinResult | asyncio.Future[JoinResult]:
        joining.member_id = member_id
        pending = group.pending_members.pop(member_id, None)
        if pending is not None:
            pending.cancel()
            return self._add_and_rebalance(group, joining)
        if group.is_fenced(member_id, joining.group_instance_id):
            return JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id)
        member = group.members.get(member_id)
        if member is None or group.state in (ClassicGroupState.EMPTY, ClassicGroupState.DEAD):
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        unchanged = member.same_protocols(joining.protocols)
        if group.state is ClassicGroupState.COMPLETING_REBALANCE and unchanged:
            # A retried JoinGroup of this generation (its answer was lost): answer it again.
            return self._join_result(group, member)
        if group.state is ClassicGroupState.STABLE and unchanged and member_id != group.leader_id:
            # A follower rejoining with nothing new: no rebalance (the leader's rejoin does trigger one).
            return self._join_result(group, member)
        member.protocols = joining.protocols
        member.session_timeout_ms = joining.session_timeout_ms
        member.rebalance_timeout_ms = joining.rebalance_timeout_ms
        member.client_id, member.client_host = joining.client_id, joining.client_host
        return self._join_and_rebalance(group, member)

    def _replace_static(self, group: ClassicGroup, old: ClassicGroupMember, joining: ClassicGroupMember,
                        skip_assignment_supported: bool) -> JoinResult | asyncio.Future[JoinResult]:
        """A static member came back under a new member id: the old id is fenced, the place is kept."""
        old_id = old.member_id
        self.cancel_session(old)
        _resolve(old.join_waiter, JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
        _resolve(old.sync_waiter, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        old.join_waiter = old.sync_waiter = None
        member = group.replace_static(old, joining.member_id)
        unchanged = member.same_protocols(joining.protocols)
        member.protocols = joining.protocols
        member.session_timeout_ms = joining.session_timeout_ms
        member.rebalance_timeout_ms = joining.rebalance_timeout_ms
        leader = member.member_id == group.leader_id
        if group.state is ClassicGroupState.STABLE and unchanged and (not leader or skip_assignment_supported):
            # KIP-345: a restarted static follower gets its old assignment back without a rebalance; KIP-814: so
            # does the leader of a client that can be told not to assign again (it still learns the members).
            self.arm_session(group, member)
            self.runtime.spawn(self._store_group(group))  # the new member id, as Kafka persists it
            return replace(self._join_result(group, member), skip_assignment=leader)
        return self._join_and_rebalance(group, member)

    def _add_and_rebalance(self, group: ClassicGroup, member: ClassicGroupMember) -> asyncio.Future[JoinResult]:
        group.add(member)
        return self._join_and_rebalance(group, member)

    def _join_and_rebalance(self, group: ClassicGroup, member: ClassicGroupMember) -> asyncio.Future[JoinResult]:
        """Park the member's JoinGroup, then complete the rebalance under way or start one."""
        waiter = self._park_join(group, member)
        if group.state is ClassicGroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group)
        else:
            self._prepare_rebalance(group)
        return waiter

    def _park_join(self, group: ClassicGroup, member: ClassicGroupMember) -> asyncio.Future[JoinResult]:
        # A member that sends JoinGroup again while parked: its previous request is answered, the new one waits.
        _resolve(member.join_waiter, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_waiter = asyncio.get_running_loop().create_future()
        self.cancel_session(member)
        return member.join_waiter

    def _prepare_rebalance(self, group: ClassicGroup) -> None:
        if group.state is ClassicGroupState.COMPLETING_REBALANCE:
            # The assignment being synced is void: parked SyncGroups are told to rejoin.
            for member in group.members.values():
                member.assignment = b""
                _resolve(member.sync_waiter, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
                member.sync_waiter = None
                self.arm_session(group, member)
        if group.join_timer is not None:
            group.join_timer.cancel()
        loop = asyncio.get_running_loop()
        # No members left (the last one left a Stable group): the phase completes at once, to Empty.
        rebalance_timeout_ms = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        initial = group.state is ClassicGroupState.EMPTY and self.runtime.initial_rebalance_delay_ms > 0
        group.transition(ClassicGroupState.PREPARING_REBALANCE, self.runtime.now_ms())
        if initial:
            delay = min(self.runtime.initial_rebalance_delay_ms, rebalance_timeout_ms)
            group.initial_delay_remaining_ms = max(rebalance_timeout_ms - self.runtime.initial_rebalance_delay_ms, 0)
            group.new_member_joined = False
            group.join_timer = loop.call_later(delay / 1000, self._initial_delay_elapsed, group)
        else:
            group.join_timer = loop.call_later(rebalance_timeout_ms / 1000, self._complete_join, group)
            self._maybe_complete_join(group)

    def _initial_delay_elapsed(self, group: ClassicGroup) -> None:
        remaining = group.initial_delay_remaining_ms or 0
        if group.new_member_joined and remaining > 0:
            delay = min(self.runtime.initial_rebalance_delay_ms, remaining)
            group.initial_delay_remaining_ms = remaining - delay
            group.new_member_joined = False
            group.join_timer = asyncio.get_running_loop().call_later(delay / 1000, self._initial_delay_elapsed, group)
            return
        self._complete_join(group)

    def _maybe_complete_join(self, group: ClassicGroup) -> None:
        if (group.state is ClassicGroupState.PREPARING_REBALANCE and group.initial_delay_remaining_ms is None
                and group.all_joined()):
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        if group.state is not ClassicGroupState.PREPARING_REBALANCE:
            return
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.initial_delay_remaining_ms = None
        for member in [m for m in group.members.values() if m.join_waiter is None]:
            # Did not rejoin within the rebalance timeout. Static members keep their place (KIP-345).
            if member.group_instance_id is None:
                self.cancel_session(member)
                group.remove(member.member_id)
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.transition(ClassicGroupState.EMPTY, self.runtime.now_ms())
            self.runtime.spawn(self._store_group(group))
            log.info("group %s is empty at generation %d", group.group_id, group.generation_id)
            return
        group.protocol_name = group.select_protocol()
        leader = group.members.get(group.leader_id or "")
        if leader is None or leader.join_waiter is None:
            group.leader_id = next(m.member_id for m in group.members.values() if m.join_waiter is not None)
        group.transition(ClassicGroupState.COMPLETING_REBALANCE, self.runtime.now_ms())
        self.runtime.record_rebalance(group.group_id)
        log.info("group %s generation %d: %d members, protocol %s, leader %s", group.group_id,
                 group.generation_id, len(group.members), group.protocol_name, group.leader_id)
        for member in group.members.values():
            if member.join_waiter is not None:
                _resolve(member.join_waiter, self._join_result(group, member))
                member.join_waiter = None
            self.arm_session(group, member)

    def _join_result(self, group: ClassicGroup, member: ClassicGroupMember) -> JoinResult:
        members = []
        if member.member_id == group.leader_id:
            members = [(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                       for m in group.members.values()]
        return JoinResult(ErrorCode.NONE, member.member_id, group.generation_id, group.protocol_type,
                          group.protocol_name, group.leader_id or "", members)

    # -- SyncGroup ------------------------------------------------------------------------------------------

    async def sync_group(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        group, member, error = self._member_of(group_id, member_id, group_instance_id, generation_id)
        if error is ErrorCode.NONE and group is not None and (  # (a group whenever the error is NONE)
            (protocol_type is not None and protocol_type != group.protocol_type)
            or (protocol_name is not None and protocol_name != group.protocol_name)
        ):
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL  # SyncGroup v5 names what the member expects
        if error is not ErrorCode.NONE:
            return SyncResult(error)
        assert group is not None and member is not None
        if group.state is ClassicGroupState.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.state is ClassicGroupState.STABLE:
            self.arm_session(group, member)
            return self._sync_result(group, member)
        # CompletingRebalance: wait for the leader's assignment.
        _resolve(member.sync_waiter, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        waiter: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        member.sync_waiter = waiter
        self.cancel_session(member)
        if member_id == group.leader_id:
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            generation = group.generation_id
            try:
                await self._store_group(group)
            except KafkaError as exc:  # the members must rejoin, as in Kafka
                log.warning("storing group %s failed: %s", group_id, exc)
                if group.state is ClassicGroupState.COMPLETING_REBALANCE and group.generation_id == generation:
                    self._prepare_rebalance(group)
                return await waiter
            if group.state is not ClassicGroupState.COMPLETING_REBALANCE or group.generation_id != generation:
                return await waiter  # a rebalance started meanwhile and answered the parked members
            group.transition(ClassicGroupState.STABLE, self.runtime.now_ms())
            for m in group.members.values():
                if m.sync_waiter is not None:
                    _resolve(m.sync_waiter, self._sync_result(group, m))
                    m.sync_waiter = None
                self.arm_session(group, m)
        return await waiter

    @staticmethod
    def _sync_result(group: ClassicGroup, member: ClassicGroupMember) -> SyncResult:
        return SyncResult(ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name)

    def _member_of(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> tuple[ClassicGroup | None, ClassicGroupMember | None, ErrorCode]:
        """The checks Heartbeat and SyncGroup share, in Kafka's order."""
        try:
            group = self.groups.classic_group(group_id)
        except KafkaError as exc:  # a group of another type
            return None, None, exc.code
        if group is None:
            return None, None, ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is ClassicGroupState.DEAD:
            return group, None, ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_fenced(member_id, group_instance_id):
            return group, None, ErrorCode.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None or group.state is ClassicGroupState.EMPTY:
            return group, None, ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return group, member, ErrorCode.ILLEGAL_GENERATION
        return group, member, ErrorCode.NONE

    # -- Heartbeat, LeaveGroup, session expiry --------------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> ErrorCode:
        group, member, error = self._member_of(group_id, member_id, group_instance_id, generation_id)
        if error is not ErrorCode.NONE:
            return error
        assert group is not None and member is not None
        self.arm_session(group, member)
        # During a join phase the heartbeat answer is how a member learns it must rejoin.
        rebalancing = group.state is ClassicGroupState.PREPARING_REBALANCE
        return ErrorCode.REBALANCE_IN_PROGRESS if rebalancing else ErrorCode.NONE

    def leave_group(
        self, group_id: str, leaving: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        """(group error, per member (member_id, group_instance_id, error)) for LeaveGroup."""
        try:
            group = self.groups.classic_group(group_id)
        except KafkaError as exc:  # a group of another type
            return exc.code, [(m, i, exc.code) for m, i in leaving]
        if group is None:
            return ErrorCode.NONE, [(m, i, ErrorCode.UNKNOWN_MEMBER_ID) for m, i in leaving]
        if group.state is ClassicGroupState.DEAD:
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
            return error, [(m, i, error) for m, i in leaving]
        results = []
        for member_id, instance_id in leaving:
            results.append((member_id, instance_id, self._leave_one(group, member_id, instance_id)))
        return ErrorCode.NONE, results

    def _leave_one(self, group: ClassicGroup, member_id: str, instance_id: str | None) -> ErrorCode:
        if instance_id is not None:
            owner = group.static_members.get(instance_id)
            if owner is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if member_id and member_id != owner:  # an empty member id leaves by instance id alone (KIP-345 admin)
                return ErrorCode.FENCED_INSTANCE_ID
            member_id = owner
        pending = group.pending_members.pop(member_id, None)
        if pending is not None:
            pending.cancel()
            self._maybe_complete_join(group)
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        log.info("member %s leaves group %s", member_id, group.group_id)
        self._remove_member(group, member)
        return ErrorCode.NONE

    def _remove_member(self, group: ClassicGroup, member: ClassicGroupMember) -> None:
        self.cancel_session(member)
        _resolve(member.join_waiter, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        _resolve(member.sync_waiter, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.state in (ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group)
        else:
            self._maybe_complete_join(group)

    def arm_session(self, group: ClassicGroup, member: ClassicGroupMember) -> None:
        """(Re)start the member's session timer; parked members are kept alive instead."""
        self.cancel_session(member)
        if member.join_waiter is None and member.sync_waiter is None:
            member.session_timer = asyncio.get_running_loop().call_later(
                member.session_timeout_ms / 1000, self._expire_member, group, member
            )

    @staticmethod
    def cancel_session(member: ClassicGroupMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
            member.session_timer = None

    def _expire_member(self, group: ClassicGroup, member: ClassicGroupMember) -> None:
        member.session_timer = None
        if group.members.get(member.member_id) is member:
            log.info("member %s of group %s: session timeout expired", member.member_id, group.group_id)
            self._remove_member(group, member)

    def _expire_pending(self, group: ClassicGroup, member_id: str) -> None:
        """A MEMBER_ID_REQUIRED member that never came back stops holding up the join phase."""
        if group.pending_members.pop(member_id, None) is not None:
            self._maybe_complete_join(group)


_T = TypeVar("_T")


def _resolve(waiter: asyncio.Future[_T] | None, result: _T) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(result)
