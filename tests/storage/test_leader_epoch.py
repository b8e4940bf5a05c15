"""LeaderEpochCache: the cases of Kafka's LeaderEpochFileCacheTest, ported, plus persistence."""

from __future__ import annotations

import pathlib

import pytest

from epoch_broker.storage.leader_epoch import (
    FILE_NAME,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochCache,
)

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
E = EpochEntry


@pytest.fixture
def cache(tmp_path: pathlib.Path) -> LeaderEpochCache:
    return LeaderEpochCache(str(tmp_path))


def with_entries(cache: LeaderEpochCache, *entries: tuple[int, int]) -> LeaderEpochCache:
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def test_an_assigned_epoch_and_its_start_offset_are_cached(cache: LeaderEpochCache) -> None:
    cache.assign(2, 10)
    assert cache.latest_epoch == 2
    assert cache.entries == [E(2, 10)]
    assert cache.end_offset_for(2, 11) == (2, 11)


def test_the_latest_epoch_ends_at_the_log_end_offset(cache: LeaderEpochCache) -> None:
    with_entries(cache, (2, 11), (2, 12))
    assert cache.end_offset_for(2, 14) == (2, 14)


def test_an_undefined_requested_epoch_gets_an_undefined_answer(cache: LeaderEpochCache) -> None:
    with_entries(cache, (2, 11), (3, 12))
    assert cache.end_offset_for(UNDEFINED_EPOCH, 0) == UNDEFINED


def test_an_epoch_start_offset_is_not_moved_forward_once_assigned(cache: LeaderEpochCache) -> None:
    with_entries(cache, (2, 9), (2, 10))
    assert cache.entries == [E(2, 9)]


def test_a_higher_epoch_at_the_same_start_offset_replaces_the_older_one(cache: LeaderEpochCache) -> None:
    with_entries(cache, (2, 9), (3, 9))
    assert cache.entries == [E(3, 9)]


def test_reassigning_an_epoch_at_a_later_offset_keeps_the_first_start(cache: LeaderEpochCache) -> None:
    with_entries(cache, (2, 6), (2, 10))
    assert cache.entries[0].start_offset == 6


def test_an_empty_cache_answers_undefined(cache: LeaderEpochCache) -> None:
    assert cache.end_offset_for(0, 0) == UNDEFINED
    assert cache.end_offset_for(UNDEFINED_EPOCH, 73) == UNDEFINED
    assert cache.end_offset_for(7, 0) == UNDEFINED
    assert cache.latest_epoch == UNDEFINED_EPOCH


def test_an_epoch_older_than_the_first_gets_the_first_start_offset(cache: LeaderEpochCache) -> None:
    with_entries(cache, (5, 11), (6, 12), (7, 13))
    assert cache.end_offset_for(4, 0) == (4, 11)


def test_the_same_epoch_at_an_earlier_offset_truncates_later_entries(cache: LeaderEpochCache) -> None:
    with_entries(cache, (5, 11), (6, 12), (7, 13), (7, 12))
    assert cache.entries == [E(5, 11), E(7, 12)]
    assert cache.end_offset_for(5, 0) == (5, 12)
    assert cache.end_offset_for(6, 0) == (5, 12)


def test_a_previous_epoch_ends_where_the_next_one_starts(cache: LeaderEpochCache) -> None:
    with_entries(cache, (1, 11), (1, 12), (2, 13), (2, 14), (3, 15), (3, 16))
    assert cache.end_offset_for(2, 17) == (2, 15)


def test_an_unknown_epoch_between_known_ones_answers_the_floor_epoch(cache: LeaderEpochCache) -> None:
    with_entries(cache, (0, 10), (2, 13), (4, 17))
    assert cache.end_offset_for(1, 0) == (0, 13)
    assert cache.end_offset_for(2, 0) == (2, 17)
    assert cache.end_offset_for(3, 0) == (2, 17)


