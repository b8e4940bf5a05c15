"""The reconciliation state machine of a KIP-848 consumer group member (Kafka's CurrentAssignmentBuilder).

The group decides a target assignment per member at a target (assignment) epoch; a member's current assignment
converges to it over heartbeats without a partition ever being held by two members. What the group stores for a
member is a `MemberAssignment`: its state, member epoch (and the epoch before the last bump), the partitions assigned
to it and those it must give up (pending revocation). `reconcile` computes the next one from the heartbeat's owned
partitions and the group-wide owner epochs (`PartitionEpochs`).

States (Kafka's MemberState, with the ids stored in ConsumerGroupCurrentMemberAssignmentValue.State):

    STABLE (0)                 reconciled to its member epoch; a newer target epoch starts a new reconciliation
    UNREVOKED_PARTITIONS (1)   must stop owning `pending_revocation` before moving on; its epoch stays
    UNRELEASED_PARTITIONS (2)  at the target epoch, waiting for partitions their previous owners still hold
    UNKNOWN (127)              a state id written by a newer version; the member is fenced and starts over

Next assignment, per topic: kept = assigned ∩ target; to revoke = assigned - kept; to assign = target - kept, less
the partitions still held by a member (`partition_owner_epoch != -1`: unreleased). Then, in Kafka's order:
1. something to revoke that the member may still own (owned unknown, or listing one of them) -> UNREVOKED_PARTITIONS,
   assigned = kept, at the epoch given by the caller (the member's own; not the target's: the member has not
   reached it). If the member no longer owns them, the revocation is skipped: they are dropped outright.
2. something to assign -> assigned = kept + to assign, at the target epoch; UNRELEASED_PARTITIONS if some partition
   was unreleased, else STABLE.
3. nothing to assign but something unreleased -> UNRELEASED_PARTITIONS, assigned = kept, at the target epoch.
4. otherwise STABLE, assigned = kept, at the target epoch.
Every transition sets `previous_member_epoch` to the epoch before it (also when the epoch does not change, as
Kafka's `updateMemberEpoch`), and the pending revocation is empty outside UNREVOKED_PARTITIONS.

Per state:
- STABLE: unchanged while the member epoch is the target epoch; else the next assignment.
- UNREVOKED_PARTITIONS: unchanged while the heartbeat's owned partitions (None: nothing confirmed) list any pending
  revocation. Once none is listed, the next assignment against the latest target, with member epoch + 1 as the epoch
  of a new revocation: acknowledging a revocation is progress a stale heartbeat must not be able to repeat, so a
  member still revoking after the target moved again carries a new epoch (Kafka 4.0; the bump never passes the target
  epoch, which was above the member epoch when the revocation was asked).
- UNRELEASED_PARTITIONS: the next assignment against the latest target (moved or not): partitions that became free
  are assigned, partitions the new target drops are revoked; STABLE once none is unreleased.
- UNKNOWN: a heartbeat that does not report an empty owned list is refused with FENCED_MEMBER_EPOCH (the client
  drops its partitions and rejoins); an empty one gets the next assignment at the target epoch.

`partition_owner_epoch(topic_id, partition)` gives the epoch of the member holding a partition (assigned or pending
revocation), or -1 if free. The brief says "of another member"; the group-wide map Kafka passes (and `PartitionEpochs`)
includes the member itself, which is harmless: the member's own assigned partitions are never asked about, and a
partition of its own pending revocation that the target gives back is unreleased for one heartbeat, until this
member's new assignment (which no longer holds it) is stored.

Outside this module, in the heartbeat (Kafka's `throwIfConsumerGroupMemberEpochIsInvalid`): a heartbeat with an epoch
above the member's is fenced; one with a lower epoch is accepted only when it is `previous_member_epoch` and its
owned partitions are a subset of `assigned` (the response carrying the bump was lost: the client may hold only
partitions it is still entitled to); anything else is fenced (FENCED_MEMBER_EPOCH). Owned partitions None is not a
subset. The group then calls `reconcile` only when the member is not already STABLE at the target epoch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from epoch_broker.protocol.errors import ErrorCode, KafkaError

Assignment = Mapping[bytes, frozenset[int]]  # topic id -> partitions, never an empty set

FREE = -1  # partition_owner_epoch of a partition no member holds


class MemberState(StrEnum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"
    UNKNOWN = "unknown"

    @property
    def value_id(self) -> int:
        """The id stored in ConsumerGroupCurrentMemberAssignmentValue.State."""
        return _STATE_IDS[self]

    @classmethod
    def from_value_id(cls, value_id: int) -> MemberState:
        """A state id read from a record; one this version does not know is UNKNOWN, as Kafka's `fromValue`."""
        return _STATES_BY_ID.get(value_id, cls.UNKNOWN)


