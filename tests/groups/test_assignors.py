"""The KIP-848 server-side assignors (`uniform`, `range`): pure, table-driven, no sockets."""

from __future__ import annotations

import random
from collections.abc import Mapping, Set

import pytest

from epoch_broker.broker.groups.assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNORS,
    MemberSubscriptionSpec,
)

T1, T2, T3, GONE = (bytes([i]) * 16 for i in (1, 2, 3, 9))

Result = dict[str, dict[bytes, frozenset[int]]]


def spec(member_id: str, topics: set[bytes], assignment: Mapping[bytes, Set[int]] | None = None,
         instance_id: str | None = None) -> MemberSubscriptionSpec:
    return MemberSubscriptionSpec(member_id=member_id, instance_id=instance_id, rack_id=None,
                                  subscribed_topic_ids=frozenset(topics),
                                  assignment={t: frozenset(p) for t, p in (assignment or {}).items()})


def group(subscriptions: Mapping[str, set[bytes]], previous: Result | None = None) -> dict[str, MemberSubscriptionSpec]:
    return {m: spec(m, topics, (previous or {}).get(m)) for m, topics in subscriptions.items()}


def count(assignment: Mapping[bytes, frozenset[int]]) -> int:
    return sum(len(p) for p in assignment.values())


def owners(result: Result) -> dict[tuple[bytes, int], list[str]]:
    held: dict[tuple[bytes, int], list[str]] = {}
    for member_id, assignment in result.items():
        for topic_id, partitions in assignment.items():
            for partition in partitions:
                held.setdefault((topic_id, partition), []).append(member_id)
    return held


def assert_valid(result: Result, members: Mapping[str, MemberSubscriptionSpec],
                 partitions_per_topic: Mapping[bytes, int]) -> None:
    """Every member has an entry; every partition of a subscribed, existing topic is held by exactly one of its
    subscribers; nothing else is held; no empty sets."""
    assert set(result) == set(members)
    subscribed = {t for s in members.values() for t in s.subscribed_topic_ids if t in partitions_per_topic}
    expected = {(t, p) for t in subscribed for p in range(partitions_per_topic[t])}
    held = owners(result)
    assert set(held) == expected
    for (topic_id, _), holders in held.items():
        assert len(holders) == 1
        assert topic_id in members[holders[0]].subscribed_topic_ids
    assert all(partitions for assignment in result.values() for partitions in assignment.values())


def test_the_default_assignors_are_uniform_then_range_as_kafka() -> None:
    assert DEFAULT_ASSIGNORS == ("uniform", "range")
    assert list(ASSIGNORS) == ["uniform", "range"]
    assert all(ASSIGNORS[name].name == name for name in ASSIGNORS)


@pytest.mark.parametrize("name", DEFAULT_ASSIGNORS)
def test_every_member_gets_an_entry_even_when_there_are_fewer_partitions_than_members(name: str) -> None:
    members = group({m: {T1} for m in "abcd"})
    result = ASSIGNORS[name].assign(members, {T1: 2})
    assert_valid(result, members, {T1: 2})
    assert sorted(count(a) for a in result.values()) == [0, 0, 1, 1]


@pytest.mark.parametrize("name", DEFAULT_ASSIGNORS)
def test_an_empty_group_gets_an_empty_assignment(name: str) -> None:
    assert ASSIGNORS[name].assign({}, {T1: 3}) == {}


@pytest.mark.parametrize("name", DEFAULT_ASSIGNORS)
def test_a_subscribed_topic_missing_from_the_metadata_is_ignored(name: str) -> None:
    members = {"a": spec("a", {T1, GONE}, {GONE: {0, 1}, T1: {0}}), "b": spec("b", {GONE})}
    result = ASSIGNORS[name].assign(members, {T1: 2})
    assert result == {"a": {T1: frozenset({0, 1})}, "b": {}}


@pytest.mark.parametrize(("members", "partitions", "sizes"), [
    (1, {T1: 5}, [5]),
    (2, {T1: 3, T2: 3}, [3, 3]),
    (3, {T1: 6}, [2, 2, 2]),
    (3, {T1: 7, T2: 1}, [2, 3, 3]),
    (4, {T1: 3, T2: 2, T3: 1}, [1, 1, 2, 2]),
    (5, {T1: 2}, [0, 0, 0, 1, 1]),
])
def test_uniform_balances_members_with_the_same_subscriptions(members: int, partitions: dict[bytes, int],
                                                              sizes: list[int]) -> None:
    specs = group({f"m{i}": set(partitions) for i in range(members)})
    result = ASSIGNORS["uniform"].assign(specs, partitions)
    assert_valid(result, specs, partitions)
    assert sorted(count(a) for a in result.values()) == sizes


def moved(before: Result, after: Result) -> int:
    """Partitions that changed holder (a partition nobody held before does not count)."""
    held_before = {tp: holders[0] for tp, holders in owners(before).items()}
    return sum(1 for tp, holders in owners(after).items() if tp in held_before and held_before[tp] != holders[0])