def test_the_same_epoch_and_later_offset_adds_no_entry(cache: LeaderEpochCache) -> None:
    with_entries(cache, (2, 6), (2, 7))
    assert cache.entries == [E(2, 6)]


def test_an_epoch_newer_than_any_known_is_undefined(cache: LeaderEpochCache) -> None:
    cache.assign(2, 100)
    assert cache.end_offset_for(3, 100) == UNDEFINED


def test_epochs_need_not_start_from_zero(cache: LeaderEpochCache) -> None:
    cache.assign(2, 6)
    assert cache.end_offset_for(2, 7) == (2, 7)
    assert cache.entries == [E(2, 6)]


def test_epochs_persist_between_instances(tmp_path: pathlib.Path) -> None:
    LeaderEpochCache(str(tmp_path)).assign(2, 6)
    assert LeaderEpochCache(str(tmp_path)).entries == [E(2, 6)]
    assert (tmp_path / FILE_NAME).read_text() == "0\n1\n2 6\n"


def test_a_lower_epoch_assigned_later_removes_every_higher_epoch(cache: LeaderEpochCache) -> None:
    with_entries(cache, (1, 5), (2, 6), (1, 7))
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, 8) == (1, 8)
    assert cache.end_offset_for(2, 8) == UNDEFINED
    assert cache.entries == [E(1, 7)]


def test_a_higher_epoch_at_a_lower_offset_removes_entries_starting_later(cache: LeaderEpochCache) -> None:
    with_entries(cache, (2, 6), (3, 5))
    assert cache.entries == [E(3, 5)]


def test_epochs_are_tracked_as_leaders_change_many_times(cache: LeaderEpochCache) -> None:
    with_entries(cache, (0, 0), (1, 0))
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, 0) == (1, 0)
    # Epoch 0 was replaced (same start offset): older than the first known, it ends where 1 starts.
    assert cache.end_offset_for(0, 0) == (0, 0)
    assert cache.end_offset_for(1, 5) == (1, 5)
    cache.assign(2, 5)
    assert cache.end_offset_for(2, 10) == (2, 10)
    assert cache.end_offset_for(1, 10) == (1, 5)
    assert cache.end_offset_for(0, 10) == (0, 0)


def test_epochs_are_tracked_as_a_follower_receives_many_messages(cache: LeaderEpochCache) -> None:
    with_entries(cache, (0, 0), (0, 1), (0, 2))
    assert cache.end_offset_for(0, 3) == (0, 3)
    with_entries(cache, (1, 3), (1, 4), (1, 5))
    assert cache.end_offset_for(1, 6) == (1, 6)
    with_entries(cache, (2, 6), (2, 7), (2, 8))
    assert cache.latest_epoch == 2
    assert cache.end_offset_for(2, 9) == (2, 9)
    assert cache.end_offset_for(0, 9) == (0, 3)
    assert cache.end_offset_for(1, 9) == (1, 6)


THREE = ((2, 6), (3, 8), (4, 11))


def test_truncating_from_the_end_on_an_epoch_boundary_drops_that_epoch(cache: LeaderEpochCache) -> None:
    with_entries(cache, *THREE).truncate_from_end(8)
    assert cache.entries == [E(2, 6)]


def test_truncating_from_the_end_between_boundaries_keeps_the_epoch_holding_the_offset(
    cache: LeaderEpochCache,
) -> None:
    with_entries(cache, *THREE).truncate_from_end(9)
    assert cache.latest_epoch == 3
    assert cache.entries == [E(2, 6), E(3, 8)]


def test_truncating_from_the_start_on_a_boundary_keeps_the_epoch_starting_there(
    cache: LeaderEpochCache,
) -> None:
    with_entries(cache, *THREE).truncate_from_start(8)
    assert cache.entries == [E(3, 8), E(4, 11)]


def test_truncating_from_the_start_before_the_first_entry_changes_nothing(cache: LeaderEpochCache) -> None:
    with_entries(cache, *THREE).truncate_from_start(1)
    assert cache.entries == [E(2, 6), E(3, 8), E(4, 11)]


