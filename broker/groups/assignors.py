"""Server-side partition assignors of KIP-848 consumer groups: `uniform` (the default) and `range`.

An assignor maps every member of a group to a target assignment (topic id -> partitions) from the members'
subscriptions (topic ids) and the partition count of each subscribed topic. It is pure: the same input gives the same
output, whatever the order of the mappings it is given, because every iteration is over sorted member ids and
sorted topic ids (where Kafka's order comes from hashing).

Rules shared by both:
- Every member gets an entry, possibly empty; an assignment never holds a topic with no partitions.
- A subscribed topic missing from `partitions_per_topic` (deleted, or not created yet) is ignored, where Kafka throws
  PartitionAssignorException: the group coordinator only passes topics it knows, so a missing one is a race with a
  deletion and the right answer is "nothing of it".

`uniform` (Kafka's UniformAssignor) prioritises balance, then stickiness:
- Homogeneous group (every member subscribed to the same existing topics), as UniformHomogeneousAssignmentBuilder:
  P partitions over M members give each member P // M, and P % M members one more. A member keeps the partitions of
  its previous target assignment (`MemberSubscriptionSpec.assignment`) up to its quota; the rest, with the partitions
  nobody holds, fill the members under their quota, in member id order. So a joining member takes partitions only
  from the members above the new quota, and a leaving member's partitions are spread over the others. One
  departure from Kafka: the P % M larger quotas go to the members already holding the most partitions (ties by
  member id) instead of to the first members of a hash order, so no partition moves only because of that order.
- Heterogeneous group, as UniformHeterogeneousAssignmentBuilder: previous partitions of topics a member still
  subscribes to are kept; the free partitions are given, topic by topic (most partitions per subscriber first, then
  fewest subscribers, then topic id), each to the least loaded subscriber of its topic (fewest partitions, then member
  id); then, for up to 16 passes over the topics with two or more subscribers, a topic's highest partition moves from
  its most loaded holder to its least loaded subscriber while their counts differ by more than one. As in Kafka this
  balances every topic's subscribers to within one partition, which is as balanced as subscriptions allow in most
  patterns but not all (Kafka's own example: overlapping subscriptions can end 9 / 10 / 11).
- Skipped: rack awareness (Kafka prefers partitions with a replica on the member's rack); `rack_id` is carried but
  not used.

`range` (Kafka 4.0's RangeAssignor, rewritten by KAFKA-16944): per topic, its subscribers are ordered (static members
by instance id first, then the others by member id) and given contiguous ranges, the first `partitions %
subscribers` of them one partition more. When every member subscribes to the same topics and the topics have the
same partition count, member i gets the same partition numbers of every topic (co-partitioning, for joins). The
4.0 rewrite dropped the stickiness of the earlier server-side range assignor (3.7-3.8 kept a member's previous
partitions within its quota): its only stickiness is the order, so a static member that restarts with a new member id
keeps its ranges. This module follows 4.0; `MemberSubscriptionSpec.assignment` is not read by `range`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

Assignment = Mapping[bytes, frozenset[int]]  # topic id -> partitions

# Kafka's bound on the heterogeneous balancing passes: each pass roughly halves the imbalance.
MAX_BALANCE_ITERATIONS = 16


@dataclass(frozen=True, slots=True)
class MemberSubscriptionSpec:
    """What an assignor knows of one member (Kafka's MemberSubscriptionAndAssignmentImpl)."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    subscribed_topic_ids: frozenset[bytes]
    assignment: Assignment  # the member's current target assignment, the base of stickiness


class PartitionAssignor(Protocol):
    name: str

    def assign(self, members: Mapping[str, MemberSubscriptionSpec],
               partitions_per_topic: Mapping[bytes, int]) -> dict[str, dict[bytes, frozenset[int]]]: ...


TopicPartition = tuple[bytes, int]


def _subscriptions(members: Mapping[str, MemberSubscriptionSpec],
                   partitions_per_topic: Mapping[bytes, int]) -> dict[str, frozenset[bytes]]:
    """Each member's subscribed topics that exist with at least one partition."""
    return {member_id: frozenset(t for t in spec.subscribed_topic_ids if partitions_per_topic.get(t, 0) > 0)
            for member_id, spec in members.items()}


def _retained(member_ids: list[str], members: Mapping[str, MemberSubscriptionSpec],
              subscriptions: Mapping[str, frozenset[bytes]],
              partitions_per_topic: Mapping[bytes, int]) -> dict[str, list[TopicPartition]]:
    """The previous target partitions each member may keep: of a topic it still subscribes to, still existing, and
    not claimed by a member earlier in id order (a consistent target never has such a duplicate; it is dropped
    rather than given twice)."""
    claimed: set[TopicPartition] = set()
    retained: dict[str, list[TopicPartition]] = {}
    for member_id in member_ids:
        kept: list[TopicPartition] = []
        previous = members[member_id].assignment
        for topic_id in sorted(previous):
            if topic_id not in subscriptions[member_id]:
                continue
            for partition in sorted(previous[topic_id]):
                tp = (topic_id, partition)
                if 0 <= partition < partitions_per_topic[topic_id] and tp not in claimed:
                    claimed.add(tp)
                    kept.append(tp)
        retained[member_id] = kept
    return retained


def _as_assignment(partitions: list[TopicPartition]) -> dict[bytes, frozenset[int]]:
    by_topic: dict[bytes, set[int]] = {}
    for topic_id, partition in partitions:
        by_topic.setdefault(topic_id, set()).add(partition)
    return {topic_id: frozenset(by_topic[topic_id]) for topic_id in sorted(by_topic)}


class UniformAssignor:
    """Balanced and sticky; see the module docstring."""

    name = "uniform"

    def assign(self, members: Mapping[str, MemberSubscriptionSpec],
               partitions_per_topic: Mapping[bytes, int]) -> dict[str, dict[bytes, frozenset[int]]]:
        member_ids = sorted(members)
        if not member_ids:
            return {}
        subscriptions = _subscriptions(members, partitions_per_topic)
        retained = _retained(member_ids, members, subscriptions, partitions_per_topic)
        if len(set(subscriptions.values())) == 1:
            owned = self._homogeneous(member_ids, subscriptions[member_ids[0]], partitions_per_topic, retained)
        else:
            owned = self._heterogeneous(member_ids, subscriptions, partitions_per_topic, retained)
        return {member_id: _as_assignment(owned[member_id]) for member_id in member_ids}

    @staticmethod
    def _homogeneous(member_ids: list[str], topic_ids: frozenset[bytes], partitions_per_topic: Mapping[bytes, int],
                     retained: dict[str, list[TopicPartition]]) -> dict[str, list[TopicPartition]]:
        total = sum(partitions_per_topic[t] for t in topic_ids)
        minimum_quota, extra = divmod(total, len(member_ids))
        # The larger quotas go to the members holding the most, so balance costs the fewest moves.
        by_load = sorted(member_ids, key=lambda m: (-len(retained[m]), m))
        quota = {m: minimum_quota + (1 if i < extra else 0) for i, m in enumerate(by_load)}
        owned = {m: retained[m][:quota[m]] for m in member_ids}
        held = {tp for partitions in owned.values() for tp in partitions}
        unassigned = [(t, p) for t in sorted(topic_ids) for p in range(partitions_per_topic[t]) if (t, p) not in held]
        next_free = 0
        for member_id in member_ids:
            room = quota[member_id] - len(owned[member_id])
            owned[member_id] += unassigned[next_free:next_free + room]
            next_free += room
        assert next_free >= len(unassigned), "quotas sum to the partition count"
        return owned

    @staticmethod
    def _heterogeneous(member_ids: list[str], subscriptions: Mapping[str, frozenset[bytes]],
                       partitions_per_topic: Mapping[bytes, int],
                       retained: dict[str, list[TopicPartition]]) -> dict[str, list[TopicPartition]]:
        index = {m: i for i, m in enumerate(member_ids)}
        subscribers: dict[bytes, list[str]] = {}
        for member_id in member_ids:
            for topic_id in subscriptions[member_id]:
                subscribers.setdefault(topic_id, []).append(member_id)
        owner: dict[TopicPartition, str] = {tp: m for m in member_ids for tp in retained[m]}
        size = {m: len(retained[m]) for m in member_ids}

        def topic_order(topic_id: bytes) -> tuple[Fraction, int, bytes]:
            count = len(subscribers[topic_id])
            return -Fraction(partitions_per_topic[topic_id], count), count, topic_id

        def least_loaded(topic_id: bytes) -> str:
            return min(subscribers[topic_id], key=lambda m: (size[m], index[m]))

        topics = sorted(subscribers, key=topic_order)
        # Free partitions, topic by topic, each to the least loaded subscriber.
        for topic_id in topics:
            for partition in range(partitions_per_topic[topic_id]):
                if (topic_id, partition) not in owner:
                    member_id = least_loaded(topic_id)
                    owner[(topic_id, partition)] = member_id
                    size[member_id] += 1

        # Balance: move a topic's partitions from its most loaded holder to its least loaded subscriber.
        movable = [t for t in topics if len(subscribers[t]) >= 2]
        last_moved: int | None = None
        for _ in range(MAX_BALANCE_ITERATIONS):
            for i, topic_id in enumerate(movable):
                if i == last_moved:
                    return _owned_by_member(member_ids, owner)  # a whole pass without a move
                if UniformAssignor._balance_topic(topic_id, partitions_per_topic[topic_id], subscribers[topic_id],
                                                  owner, size, index) or last_moved is None:
                    last_moved = i
        return _owned_by_member(member_ids, owner)

    @staticmethod
    def _balance_topic(topic_id: bytes, partition_count: int, subscribers: list[str],
                       owner: dict[TopicPartition, str], size: dict[str, int], index: dict[str, int]) -> int:
        holdings: dict[str, list[int]] = {m: [] for m in subscribers}
        for partition in range(partition_count):
            holdings[owner[(topic_id, partition)]].append(partition)
        moved = 0
        while True:
            givers = [m for m in subscribers if holdings[m]]
            most = max(givers, key=lambda m: (size[m], index[m]))
            least = min(subscribers, key=lambda m: (size[m], index[m]))
            if size[most] - size[least] <= 1:
                return moved
            # The giver's highest partition of the topic, as Kafka picks the end of the giver's range.
            partition = holdings[most].pop()
            holdings[least].append(partition)
            holdings[least].sort()
            owner[(topic_id, partition)] = least
            size[most] -= 1
            size[least] += 1
            moved += 1


def _owned_by_member(member_ids: list[str], owner: Mapping[TopicPartition, str]) -> dict[str, list[TopicPartition]]:
    owned: dict[str, list[TopicPartition]] = {m: [] for m in member_ids}
    for tp in sorted(owner):
        owned[owner[tp]].append(tp)
    return owned


class RangeAssignor:
    """Contiguous, co-partitioned ranges per topic; see the module docstring."""

    name = "range"

    def assign(self, members: Mapping[str, MemberSubscriptionSpec],
               partitions_per_topic: Mapping[bytes, int]) -> dict[str, dict[bytes, frozenset[int]]]:
        subscriptions = _subscriptions(members, partitions_per_topic)

        # Static members first, by instance id, so a restarted static member (new member id) keeps its ranges.
        def order(member_id: str) -> tuple[int, str, str]:
            instance_id = members[member_id].instance_id
            return (0, instance_id, member_id) if instance_id is not None else (1, "", member_id)

        ordered = sorted(members, key=order)
        result: dict[str, dict[bytes, frozenset[int]]] = {member_id: {} for member_id in ordered}
        for topic_id in sorted({t for topics in subscriptions.values() for t in topics}):
            subscribers = [m for m in ordered if topic_id in subscriptions[m]]
            quota, extra = divmod(partitions_per_topic[topic_id], len(subscribers))
            start = 0
            for i, member_id in enumerate(subscribers):
                end = start + quota + (1 if i < extra else 0)
                if end > start:
                    result[member_id][topic_id] = frozenset(range(start, end))
                start = end
        return {member_id: dict(sorted(result[member_id].items())) for member_id in sorted(result)}


ASSIGNORS: dict[str, PartitionAssignor] = {"uniform": UniformAssignor(), "range": RangeAssignor()}
DEFAULT_ASSIGNORS = ("uniform", "range")  # Kafka's group.consumer.assignors default; the first is the default
