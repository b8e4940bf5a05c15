"""The driver's planning arithmetic of the `kafka-epoch` source, without a cluster: maxOffsetsPerTrigger's shares,
minPartitions' splitting, and the checkpoint's offset documents."""

from __future__ import annotations

from epoch_broker.spark.options import Position
from epoch_broker.spark.source import Range, split_ranges
from epoch_broker.spark.stream import offsets_from_json, offsets_to_json, prorate


def test_the_limit_is_shared_in_proportion_to_what_each_partition_has_waiting() -> None:
    starts = {("t", 0): 0, ("t", 1): 100, ("t", 2): 5}
    ends = {("t", 0): 300, ("t", 1): 200, ("t", 2): 6}
    assert prorate(starts, ends, 100) == {("t", 0): 74, ("t", 1): 124, ("t", 2): 6}  # 1 waiting: still read
    assert prorate(starts, ends, 1000) == ends


def test_min_partitions_halves_the_largest_range_and_keeps_the_outer_epochs() -> None:
    pieces = split_ranges([Range("t", 0, 0, 100, 3, 4), Range("t", 1, 0, 10, -1, 4)], 4)
    assert pieces == [Range("t", 0, 0, 25, 3, -1), Range("t", 0, 25, 50, -1, -1), Range("t", 0, 50, 100, -1, 4),
                      Range("t", 1, 0, 10, -1, 4)]
    assert split_ranges([Range("t", 0, 0, 1)], 8) == [Range("t", 0, 0, 1)]  # one record cannot be split


def test_offsets_go_through_json_with_string_partitions_and_read_from_only_where_given() -> None:
    positions = {("a", 0): Position(42, 3), ("a", 10): Position(0, -1)}
    document = offsets_to_json(positions, {("a", 10): Position(7, 2)})
    assert document == {"a": {"0": {"offset": 42, "leaderEpoch": 3},
                              "10": {"offset": 0, "leaderEpoch": -1, "readFrom": {"offset": 7, "leaderEpoch": 2}}}}
    assert offsets_from_json(document) == (positions, {("a", 10): Position(7, 2)})