def test_uniform_keeps_every_partition_when_nothing_changed() -> None:
    partitions = {T1: 5, T2: 4}
    first = ASSIGNORS["uniform"].assign(group({m: {T1, T2} for m in "abc"}), partitions)
    again = ASSIGNORS["uniform"].assign(group({m: {T1, T2} for m in "abc"}, first), partitions)
    assert again == first


@pytest.mark.parametrize(("before", "joining", "partitions", "moves"), [
    (3, 1, {T1: 6}, 1),           # 2,2,2 -> 2,2,1 + 1
    (2, 1, {T1: 4, T2: 2}, 2),    # 3,3 -> 2,2 + 2
    (4, 4, {T1: 8}, 4),           # 2,2,2,2 -> 1,1,1,1 + 1,1,1,1
    (3, 1, {T1: 1, T2: 1}, 0),    # 1,1,0 -> 1,1,0 + 0: nobody gives up anything
])
def test_uniform_a_joining_member_takes_only_what_the_most_loaded_must_give_up(
        before: int, joining: int, partitions: dict[bytes, int], moves: int) -> None:
    topics = set(partitions)
    old_ids = [f"m{i}" for i in range(before)]
    old = ASSIGNORS["uniform"].assign(group(dict.fromkeys(old_ids, topics)), partitions)
    new_ids = old_ids + [f"n{i}" for i in range(joining)]
    new = ASSIGNORS["uniform"].assign(group(dict.fromkeys(new_ids, topics), old), partitions)
    assert_valid(new, group(dict.fromkeys(new_ids, topics)), partitions)
    sizes = sorted(count(a) for a in new.values())
    assert sizes[-1] - sizes[0] <= 1
    # Only what balance demands moves: the members above their new size give up the difference, nothing more.
    must_move = sum(max(0, count(old[m]) - count(new[m])) for m in old_ids)
    assert moved(old, new) == must_move == moves
    for m in old_ids:  # an old member only loses partitions, it never swaps one for another
        assert owners({m: new[m]}).keys() <= owners({m: old[m]}).keys()


def test_uniform_a_leaving_members_partitions_are_spread_and_the_others_keep_theirs() -> None:
    partitions = {T1: 6, T2: 6}
    old = ASSIGNORS["uniform"].assign(group({m: {T1, T2} for m in "abcd"}), partitions)
    new = ASSIGNORS["uniform"].assign(group({m: {T1, T2} for m in "abc"}, old), partitions)
    assert_valid(new, group({m: {T1, T2} for m in "abc"}), partitions)
    assert sorted(count(a) for a in new.values()) == [4, 4, 4]
    survivors = {m: old[m] for m in "abc"}
    assert moved(survivors, new) == 0  # every survivor keeps all it had and takes a share of d's three
    for m in "abc":
        assert owners({m: old[m]}).keys() <= owners({m: new[m]}).keys()


def test_uniform_a_previous_partition_of_an_unsubscribed_topic_is_given_to_a_subscriber() -> None:
    previous: Result = {"a": {T1: frozenset({0, 1}), T2: frozenset({0})}, "b": {T2: frozenset({1})}}
    members = group({"a": {T1}, "b": {T1, T2}}, previous)
    result = ASSIGNORS["uniform"].assign(members, {T1: 2, T2: 2})
    assert_valid(result, members, {T1: 2, T2: 2})
    assert result["a"] == {T1: frozenset({0, 1})}
    assert result["b"] == {T2: frozenset({0, 1})}


@pytest.mark.parametrize(("subscriptions", "partitions", "expected_sizes"), [
    # A topic only one member wants cannot be balanced away from it.
    ({"a": {T1}, "b": {T1, T2}}, {T1: 1, T2: 6}, {"a": 1, "b": 6}),
    # Overlapping subscriptions: each topic's subscribers end within one of each other, but not the group: a
    # chain move (c takes from b on T2, b from a on T1) would give 3,3,3. Kafka's builder stops here too (its
    # documented 9 / 10 / 11 example).
    ({"a": {T1}, "b": {T1, T2}, "c": {T2}}, {T1: 4, T2: 5}, {"a": 4, "b": 3, "c": 2}),
    ({"a": {T1}, "b": {T1, T2}, "c": {T2}}, {T1: 4, T2: 4}, {"a": 2, "b": 3, "c": 3}),
    # Two members with the same subscriptions next to one with a different one.
    ({"a": {T1, T2}, "b": {T1, T2}, "c": {T3}}, {T1: 3, T2: 4, T3: 2}, {"a": 4, "b": 3, "c": 2}),
    # A member subscribed to nothing that exists gets nothing.
    ({"a": {T1}, "b": {GONE}}, {T1: 2}, {"a": 2, "b": 0}),
])
def test_uniform_balances_heterogeneous_subscriptions_as_far_as_they_allow(
        subscriptions: dict[str, set[bytes]], partitions: dict[bytes, int], expected_sizes: dict[str, int]) -> None:
    members = group(subscriptions)
    result = ASSIGNORS["uniform"].assign(members, partitions)
    assert_valid(result, members, partitions)
    assert {m: count(a) for m, a in result.items()} == expected_sizes


