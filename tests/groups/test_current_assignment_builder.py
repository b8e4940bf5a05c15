"""The KIP-848 member reconciliation state machine (Kafka's CurrentAssignmentBuilder) and the group-wide partition
epochs: table-driven, socket-free, plus a randomized group of members reconciling over heartbeats."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pytest

from epoch_broker.broker.groups.assignors import ASSIGNORS, DEFAULT_ASSIGNORS, MemberSubscriptionSpec
from epoch_broker.broker.groups.current_assignment_builder import (
    IllegalStateError,
    MemberAssignment,
    MemberState,
    PartitionEpochs,
    normalised,
    reconcile,
)
from epoch_broker.protocol.errors import ErrorCode, KafkaError

T1, T2, T3 = (bytes([i]) * 16 for i in (1, 2, 3))

STABLE = MemberState.STABLE
UNREVOKED = MemberState.UNREVOKED_PARTITIONS
UNRELEASED = MemberState.UNRELEASED_PARTITIONS


def parts(**topics: set[int]) -> dict[bytes, frozenset[int]]:
    """parts(t1={1, 2}, t2={4}) -> {T1: {1, 2}, T2: {4}}."""
    ids = {"t1": T1, "t2": T2, "t3": T3}
    return normalised({ids[name]: partitions for name, partitions in topics.items()})


def member(state: MemberState, epoch: int, previous: int, assigned: dict[bytes, frozenset[int]],
           pending: dict[bytes, frozenset[int]] | None = None) -> MemberAssignment:
    return MemberAssignment(state, epoch, previous, assigned, pending or {})


def free(topic_id: bytes, partition: int) -> int:
    return -1


def held_at(epoch: int) -> Callable[[bytes, int], int]:
    return lambda topic_id, partition: epoch


def held_on_t2_at_10(topic_id: bytes, partition: int) -> int:
    return 10 if topic_id == T2 else -1


def test_member_states_carry_kafkas_stored_ids_and_an_unknown_id_reads_as_unknown() -> None:
    assert [(s.value_id, s) for s in MemberState] == [
        (0, STABLE), (1, UNREVOKED), (2, UNRELEASED), (127, MemberState.UNKNOWN)]
    assert all(MemberState.from_value_id(s.value_id) is s for s in MemberState)
    assert MemberState.from_value_id(3) is MemberState.UNKNOWN


CASES = [
    # name, current, target epoch, target, owned, partition_owner_epoch, expected
    ("a stable member at the target epoch is unchanged",
     member(STABLE, 10, 9, parts(t1={1, 2})), 10, parts(t1={1, 2, 3}), None, free,
     "unchanged"),
    ("a stable member moves to a new target epoch with the same partitions",
     member(STABLE, 10, 10, parts(t1={1, 2}, t2={4})), 11, parts(t1={1, 2}, t2={4}), None, free,
     member(STABLE, 11, 10, parts(t1={1, 2}, t2={4}))),
    ("a stable member takes free new partitions at the target epoch",
     member(STABLE, 10, 10, parts(t1={1, 2})), 11, parts(t1={1, 2, 3}, t2={4}), None, free,
     member(STABLE, 11, 10, parts(t1={1, 2, 3}, t2={4}))),
    ("a stable member asked to revoke keeps its epoch and waits",
     member(STABLE, 10, 10, parts(t1={1, 2, 3}, t2={4, 5, 6})), 11, parts(t1={2, 3, 4}, t2={5, 6, 7}), None, free,
     member(UNREVOKED, 10, 10, parts(t1={2, 3}, t2={5, 6}), parts(t1={1}, t2={4}))),
    ("a revocation is asked even when the new partitions are free: they are assigned only after it",
     member(STABLE, 10, 9, parts(t1={1})), 11, parts(t1={2}), parts(t1={1}), free,
     member(UNREVOKED, 10, 10, {}, parts(t1={1}))),
    ("a stable member whose new partitions are still held waits for them at the target epoch",
     member(STABLE, 10, 10, parts(t1={1, 2, 3})), 11, parts(t1={1, 2, 3, 4}), None, held_at(10),
     member(UNRELEASED, 11, 10, parts(t1={1, 2, 3}))),
    ("partitions to revoke that the member reported not owning are dropped without a revocation",
     member(STABLE, 10, 10, parts(t1={1, 2, 3}, t2={4, 5, 6})), 11, parts(t1={1, 2, 3}, t2={4, 5, 7}), {},
     held_on_t2_at_10,
     member(UNRELEASED, 11, 10, parts(t1={1, 2, 3}, t2={4, 5}))),
    ("a member still listing a partition pending revocation stays unrevoked",
     member(UNREVOKED, 10, 10, parts(t1={2, 3}), parts(t1={1})), 12, parts(t1={3}), parts(t1={1, 2, 3}), free,
     "unchanged"),
    ("a member that did not report its owned partitions has confirmed nothing",
     member(UNREVOKED, 10, 10, parts(t1={2, 3}), parts(t1={1})), 11, parts(t1={2, 3}), None, free,
     "unchanged"),
    ("a member that revoked moves to the target and becomes stable",
     member(UNREVOKED, 10, 10, parts(t1={2, 3}, t2={5, 6}), parts(t1={1}, t2={4})), 11,
     parts(t1={2, 3}, t2={5, 6}), parts(t1={2, 3}, t2={5, 6}), free,
     member(STABLE, 11, 10, parts(t1={2, 3}, t2={5, 6}))),
    ("a member that revoked but must revoke more for a newer target carries its epoch plus one",
     member(UNREVOKED, 10, 10, parts(t1={2, 3}, t2={5, 6}), parts(t1={1}, t2={4})), 12,
     parts(t1={3}, t2={6}), parts(t1={2, 3}, t2={5, 6}), free,
     member(UNREVOKED, 11, 10, parts(t1={3}, t2={6}), parts(t1={2}, t2={5}))),
    ("a member that revoked waits for new partitions still held by others",
     member(UNREVOKED, 11, 10, parts(t1={2, 3}, t2={5, 6})), 11, parts(t1={2, 3, 4}, t2={5, 6, 7}),
     parts(t1={2, 3}, t2={5, 6}), held_at(10),
     member(UNRELEASED, 11, 11, parts(t1={2, 3}, t2={5, 6}))),
    ("an unreleased member takes the partitions once they are free",
     member(UNRELEASED, 11, 11, parts(t1={2, 3})), 11, parts(t1={2, 3, 4}, t2={7}), None, free,
     member(STABLE, 11, 11, parts(t1={2, 3, 4}, t2={7}))),
    ("an unreleased member whose partitions are still held is unchanged",
     member(UNRELEASED, 11, 11, parts(t1={2, 3})), 11, parts(t1={2, 3, 4}), None, held_at(10),
     "unchanged"),
    ("an unreleased member follows a moved target that no longer wants the held partitions",
     member(UNRELEASED, 11, 11, parts(t1={2, 3})), 12, parts(t1={2, 3}), None, held_at(10),
     member(STABLE, 12, 11, parts(t1={2, 3}))),
    ("an unreleased member is asked to revoke when the moved target drops some of its partitions",
     member(UNRELEASED, 11, 11, parts(t1={2, 3}, t2={5, 6})), 12, parts(t1={3}, t2={6}), None, held_at(10),
     member(UNREVOKED, 11, 11, parts(t1={3}, t2={6}), parts(t1={2}, t2={5}))),
    ("an unreleased member gets the free part of what it waits for and keeps waiting for the rest",
     member(UNRELEASED, 11, 10, parts(t1={1})), 11, parts(t1={1}, t2={4}, t3={0}),
     None, lambda t, p: 10 if t == T3 else -1,
     member(UNRELEASED, 11, 11, parts(t1={1}, t2={4}))),
    ("a new member takes its free target at once",
     member(STABLE, 0, 0, {}), 3, parts(t1={0, 1}), {}, free,
     member(STABLE, 3, 0, parts(t1={0, 1}))),
    ("a member whose target shrank to nothing revokes everything",
     member(STABLE, 5, 4, parts(t1={0, 1})), 6, {}, parts(t1={0, 1}), free,
     member(UNREVOKED, 5, 5, {}, parts(t1={0, 1}))),
    ("an unknown-state member that reports owning nothing starts over at the target",
     member(MemberState.UNKNOWN, 11, 11, parts(t1={3}, t2={6}), parts(t1={2}, t2={5})), 12,
     parts(t1={3}, t2={6}), {}, held_at(11),
     member(STABLE, 12, 11, parts(t1={3}, t2={6}))),
]


@pytest.mark.parametrize(("current", "target_epoch", "target", "owned", "owner_epoch", "expected"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_reconcile(current: MemberAssignment, target_epoch: int, target: dict[bytes, frozenset[int]],
                   owned: dict[bytes, frozenset[int]] | None, owner_epoch: Callable[[bytes, int], int],
                   expected: MemberAssignment | str) -> None:
    result = reconcile(current, target_epoch, target, owned, owner_epoch)
    if expected == "unchanged":
        assert result is current
    else:
        assert result == expected


@pytest.mark.parametrize("owned", [None, parts(t1={3})], ids=["owned unknown", "owning a partition"])
def test_an_unknown_state_member_is_fenced_until_it_reports_owning_nothing(
        owned: dict[bytes, frozenset[int]] | None) -> None:
    current = member(MemberState.UNKNOWN, 11, 11, parts(t1={3}))
    with pytest.raises(KafkaError) as raised:
        reconcile(current, 12, parts(t1={3}), owned, free)
    assert raised.value.code is ErrorCode.FENCED_MEMBER_EPOCH


def test_a_partition_the_target_gives_back_while_being_revoked_waits_until_the_revocation_is_stored() -> None:
    # The group-wide map still holds the member's own pending revocation: one heartbeat as unreleased.
    epochs = PartitionEpochs()
    current = member(UNREVOKED, 10, 10, parts(t1={2}), parts(t1={1}))
    epochs.update(None, current)
    after_revoke = reconcile(current, 12, parts(t1={1, 2}), parts(t1={2}), epochs)
    assert after_revoke == member(UNRELEASED, 12, 10, parts(t1={2}))
    epochs.update(current, after_revoke)
    assert reconcile(after_revoke, 12, parts(t1={1, 2}), parts(t1={2}), epochs) == member(
        STABLE, 12, 12, parts(t1={1, 2}))


def test_partition_epochs_track_assigned_and_pending_partitions_at_the_members_epoch() -> None:
    epochs = PartitionEpochs()
    a = member(UNREVOKED, 4, 4, parts(t1={0}), parts(t1={1}))
    epochs.update(None, a)
    assert (epochs(T1, 0), epochs(T1, 1), epochs(T1, 2), len(epochs)) == (4, 4, -1, 2)
    a_next = member(STABLE, 5, 4, parts(t1={0}))
    epochs.update(a, a_next)
    assert epochs.as_dict() == {(T1, 0): 5}
    epochs.update(a_next, None)
    assert len(epochs) == 0


@pytest.mark.parametrize(("action", "message"), [
    (lambda e: e.add(parts(t1={1}), 7), "still held at epoch 4"),
    (lambda e: e.add(parts(t1={5}, t2={0}), 7), "still held at epoch 4"),
    (lambda e: e.remove(parts(t1={0}), 3), "held at epoch 4"),
    (lambda e: e.remove(parts(t1={0, 9}), 4), "held at epoch None"),
    (lambda e: e.update(None, member(UNREVOKED, 7, 7, parts(t3={0}), parts(t3={0}))), "still held"),
], ids=["a partition already held", "one of several already held", "removal at another epoch",
        "removal of a partition not held", "a partition both assigned and pending"])
def test_partition_epochs_refuse_a_second_owner_and_change_nothing_when_they_do(
        action: Callable[[PartitionEpochs], None], message: str) -> None:
    epochs = PartitionEpochs()
    epochs.add(parts(t1={0, 1}, t2={0}), 4)
    before = epochs.as_dict()
    with pytest.raises(IllegalStateError, match=message):
        action(epochs)
    assert epochs.as_dict() == before


# -- a randomized group: the assignor sets targets, every member reconciles over heartbeats ----------------------


@dataclass
class SimMember:
    subscription: frozenset[bytes]
    assignment: MemberAssignment
    owned: dict[bytes, frozenset[int]]  # what the client holds


class SimGroup:
    """A group as the coordinator keeps one, minus IO: membership changes move the group epoch and the target."""

    def __init__(self, assignor: str, partitions: dict[bytes, int]) -> None:
        self.assignor = ASSIGNORS[assignor]
        self.partitions = partitions
        self.members: dict[str, SimMember] = {}
        self.epochs = PartitionEpochs()
        self.group_epoch = 0
        self.targets: dict[str, Mapping[bytes, frozenset[int]]] = {}

    def recompute_target(self) -> None:
        self.group_epoch += 1
        specs = {m: MemberSubscriptionSpec(m, None, None, s.subscription, self.targets.get(m, {}))
                 for m, s in self.members.items()}
        self.targets = dict(self.assignor.assign(specs, self.partitions))

    def join(self, member_id: str, subscription: frozenset[bytes]) -> None:
        self.members[member_id] = SimMember(subscription, member(STABLE, 0, 0, {}), {})
        self.recompute_target()
        self.heartbeat(member_id, report=True, apply=True)

    def leave(self, member_id: str) -> None:
        self.epochs.update(self.members.pop(member_id).assignment, None)
        self.recompute_target()

    def heartbeat(self, member_id: str, report: bool, apply: bool) -> None:
        """The client reports what it owns (or not), the coordinator reconciles, the client applies the answer
        (gives up what is no longer assigned, takes what is) or is still busy with its previous one."""
        sim = self.members[member_id]
        current = sim.assignment
        if current.state is not STABLE or current.member_epoch != self.group_epoch:
            updated = reconcile(current, self.group_epoch, self.targets[member_id],
                                sim.owned if report else None, self.epochs)
            if updated != current:
                self.epochs.update(current, updated)  # raises if a partition would get two owners
                sim.assignment = updated
            assert sim.assignment.member_epoch <= self.group_epoch
        if apply:
            sim.owned = dict(sim.assignment.assigned)
        self.check_no_partition_is_owned_twice()

    def check_no_partition_is_owned_twice(self) -> None:
        clients: dict[tuple[bytes, int], str] = {}
        for member_id, sim in self.members.items():
            held = {(t, p) for h in (sim.assignment.assigned, sim.assignment.pending_revocation)
                    for t, ps in h.items() for p in ps}
            for t, ps in sim.owned.items():
                for p in ps:
                    assert (t, p) not in clients, f"{member_id} and {clients[(t, p)]} both own {t.hex()}-{p}"
                    assert (t, p) in held, "a client owns only what the coordinator has it hold"
                    clients[(t, p)] = member_id

    def converged(self) -> bool:
        return all(s.assignment.state is STABLE and s.assignment.member_epoch == self.group_epoch
                   and s.owned == normalised(self.targets[m]) for m, s in self.members.items())


@pytest.mark.parametrize("assignor", DEFAULT_ASSIGNORS)
@pytest.mark.parametrize("seed", range(15))
def test_members_joining_and_leaving_converge_without_a_partition_ever_owned_by_two(assignor: str,
                                                                                   seed: int) -> None:
    rng = random.Random(seed)
    topics = [T1, T2, T3]
    group = SimGroup(assignor, {T1: rng.randint(1, 8), T2: rng.randint(1, 8), T3: rng.randint(1, 4)})
    next_id = 0
    for _ in range(300):
        roll = rng.random()
        if roll < 0.08 or not group.members:
            group.join(f"m{next_id:02d}", frozenset(rng.sample(topics, rng.randint(1, 3))))
            next_id += 1
        elif roll < 0.13:
            group.leave(rng.choice(sorted(group.members)))
        elif roll < 0.15:  # a topic grows: the target moves with no membership change
            grown = rng.choice(topics)
            group.partitions[grown] += 1
            group.recompute_target()
        else:
            group.heartbeat(rng.choice(sorted(group.members)), report=rng.random() < 0.8, apply=rng.random() < 0.7)

    for _ in range(20):  # then everyone heartbeats and applies promptly
        if group.converged():
            break
        for member_id in sorted(group.members):
            group.heartbeat(member_id, report=True, apply=True)
    assert group.converged()
    assigned = [(t, p) for s in group.members.values() for t, ps in s.owned.items() for p in ps]
    assert len(assigned) == len(set(assigned))
