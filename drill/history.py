"""The history of a drill: what every client observed, one JSON object a line. `epoch-broker drill check`
(drill/checker.py) reads it; anyone's own clients may write it.

A history directory holds one or more `*.jsonl` files, one per client (any names). Every line is one JSON
object, an *event*. Common fields:

    time      float   Unix seconds, wall clock, when the client observed it
    client    string  who observed it: "producer-0", "consumer-1", "reader", "poller", "nemesis"
    op        string  one of the ops below

The fields of each op (`int|null` may be null; every field is required):

    send        a producer sends one record
                topic: str, partition: int, value: str, acks: "all" | "1"
                `value` is unique per topic-partition over the whole drill ("p0-17"): it names the record.
                optional: leader_epoch: int, the CurrentLeaderEpoch the Produce carried (KIP-359; -1 = none),
                broker: int, the broker it was sent to, probe: str, what kind of probe it was,
                txn: int, the transaction of this client that it was sent in (see `txn`)
    ack         the outcome of that send
                topic: str, partition: int, value: str, offset: int|null, error: str|null, acks: "all" | "1"
                error null = acknowledged at `offset`; error text = not acknowledged (the record may still
                be in the log); no ack event at all = outcome unknown (the client died or gave up waiting).
                A record sent in a transaction is acknowledged when its transaction commits (error null) and
                refused when it aborts (error "transaction aborted"), not when its Produce is answered.
    read        a consumer returned a record
                topic: str, partition: int, offset: int, value: str, leader_epoch: int (-1 = unknown)
                The checker's final reader (client "reader" unless told otherwise) reads every partition
                from its start to its high watermark after the faults are healed: it is the final log.
                optional: isolation: "read_committed" | "read_uncommitted", the consumer's isolation level
    truncation  a consumer's client reported a log truncation (KIP-320) and resumed
                topic: str, partition: int, offset: int (the divergence point, where it resumed),
                detail: str|null
    metadata    a poller's Metadata answer from one broker about one partition
                broker: int, topic: str, partition: int, leader: int, leader_epoch: int
    latest      a poller's ListOffsets LATEST answer from the partition's leader
                broker: int, topic: str, partition: int, offset: int|null, error: str|null
                (only answers with error null count)
    txn         a transactional producer's transaction ended
                txn: int (numbered by the client, counting up), outcome: "commit" | "abort" | "unknown",
                error: str|null (why it aborted or why its outcome is unknown)
                The sends carrying `txn` are its records: a read_committed consumer reads all of them once
                (commit), none (abort), or all or none (unknown: the producer gave up, the coordinator decides).
    fault       the nemesis applied (phase "start") or healed (phase "end") a fault
                fault: str, target: str ("broker-1"), phase: "start" | "end", detail: str|null
    member      a consumer-group member's life: started (phase "start", before it subscribes) or gone (phase
                "end", once its client closed, or when it was killed: it is not live after that)
                group: str, phase: "start" | "end", instance: str|null (its group.instance.id: a static member),
                protocol: str (its group.protocol: "classic" | "consumer")
                One client name is one member over restarts (a static member's new instance continues it).
    assigned    a group member's client gave it partitions (its on_assign rebalance callback), before it
                polls them: it holds each from now until a `revoked` of it or its `member` end
                topic: str, partitions: [int] (eager protocols: its whole new assignment; incremental ones,
                cooperative and KIP-848's: the partitions added)
    revoked     a group member's client took partitions from it (on_revoke; on_lost: taken without a chance to
                commit, the member fenced or its session lost)
                topic: str, partitions: [int], how: "revoke" | "lost"
    share_group a share group's configs, set before its members start (KIP-932), and a topic it reads
                group: str, topic: str, delivery_count_limit: int, record_lock_duration_ms: int
    share_member a share group member's life: started (phase "start") or gone (phase "end": closed, or killed,
                recorded before the kill: its session ends no later than this)
                group: str, member: str (the client name it records under), phase: "start" | "end",
                detail: str|null (how it ended)
    share_acquire a share consumer's poll returned a record it acquired (its acquisition lock is its own)
                group: str, topic: str, partition: int, offset: int, value: str,
                delivery_count: int (as its client reports it, -1 = unknown), leader_epoch: int (-1 = unknown)
    share_ack   the outcome of a share consumer's acknowledgement of one record (its client's commit callback)
                group: str, topic: str, partition: int, offset: int, ack: "accept" | "release" | "reject",
                error: str|null (null: the broker answered it without error; without an outcome, no event)
                optional: sent: float, when the acknowledgement was sent (the commit that carried it began)
    replica_log (optional, after healing) one replica's log of one partition
                broker: int, topic: str, partition: int, high_watermark: int,
                batches: [[base_offset, last_offset, leader_epoch, crc], ...],
                epoch_checkpoint: [[epoch, start_offset], ...]

Example lines:

    {"time":1714550000.12,"client":"p-0","op":"send","topic":"t","partition":0,"value":"p0-17","acks":"all"}
    {"time":1714550003.4,"client":"c-1","op":"truncation","topic":"t","partition":0,"offset":15,"detail":null}
    {"time":1714550004.0,"client":"member-1","op":"assigned","topic":"t","partitions":[0,3]}

Rules:
- One line per event, flushed as it is written: a drill that crashes keeps everything recorded up to the crash.
- One file per writer, opened for appending: clients never interleave within a file, and a client started
  again continues its own file. A writer is shared by threads under a lock, so lines never tear.
- Every event is checked against the table above when written and when read (ops, field names, JSON types,
  the two enumerations), and a bad line is named by file and line number: a verdict on a half-understood
  history would be worse than none.
- Ops not in the table, and extra fields, are kept: a user's clients may record more than the checker reads.
- Events are sorted by time, stably (files by name, lines in file order), so one client's events with equal
  times keep the order it wrote them in.
"""