_STATE_IDS: dict[MemberState, int] = {
    MemberState.STABLE: 0,
    MemberState.UNREVOKED_PARTITIONS: 1,
    MemberState.UNRELEASED_PARTITIONS: 2,
    MemberState.UNKNOWN: 127,
}
_STATES_BY_ID: dict[int, MemberState] = {value_id: state for state, value_id in _STATE_IDS.items()}


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    """What the group stores for a member (ConsumerGroupCurrentMemberAssignmentValue)."""

    state: MemberState
    member_epoch: int
    previous_member_epoch: int
    assigned: Assignment
    pending_revocation: Assignment


def normalised(assignment: Mapping[bytes, Iterable[int]]) -> dict[bytes, frozenset[int]]:
    """The assignment with frozenset values, sorted by topic id, without empty topics."""
    return {topic_id: frozenset(assignment[topic_id]) for topic_id in sorted(assignment) if assignment[topic_id]}


def _owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """Whether the client may still own one of `partitions`: it did not say what it owns, or it lists one."""
    if owned is None:
        return True
    return any(owned_partitions & partitions.get(topic_id, frozenset())
               for topic_id, owned_partitions in owned.items())


def reconcile(current: MemberAssignment, target_epoch: int, target: Assignment, owned: Assignment | None,
              partition_owner_epoch: Callable[[bytes, int], int]) -> MemberAssignment:
    """The member's next assignment, or `current` itself (the same object) when nothing changes.

    Raises KafkaError(FENCED_MEMBER_EPOCH) for a member in the UNKNOWN state that did not report owning nothing.
    """
    if current.state is MemberState.STABLE:
        if current.member_epoch == target_epoch:
            return current
        return _next_assignment(current, current.member_epoch, target_epoch, target, owned, partition_owner_epoch)
    if current.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, current.pending_revocation):
            return current  # still revoking; the rebalance timeout bounds the wait
        return _next_assignment(current, current.member_epoch + 1, target_epoch, target, owned,
                                partition_owner_epoch)
    if current.state is MemberState.UNRELEASED_PARTITIONS:
        return _next_assignment(current, current.member_epoch, target_epoch, target, owned, partition_owner_epoch)
    # UNKNOWN: only a future version writes it; start the member from scratch once it holds nothing.
    if owned is None or any(owned.values()):
        raise KafkaError("The consumer group member is in an unknown state. The member must abandon all its "
                         "partitions and rejoin.", ErrorCode.FENCED_MEMBER_EPOCH)
    return _next_assignment(current, target_epoch, target_epoch, target, owned, partition_owner_epoch)