def test_uniform_heterogeneous_join_moves_partitions_from_the_most_loaded_subscriber() -> None:
    partitions = {T1: 4, T2: 4}
    old = ASSIGNORS["uniform"].assign(group({"a": {T1}, "b": {T1, T2}}), partitions)
    assert {m: count(a) for m, a in old.items()} == {"a": 4, "b": 4}
    new = ASSIGNORS["uniform"].assign(group({"a": {T1}, "b": {T1, T2}, "c": {T2}}, old), partitions)
    assert_valid(new, group({"a": {T1}, "b": {T1, T2}, "c": {T2}}), partitions)
    # c takes half of T2 from b; b, now the least loaded of T1's subscribers, then takes one of T1 from a.
    assert {m: count(a) for m, a in new.items()} == {"a": 3, "b": 3, "c": 2}
    assert owners({"a": new["a"]}).keys() <= owners({"a": old["a"]}).keys()
    assert owners({"c": new["c"]}).keys() <= owners({"b": old["b"]}).keys()
    assert moved(old, new) == 3


@pytest.mark.parametrize("name", DEFAULT_ASSIGNORS)
def test_the_same_input_in_any_order_gives_the_same_assignment(name: str) -> None:
    rng = random.Random(7)
    partitions = {T1: 7, T2: 3, T3: 5}
    subscriptions = {f"m{i}": set(rng.sample([T1, T2, T3], rng.randint(1, 3))) for i in range(6)}
    previous = ASSIGNORS[name].assign(group(subscriptions), partitions)
    subscriptions["m6"] = {T1, T3}
    expected = ASSIGNORS[name].assign(group(subscriptions, previous), partitions)
    for _ in range(5):
        ids = list(subscriptions)
        rng.shuffle(ids)
        shuffled_members = {m: group(subscriptions, previous)[m] for m in ids}
        shuffled_partitions = dict(rng.sample(sorted(partitions.items()), len(partitions)))
        assert ASSIGNORS[name].assign(shuffled_members, shuffled_partitions) == expected


@pytest.mark.parametrize("seed", range(30))
def test_uniform_is_valid_and_balanced_among_members_with_the_same_subscriptions_for_random_groups(seed: int) -> None:
    rng = random.Random(seed)
    topics = [T1, T2, T3]
    partitions = {t: rng.randint(1, 9) for t in topics if rng.random() < 0.9} or {T1: 3}
    previous: Result = {}
    for _ in range(4):  # a few generations, each sticky on the previous
        subscriptions = {f"m{i}": set(rng.sample(topics, rng.randint(1, 3))) for i in range(rng.randint(1, 7))}
        members = group(subscriptions, previous)
        result = ASSIGNORS["uniform"].assign(members, partitions)
        assert_valid(result, members, partitions)
        by_subscription: dict[frozenset[bytes], list[int]] = {}
        for m, s in members.items():
            by_subscription.setdefault(s.subscribed_topic_ids, []).append(count(result[m]))
        for sizes in by_subscription.values():
            assert max(sizes) - min(sizes) <= 1
        previous = result


def test_range_gives_co_partitioned_ranges_when_subscriptions_and_partition_counts_match() -> None:
    members = group({"b": {T1, T2}, "a": {T1, T2}})
    result = ASSIGNORS["range"].assign(members, {T1: 3, T2: 3})
    assert result == {"a": {T1: frozenset({0, 1}), T2: frozenset({0, 1})},
                      "b": {T1: frozenset({2}), T2: frozenset({2})}}


def test_range_orders_static_members_by_instance_id_before_dynamic_members() -> None:
    members = {"m-new": spec("m-new", {T1}, instance_id="i1"), "m-old": spec("m-old", {T1}, instance_id="i0"),
               "a-dynamic": spec("a-dynamic", {T1})}
    result = ASSIGNORS["range"].assign(members, {T1: 5})
    assert result == {"m-old": {T1: frozenset({0, 1})}, "m-new": {T1: frozenset({2, 3})},
                      "a-dynamic": {T1: frozenset({4})}}


def test_range_gives_each_topic_to_its_own_subscribers_in_member_order() -> None:
    members = group({"a": {T1}, "b": {T1, T2}, "c": {T2}})
    result = ASSIGNORS["range"].assign(members, {T1: 3, T2: 4})
    assert_valid(result, members, {T1: 3, T2: 4})
    assert result == {"a": {T1: frozenset({0, 1})}, "b": {T1: frozenset({2}), T2: frozenset({0, 1})},
                      "c": {T2: frozenset({2, 3})}}


def test_range_follows_kafka_4_and_ignores_the_previous_assignment() -> None:
    previous: Result = {"a": {T1: frozenset({2})}, "b": {T1: frozenset({0, 1})}}
    assert ASSIGNORS["range"].assign(group({"a": {T1}, "b": {T1}}, previous), {T1: 3}) == {
        "a": {T1: frozenset({0, 1})}, "b": {T1: frozenset({2})}}
