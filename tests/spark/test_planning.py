"""The driver's planning arithmetic of the `kafka-epoch` source, without a cluster: maxOffsetsPerTrigger's shares,
minPartitions' splitting, the checkpoint's offset documents, and minOffsetsPerTrigger / maxTriggerDelay (their
options, the read limit, when a trigger is skipped)."""

from __future__ import annotations

import re

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, ReadMinRows

from epoch_broker.spark import stream
from epoch_broker.spark.options import OptionError, Position, parse_source_options
from epoch_broker.spark.source import Range, split_ranges
from epoch_broker.spark.stream import StreamReader, offsets_from_json, offsets_to_json, prorate

REQUIRED = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}


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


@pytest.mark.parametrize(("given", "min_offsets", "max_offsets", "delay_ms"), [
    ({}, None, None, 15 * 60_000),  # the connector's default delay, parsed even without a minimum
    ({"minOffsetsPerTrigger": "100"}, 100, None, 15 * 60_000),
    ({"MINOFFSETSPERTRIGGER": "5", "maxOffsetsPerTrigger": "5"}, 5, 5, 15 * 60_000),  # equal is allowed
    ({"maxTriggerDelay": "500"}, None, None, 500),  # no unit: milliseconds
    ({"maxTriggerDelay": "500ms"}, None, None, 500),
    ({"maxTriggerDelay": " 30S "}, None, None, 30_000),
    ({"maxTriggerDelay": "2min"}, None, None, 120_000),
    ({"maxTriggerDelay": "2h"}, None, None, 7_200_000),
    ({"maxTriggerDelay": "1d"}, None, None, 86_400_000),
    ({"maxTriggerDelay": "1500us"}, None, None, 1),  # truncated to ms, as Utils.timeStringAsMs
    ({"maxTriggerDelay": "0"}, None, None, 0),
])
def test_min_offsets_per_trigger_and_max_trigger_delay_are_read_as_the_connector_reads_them(
        given: dict[str, str], min_offsets: int | None, max_offsets: int | None, delay_ms: int) -> None:
    options = parse_source_options({**REQUIRED, **given})
    assert (options.min_offsets_per_trigger, options.max_offsets_per_trigger, options.max_trigger_delay_ms) == (
        min_offsets, max_offsets, delay_ms)


@pytest.mark.parametrize(("given", "message"), [
    ({"minOffsetsPerTrigger": "0"}, "option minOffsetsPerTrigger must be a positive integer, not 0"),
    ({"minOffsetsPerTrigger": "many"}, "option minOffsetsPerTrigger: 'many' is not an integer"),
    ({"minOffsetsPerTrigger": "20", "maxOffsetsPerTrigger": "15"},
     "option minOffsetsPerTrigger (20) is higher than maxOffsetsPerTrigger (15)"),
    ({"maxTriggerDelay": "15 m"}, "option maxTriggerDelay must be a time like 500ms, 30s, 15m, 2h or 1d, not '15 m'"),
    ({"maxTriggerDelay": "1.5s"}, "option maxTriggerDelay must be a time like 500ms, 30s, 15m, 2h or 1d, not '1.5s'"),
    ({"maxTriggerDelay": "10w"}, "option maxTriggerDelay must be a time like 500ms, 30s, 15m, 2h or 1d, not '10w'"),
    ({"maxTriggerDelay": "-1s"}, "option maxTriggerDelay must be a time like 500ms, 30s, 15m, 2h or 1d, not '-1s'"),
    ({"maxTriggerDelay": ""}, "option maxTriggerDelay must be a time like 500ms, 30s, 15m, 2h or 1d, not ''"),
])
def test_a_bad_min_offsets_per_trigger_or_max_trigger_delay_is_one_line_naming_it(given: dict[str, str],
                                                                                 message: str) -> None:
    with pytest.raises(OptionError, match=f"^{re.escape(message)}$"):
        parse_source_options({**REQUIRED, **given})


@pytest.mark.parametrize(("given", "default", "available_now", "limits"), [
    ({}, ReadAllAvailable(), False, (None, None)),
    ({"maxOffsetsPerTrigger": "30"}, ReadMaxRows(30), False, (None, 30)),
    ({"minOffsetsPerTrigger": "10"}, ReadMinRows(10), False, (10, None)),
    # PySpark has no CompositeReadLimit: ReadMinRows stands for it, the max comes from the options
    ({"minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "30"}, ReadMinRows(10), False, (10, 30)),
    # Trigger.AvailableNow reads everything it saw at the start, capped but never held back
    ({"minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "30"}, ReadMinRows(10), True, (None, 30)),
])
def test_the_default_read_limit_and_the_limits_a_micro_batch_obeys(
        given: dict[str, str], default: ReadLimit, available_now: bool, limits: tuple[int | None, int | None]
        ) -> None:
    reader = StreamReader(parse_source_options({**REQUIRED, **given}))
    if available_now:
        reader._available_now = {}
    assert reader.getDefaultReadLimit() == default
    assert reader._limits(default) == limits
    assert reader._limits(ReadAllAvailable()) == (None, None)  # Trigger.Once


def test_a_trigger_is_skipped_below_the_minimum_until_the_delay_passes_since_the_last_one_let_through(
        monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(stream.time, "monotonic", lambda: now[0])
    reader = StreamReader(parse_source_options({**REQUIRED, "minOffsetsPerTrigger": "10", "maxTriggerDelay": "5s"}))
    froms = {("t", 0): Position(100, 0), ("t", 1): Position(0)}

    def skipped(at: float, waiting: tuple[int, int]) -> bool:
        now[0] = at
        return reader._delay_batch(10, froms, {("t", 0): 100 + waiting[0], ("t", 1): waiting[1]})

    steps = [  # (time, offsets waiting in each partition, skipped)
        (1000.0, (0, 0), False),  # the first trigger is let through (and starts the clock), as the connector's
        (1001.0, (4, 5), True),  # 9 in all: fewer than 10
        (1002.0, (5, 5), False),  # 10 across the partitions: runs, and restarts the clock
        (1003.0, (0, 3), True),
        (1006.9, (0, 3), True),  # 4.9 s since the last one let through
        (1007.0, (0, 3), False),  # 5 s: runs with what waits
        (1008.0, (0, 0), True),
        (1012.0, (0, 0), False),  # let through with nothing new (Spark runs no batch); the clock restarts
        (1013.0, (1, 0), True),
    ]
    assert [(at, waiting, skipped(at, waiting)) for at, waiting, _ in steps] == steps