from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

Event = dict[str, Any]

_STR: tuple[type, ...] = (str,)
_INT: tuple[type, ...] = (int,)
_NULL: tuple[type, ...] = (type(None),)
_LIST: tuple[type, ...] = (list,)
_RECORD = {"topic": _STR, "partition": _INT}
# op -> field -> the JSON types it may hold; the table of the module docstring, once.
OPS: dict[str, dict[str, tuple[type, ...]]] = {
    "send": {**_RECORD, "value": _STR, "acks": _STR},
    "ack": {**_RECORD, "value": _STR, "offset": _INT + _NULL, "error": _STR + _NULL, "acks": _STR},
    "read": {**_RECORD, "offset": _INT, "value": _STR, "leader_epoch": _INT},
    "truncation": {**_RECORD, "offset": _INT, "detail": _STR + _NULL},
    "metadata": {"broker": _INT, **_RECORD, "leader": _INT, "leader_epoch": _INT},
    "latest": {"broker": _INT, **_RECORD, "offset": _INT + _NULL, "error": _STR + _NULL},
    "txn": {"txn": _INT, "outcome": _STR, "error": _STR + _NULL},
    "fault": {"fault": _STR, "target": _STR, "phase": _STR, "detail": _STR + _NULL},
    "replica_log": {"broker": _INT, **_RECORD, "high_watermark": _INT, "batches": _LIST,
                    "epoch_checkpoint": _LIST},
    "member": {"group": _STR, "phase": _STR, "instance": _STR + _NULL, "protocol": _STR},
    "assigned": {"topic": _STR, "partitions": _LIST},
    "revoked": {"topic": _STR, "partitions": _LIST, "how": _STR},
    "share_group": {"group": _STR, "topic": _STR, "delivery_count_limit": _INT, "record_lock_duration_ms": _INT},
    "share_member": {"group": _STR, "member": _STR, "phase": _STR, "detail": _STR + _NULL},
    "share_acquire": {"group": _STR, **_RECORD, "offset": _INT, "value": _STR, "delivery_count": _INT,
                      "leader_epoch": _INT},
    "share_ack": {"group": _STR, **_RECORD, "offset": _INT, "ack": _STR, "error": _STR + _NULL},
}
# op -> optional field -> its JSON types, checked when present
OPTIONAL: dict[str, dict[str, tuple[type, ...]]] = {
    "send": {"leader_epoch": _INT, "broker": _INT, "probe": _STR, "txn": _INT},
    "read": {"isolation": _STR},
    "share_ack": {"sent": (int, float)},
}
CHOICES: dict[str, tuple[str, ...]] = {"acks": ("all", "1"), "phase": ("start", "end"),
                                       "outcome": ("commit", "abort", "unknown"),
                                       "isolation": ("read_committed", "read_uncommitted"),
                                       "how": ("revoke", "lost"), "ack": ("accept", "release", "reject")}
