"""The `kafka-epoch` source's options, named and read as Spark's Kafka connector (spark-sql-kafka-0-10) reads
them, so that a pipeline changes only the format name.

Rules:
- `kafka.bootstrap.servers` is required; exactly one of `subscribe` (comma list), `subscribePattern` (regex) or
  `assign` (JSON `{"topic": [0, 1]}`).
- `startingOffsets` / `endingOffsets`: `earliest`, `latest`, or JSON `{"topic": {"0": 42}}` (-2 earliest, -1
  latest); here a partition's value may also be `{"offset": 42, "leaderEpoch": 3}`. `endingOffsets` may not be
  `earliest` nor name -2, as the connector refuses.
- `startingTimestamp` (one timestamp in ms for every partition) or `startingOffsetsByTimestamp` (JSON
  `{"topic": {"0": ms}}`) win over `startingOffsets`, in that order, as in the connector: each partition starts
  at its first record with a timestamp at or after it. Where there is none, `startingOffsetsByTimestampStrategy`
  says: `error` (the default) or `latest`.
- A task fetches at most `kafka.max.partition.fetch.bytes` (1 MiB, the Java consumer's default) and decodes
  one fetch at a time: a worker's memory does not grow with the partition (50 MiB fetches made it).
- `kafka.isolation.level`: `read_uncommitted` (the default, as the connector's) or `read_committed` (reads end
  at the last stable offset and skip aborted transactions and markers, as a Kafka consumer's).
- `maxOffsetsPerTrigger` caps a micro-batch (shared between partitions in proportion to what each has waiting);
  `minPartitions` splits the largest ranges until there are at least that many Spark tasks.
- `minOffsetsPerTrigger` holds a micro-batch back until that many offsets wait in all, or `maxTriggerDelay` (a
  Spark time string, `15m` by default: an integer with `us`, `ms`, `s`, `m`/`min`, `h` or `d`, milliseconds
  without) has passed since the last batch; it may not exceed `maxOffsetsPerTrigger` (the connector's check).
- Option names are case-insensitive (Spark hands them over that way). A bad option raises OptionError with one
  line naming it, on the driver, before any task runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from epoch_broker.client.completed_fetch import READ_COMMITTED, READ_UNCOMMITTED

EARLIEST, LATEST = -2, -1
ISOLATION_LEVELS = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}
DEFAULT_MAX_TRIGGER_DELAY = "15m"  # the connector's
# Spark's time strings (JavaUtils.timeStringAs): the unit's length in microseconds
TIME_UNITS_US = {"us": 1, "ms": 1000, "s": 1000_000, "m": 60_000_000, "min": 60_000_000, "h": 3600_000_000,
                 "d": 86400_000_000}


class OptionError(ValueError):
    """An option the source cannot use; the message names it."""


@dataclass(frozen=True, slots=True)
class Position:
    """Where a read starts or ends in one partition: an offset (or EARLIEST/LATEST), and the leader epoch of
    the record before it when known (-1 if not)."""

    offset: int
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class SourceOptions:
    bootstrap: str
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: tuple[tuple[str, int], ...] = ()
    starting: Mapping[tuple[str, int], Position] | int = EARLIEST  # EARLIEST, LATEST, or per partition
    ending: Mapping[tuple[str, int], Position] | int = LATEST
    starting_timestamps: Mapping[tuple[str, int], int] | int | None = None  # one for all, or per partition
    latest_when_no_timestamp: bool = False
    include_headers: bool = False
    fail_on_data_loss: bool = True
    request_timeout_s: float = 30.0
    api_timeout_s: float = 60.0
    fetch_max_bytes: int = 50 << 20
    max_partition_fetch_bytes: int = 1 << 20  # the Java consumer's default: a task holds about this much at once
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000  # how long minOffsetsPerTrigger may hold a micro-batch back
    min_partitions: int | None = None
    isolation_level: int = READ_UNCOMMITTED  # of every Fetch and ListOffsets: READ_COMMITTED bounds by the LSO

    def wants(self, topic: str) -> bool:
        """Whether a topic of the cluster is read (subscribe or subscribePattern)."""
        if self.subscribe_pattern is not None:
            return re.fullmatch(self.subscribe_pattern, topic) is not None
        return topic in self.subscribe

    def partitions_in(self, found: Mapping[str, Mapping[int, object]]) -> list[tuple[str, int]]:
        """The partitions read, of those the cluster has (`assign` names them; otherwise every partition of the
        topics subscribed to)."""
        if self.assign:
            return [tp for tp in self.assign if tp[1] in found.get(tp[0], {})]
        return sorted((topic, p) for topic, partitions in found.items() if self.wants(topic) for p in partitions)


def parse_source_options(raw: Mapping[str, str]) -> SourceOptions:
    options = {key.lower(): value for key, value in raw.items()}
    bootstrap = options.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise OptionError("option kafka.bootstrap.servers is required")
    chosen = [name for name in ("subscribe", "subscribepattern", "assign") if options.get(name)]
    if len(chosen) != 1:
        raise OptionError("give exactly one of the options subscribe, subscribePattern, assign "
                          f"(got {', '.join(chosen) or 'none'})")
    subscribe: tuple[str, ...] = ()
    pattern = None
    assign: tuple[tuple[str, int], ...] = ()
    if chosen[0] == "subscribe":
        subscribe = tuple(t.strip() for t in options["subscribe"].split(",") if t.strip())
    elif chosen[0] == "subscribepattern":
        pattern = options["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as exc:
            raise OptionError(f"option subscribePattern is not a regular expression: {exc}") from exc
    else:
        parsed = _json("assign", options["assign"])
        if not isinstance(parsed, dict) or not all(isinstance(v, list) for v in parsed.values()):
            raise OptionError('option assign must be JSON like {"topic": [0, 1]}')
        assign = tuple((topic, _int("assign", p)) for topic, partitions in parsed.items() for p in partitions)
    starting = _positions("startingOffsets", options.get("startingoffsets", "earliest"))
    ending = _positions("endingOffsets", options.get("endingoffsets", "latest"))
    if ending == EARLIEST or (isinstance(ending, Mapping) and any(p.offset == EARLIEST for p in ending.values())):
        raise OptionError("option endingOffsets cannot be earliest")
    starting_timestamps: Mapping[tuple[str, int], int] | int | None = None
    if "startingtimestamp" in options:
        starting_timestamps = _int("startingTimestamp", options["startingtimestamp"])
    elif "startingoffsetsbytimestamp" in options:
        starting_timestamps = {tp: position.offset for tp, position in _per_partition(
            "startingOffsetsByTimestamp", options["startingoffsetsbytimestamp"]).items()}
    strategy = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(f"option startingOffsetsByTimestampStrategy must be error or latest, not {strategy!r}")
    isolation = options.get("kafka.isolation.level", "read_uncommitted")
    if isolation.strip().lower() not in ISOLATION_LEVELS:
        raise OptionError("option kafka.isolation.level must be read_uncommitted or read_committed, "
                          f"not {isolation!r}")
    max_offsets = _optional_positive("maxOffsetsPerTrigger", options.get("maxoffsetspertrigger"))
    min_offsets = _optional_positive("minOffsetsPerTrigger", options.get("minoffsetspertrigger"))
    if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
        raise OptionError(f"option minOffsetsPerTrigger ({min_offsets}) is higher than maxOffsetsPerTrigger "
                          f"({max_offsets})")
    return SourceOptions(
        bootstrap=bootstrap, subscribe=subscribe, subscribe_pattern=pattern, assign=assign, starting=starting,
        ending=ending, starting_timestamps=starting_timestamps, latest_when_no_timestamp=strategy == "latest",
        include_headers=_bool("includeHeaders", options.get("includeheaders", "false")),
        fail_on_data_loss=_bool("failOnDataLoss", options.get("failondataloss", "true")),
        request_timeout_s=_positive("kafka.request.timeout.ms",
                                    options.get("kafka.request.timeout.ms", "30000")) / 1000,
        api_timeout_s=_positive("kafka.default.api.timeout.ms",
                                options.get("kafka.default.api.timeout.ms", "60000")) / 1000,
        fetch_max_bytes=_positive("kafka.fetch.max.bytes", options.get("kafka.fetch.max.bytes", str(50 << 20))),
        max_partition_fetch_bytes=_positive("kafka.max.partition.fetch.bytes",
                                            options.get("kafka.max.partition.fetch.bytes", str(1 << 20))),
        max_offsets_per_trigger=max_offsets, min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=_time_ms("maxTriggerDelay", options.get("maxtriggerdelay", DEFAULT_MAX_TRIGGER_DELAY)),
        min_partitions=_optional_positive("minPartitions", options.get("minpartitions")),
        isolation_level=ISOLATION_LEVELS[isolation.strip().lower()])


def _json(name: str, text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option {name} is not valid JSON: {exc}") from exc


def _int(name: str, value: object) -> int:
    if isinstance(value, bool):
        raise OptionError(f"option {name}: {value!r} is not an integer")
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError) as exc:
        raise OptionError(f"option {name}: {value!r} is not an integer") from exc


def _positive(name: str, value: object) -> int:
    number = _int(name, value)
    if number <= 0:
        raise OptionError(f"option {name} must be a positive integer, not {number}")
    return number


def _optional_positive(name: str, value: str | None) -> int | None:
    return None if value is None else _positive(name, value)


def _time_ms(name: str, text: str) -> int:
    """A Spark time string in milliseconds (Utils.timeStringAsMs: `500ms`, `30s`, `15m`; a bare integer is in
    ms; a finer unit is truncated); a negative one is refused here."""
    if (match := re.fullmatch(r"([0-9]+)([a-z]+)?", text.strip().lower())) is None or (
            match[2] is not None and match[2] not in TIME_UNITS_US):
        raise OptionError(f"option {name} must be a time like 500ms, 30s, 15m, 2h or 1d, not {text!r}")
    return int(match[1]) * TIME_UNITS_US[match[2] or "ms"] // 1000


def _bool(name: str, text: str) -> bool:
    if text.strip().lower() not in ("true", "false"):
        raise OptionError(f"option {name} must be true or false, not {text!r}")
    return text.strip().lower() == "true"


def _positions(name: str, text: str) -> Mapping[tuple[str, int], Position] | int:
    if text.strip().lower() == "earliest":
        return EARLIEST
    if text.strip().lower() == "latest":
        return LATEST
    return _per_partition(name, text)


def _per_partition(name: str, text: str) -> dict[tuple[str, int], Position]:
    parsed = _json(name, text)
    if not isinstance(parsed, dict):
        raise OptionError(f'option {name} must be JSON like {{"topic": {{"0": 42}}}}')
    positions: dict[tuple[str, int], Position] = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise OptionError(f'option {name}: topic {topic!r} needs {{"partition": offset}}')
        for partition, value in partitions.items():
            if isinstance(value, dict):
                position = Position(_int(name, value.get("offset")), _int(name, value.get("leaderEpoch", -1)))
            else:
                position = Position(_int(name, value))
            positions[(topic, _int(name, partition))] = position
    return positions