def _next_assignment(current: MemberAssignment, member_epoch: int, target_epoch: int, target: Assignment,
                     owned: Assignment | None,
                     partition_owner_epoch: Callable[[bytes, int], int]) -> MemberAssignment:
    """Kafka's computeNextAssignment; `member_epoch` is the epoch to stay at if a revocation is asked."""
    assigned: dict[bytes, frozenset[int]] = {}
    to_revoke: dict[bytes, frozenset[int]] = {}
    to_assign: dict[bytes, frozenset[int]] = {}
    has_unreleased = False
    for topic_id in sorted(set(target) | set(current.assigned)):
        target_partitions = frozenset(target.get(topic_id, ()))
        current_partitions = frozenset(current.assigned.get(topic_id, ()))
        kept = current_partitions & target_partitions
        wanted = target_partitions - kept
        free = frozenset(p for p in wanted if partition_owner_epoch(topic_id, p) == FREE)
        has_unreleased = has_unreleased or free != wanted
        if kept:
            assigned[topic_id] = kept
        if current_partitions - kept:
            to_revoke[topic_id] = current_partitions - kept
        if free:
            to_assign[topic_id] = free

    if to_revoke and _owns_any(owned, to_revoke):
        # The member keeps its epoch until it confirms the revocation: it has not reached the target yet.
        revoking = MemberAssignment(MemberState.UNREVOKED_PARTITIONS, member_epoch, current.member_epoch,
                                    assigned, to_revoke)
        return current if revoking == current else revoking
    # Partitions to revoke that the member reported not owning are simply dropped.
    for topic_id, partitions in to_assign.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | partitions
    state = MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE
    result = MemberAssignment(state, target_epoch, current.member_epoch, normalised(assigned), {})
    return current if result == current else result  # nothing moved: the caller can tell by identity


class IllegalStateError(RuntimeError):
    """An invariant of the group's state broke (Kafka's IllegalStateException): a bug, never a client's error."""


class PartitionEpochs:
    """The group-wide map (topic id, partition) -> epoch of the member holding it (assigned or pending revocation).

    Kafka's ConsumerGroup.currentPartitionEpoch. Invariant: no partition is held by two members; adding a partition
    already held, or removing one not held at the expected epoch, raises IllegalStateError and changes nothing.
    Callable as the `partition_owner_epoch` argument of `reconcile`.
    """

    __slots__ = ("_epochs",)

    def __init__(self) -> None:
        self._epochs: dict[tuple[bytes, int], int] = {}

    def __call__(self, topic_id: bytes, partition: int) -> int:
        return self._epochs.get((topic_id, partition), FREE)

    def __len__(self) -> int:
        return len(self._epochs)

    def as_dict(self) -> dict[tuple[bytes, int], int]:
        return dict(self._epochs)

    def update(self, old: MemberAssignment | None, new: MemberAssignment | None) -> None:
        """A member's stored assignment changed from `old` to `new` (None: the member was absent / removed)."""
        removed, old_epoch = (_held(old), old.member_epoch) if old is not None else ([], FREE)
        added, new_epoch = (_held(new), new.member_epoch) if new is not None else ([], FREE)
        for key in removed:
            epoch = self._epochs.get(key)
            if epoch != old_epoch:
                raise IllegalStateError(f"cannot remove epoch {old_epoch} of {key[0].hex()}-{key[1]}: "
                                        f"it is held at epoch {epoch}")
        still_held = self._epochs.keys() - set(removed)
        seen: set[tuple[bytes, int]] = set()
        for key in added:
            if key in still_held or key in seen:
                raise IllegalStateError(f"cannot set the epoch of {key[0].hex()}-{key[1]} to {new_epoch}: "
                                        f"it is still held at epoch {self._epochs.get(key, new_epoch)}")
            seen.add(key)
        for key in set(removed):
            del self._epochs[key]
        for key in added:
            self._epochs[key] = new_epoch

    def add(self, assignment: Assignment, epoch: int) -> None:
        """Kafka's addPartitionEpochs."""
        self.update(None, MemberAssignment(MemberState.STABLE, epoch, epoch, assignment, {}))

    def remove(self, assignment: Assignment, expected_epoch: int) -> None:
        """Kafka's removePartitionEpochs."""
        self.update(MemberAssignment(MemberState.STABLE, expected_epoch, expected_epoch, assignment, {}), None)


def _held(member: MemberAssignment) -> list[tuple[bytes, int]]:
    return [(topic_id, partition)
            for held in (member.assigned, member.pending_revocation)
            for topic_id, partitions in held.items() for partition in partitions]