# list fields hold lists of ints of this length
TUPLE_SIZES: dict[str, int] = {"batches": 4, "epoch_checkpoint": 2}
INT_LISTS = ("partitions",)  # list fields holding ints
STAMPED = ("time", "client", "op")


class HistoryError(ValueError):
    """A history that cannot be read: the message names the directory, or the file and line."""


def validate(event: Any) -> None:
    """Raise ValueError naming the first thing in `event` that the format does not allow."""
    if not isinstance(event, dict):
        raise ValueError(f"an event is a JSON object, not {type(event).__name__}")
    for name, types in (("time", (int, float)), ("client", _STR), ("op", _STR)):
        if name not in event:
            raise ValueError(f"the event lacks {name!r}")
        _check_type(name, event[name], types)
    if not math.isfinite(event["time"]):
        raise ValueError(f"'time' is {event['time']}")
    for name, types in OPS.get(event["op"], {}).items():
        if name not in event:
            raise ValueError(f"the {event['op']} event lacks {name!r}")
        value = event[name]
        _check_type(name, value, types)
        _check_value(name, value)
    for name, types in OPTIONAL.get(event["op"], {}).items():
        if name in event:
            _check_type(name, event[name], types)
            _check_value(name, event[name])


def _check_value(name: str, value: Any) -> None:
    if name in CHOICES and value not in CHOICES[name]:
        raise ValueError(f"{name!r} is {value!r}, expected one of {', '.join(map(repr, CHOICES[name]))}")
    if name in TUPLE_SIZES and not all(
            isinstance(item, list) and len(item) == TUPLE_SIZES[name] and all(_is_int(x) for x in item)
            for item in value):
        raise ValueError(f"{name!r} must be a list of lists of {TUPLE_SIZES[name]} integers")
    if name in INT_LISTS and not all(_is_int(item) for item in value):
        raise ValueError(f"{name!r} must be a list of integers")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_type(name: str, value: Any, types: tuple[type, ...]) -> None:
    # JSON true/false load as bool, a subclass of int: never a valid offset or epoch
    if isinstance(value, types) and not isinstance(value, bool):
        return
    expected = " or ".join("null" if t is type(None) else t.__name__ for t in types)
    raise ValueError(f"{name!r} is {json.dumps(value)}, expected {expected}")


class HistoryWriter:
    """Appends one client's events to DIRECTORY/CLIENT.jsonl."""

    def __init__(self, directory: Path, client: str) -> None:
        if not client or Path(client).name != client:
            raise ValueError(f"a client name is a plain file name, not {client!r}")
        directory.mkdir(parents=True, exist_ok=True)
        self.client = client
        self.path = directory / f"{client}.jsonl"
        self._file: TextIO = self.path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def record(self, op: str, **fields: Any) -> None:
        """Stamp the event with the time and this client, check it, and append it as one flushed line."""
        if stamped := set(STAMPED).intersection(fields):
            raise ValueError(f"the writer stamps {', '.join(sorted(stamped))}")
        event = {"time": time.time(), "client": self.client, "op": op, **fields}
        validate(event)
        line = json.dumps(event, separators=(",", ":"), allow_nan=False) + "\n"
        with self._lock:
            self._file.write(line)
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def read_history(directory: Path) -> list[Event]:
    """Every event of every *.jsonl file in `directory`, sorted by time (stable). Raises HistoryError."""
    if not directory.is_dir():
        raise HistoryError(f"{directory}: no such directory")
    paths = sorted(directory.glob("*.jsonl"))
    if not paths:
        raise HistoryError(f"{directory}: no *.jsonl history files")
    events: list[Event] = []
    for path in paths:
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    event = json.loads(line, parse_constant=_reject_constant)
                    validate(event)
                except ValueError as exc:  # json.JSONDecodeError is one too
                    raise HistoryError(f"{path}:{number}: {exc}") from None
                events.append(event)
    events.sort(key=lambda event: event["time"])
    return events