def test_truncating_from_the_start_at_the_first_offset_changes_nothing(cache: LeaderEpochCache) -> None:
    with_entries(cache, *THREE).truncate_from_start(6)
    assert cache.entries == [E(2, 6), E(3, 8), E(4, 11)]


def test_truncating_from_the_start_at_the_last_boundary_keeps_only_the_latest_epoch(
    cache: LeaderEpochCache,
) -> None:
    with_entries(cache, *THREE).truncate_from_start(11)
    assert cache.entries == [E(4, 11)]


def test_truncating_from_the_start_between_boundaries_moves_that_epoch_start_up(
    cache: LeaderEpochCache,
) -> None:
    with_entries(cache, *THREE).truncate_from_start(9)
    assert cache.entries == [E(3, 9), E(4, 11)]


def test_truncating_from_the_start_between_the_first_two_boundaries(cache: LeaderEpochCache) -> None:
    with_entries(cache, (0, 0), (1, 7), (2, 10)).truncate_from_start(5)
    assert cache.entries == [E(0, 5), E(1, 7), E(2, 10)]


def test_truncating_from_the_start_past_every_boundary_moves_the_latest_epoch_start(
    cache: LeaderEpochCache,
) -> None:
    with_entries(cache, *THREE).truncate_from_start(15)
    assert cache.entries == [E(4, 15)]


def test_clearing_removes_every_entry(cache: LeaderEpochCache) -> None:
    with_entries(cache, *THREE).clear()
    assert cache.entries == []


def test_an_undefined_offset_truncates_nothing_from_either_end(cache: LeaderEpochCache) -> None:
    with_entries(cache, *THREE)
    cache.truncate_from_start(UNDEFINED_EPOCH_OFFSET)
    cache.truncate_from_end(UNDEFINED_EPOCH_OFFSET)
    assert len(cache.entries) == 3


def test_truncating_an_empty_cache_from_either_end_is_harmless(cache: LeaderEpochCache) -> None:
    cache.truncate_from_start(7)
    cache.truncate_from_end(7)
    assert cache.entries == []


def test_each_offset_maps_to_the_epoch_that_wrote_it(cache: LeaderEpochCache) -> None:
    with_entries(cache, *THREE)
    assert [cache.epoch_for_offset(o) for o in (5, 6, 7, 8, 10, 11, 99)] == [-1, 2, 2, 3, 3, 4, 4]


def test_truncations_persist_between_instances(tmp_path: pathlib.Path) -> None:
    with_entries(LeaderEpochCache(str(tmp_path)), *THREE).truncate_from_end(9)
    reopened = LeaderEpochCache(str(tmp_path))
    assert reopened.entries == [E(2, 6), E(3, 8)]
    reopened.truncate_from_start(9)
    assert LeaderEpochCache(str(tmp_path)).entries == [E(3, 9)]


@pytest.mark.parametrize(
    "content",
    ["", "garbage", "0\n2\n1 5\n", "1\n1\n1 5\n", "0\n1\n1 x\n", "0\n2\n3 5\n2 6\n", "\xff"],
    ids=["empty", "garbage", "short", "bad-version", "bad-number", "not-increasing", "binary"],
)
def test_a_corrupt_checkpoint_loads_as_an_empty_cache_to_be_rebuilt(tmp_path: pathlib.Path, content: str) -> None:
    (tmp_path / FILE_NAME).write_text(content)
    cache = LeaderEpochCache(str(tmp_path))
    assert not cache.loaded_from_checkpoint
    assert cache.entries in ([], [E(3, 5)])


def test_negative_epochs_or_offsets_cannot_be_assigned(cache: LeaderEpochCache) -> None:
    with pytest.raises(ValueError):
        cache.assign(-1, 0)
    with pytest.raises(ValueError):
        cache.assign(0, -1)
