"""`epoch-broker drill check HISTORY_DIR`: which invariants a drill's history (drill/history.py) keeps.

The invariants are `INVARIANTS` below (docs/drills.md lists them), each counted and shown with at most 10
examples.

Rules:
- The final reader's read-back after healing is the final log: what it holds is what the cluster kept.
- A read is withdrawn by a later truncation event of the same client and partition at or below its offset:
  a KIP-320 consumer reports the divergence and reads again from there, so the records it read before were
  legitimately replaced; only an unreported replacement is an anomaly.
- With `allow_acks1_loss`, a lost acks=1 record counts as never acknowledged, in every invariant: acks=1 does
  not wait for the followers, so a new leader may lack it and give its offset to another record.
- Regressions compare one observer's answers in the order it recorded them: answers of two pollers, ordered
  by the time each was recorded, may have been served by the broker in the other order.
- Counts are of anomalies (one per record, per offset, per step back); example times are seconds after the
  first event of the history, whose wall-clock time the report prints.
- It reads nothing but the history, so histories from anyone's clients are checked the same way.
- A pipeline (the spark-pipeline drill, drill/pipeline.py) is judged from its `output` events, the rows of its
  output topic read read_committed after healing, each naming the input record it was made from
  (source_partition, source_offset, source_value: the value upper-cased), against the final reader's log of the
  input topic (`source_topic` of the events).

Consumers and their assignments (the `member`, `assigned` and `revoked` events of drill/history.py):
- An assignment of a partition to a consumer lasts from the `assigned` event naming it to the `revoked` event
  naming it (on_revoke or on_lost) or the member's `end`; a consumer that records no assignment (partitions
  assigned by hand, as the live consumer's) has one assignment per partition, from its first read. A truncation
  it reported is a seek: its next read of that partition is due at the truncation's offset (KIP-320's consumer
  resumes there), and is judged from there.
- poll_skip and nonmonotonic_poll compare successive reads within one assignment only: a new owner starts from
  the group's committed offset, which may be behind what it (or another) read before, and that is no anomaly.
  "Exists in the log" is the final log's: offsets the final reader read (a read_committed consumer is not
  expected at offsets of transactions that did not commit, nor at markers, which no reader sees).
- owned_twice: a member holds a partition from its `assigned` to its `revoked` or its `end` (after which it is
  not live: a closed, killed or fenced member holds nothing); two members of one group (the `group` of their
  `member` start) must never hold one partition at the same time. The times are those at which the callbacks
  ran in each client, so a held interval is what the application believed: the rule is about what each
  consumer was told, not when the coordinator decided. It holds for every protocol a drill runs:
  - classic eager (librdkafka's range, roundrobin): every member revokes everything in its on_revoke before it
    sends JoinGroup, and the coordinator answers the joins (then SyncGroup gives the assignments) only once every
    member has joined or been removed, so a new owner's on_assign follows the old owner's on_revoke;
  - classic cooperative (cooperative-sticky): the leader's assignor leaves out of a generation any partition
    that another member still owns; the owner revokes it (on_revoke) then rejoins, and only the following
    rebalance gives it away;
  - consumer (KIP-848): the coordinator gives a partition to a new member only once its previous owner's
    heartbeat no longer lists it, which that client sends after its on_revoke;
  - in all three, a member that the coordinator removes while its client still believes it holds partitions (a
    session that expired while it was cut off, a rebalance it did not answer in time) is a zombie until its
    client notices (on_lost): the protocols fence its commits, not its fetches. Clients notice first as long as
    their session timer runs ahead of the coordinator's (librdkafka's session check declares the assignment lost
    when the coordinator has not answered within the session timeout, and a coordinator that fails over starts
    its members' sessions afresh when it loads the group), which is the case in the drills: their faults never
    cut a live member off its coordinator for good. A report of owned_twice is therefore a finding, whichever
    protocol: the examples name both members and the times.

Share groups (KIP-932; the `share_group`, `share_member`, `share_acquire` and `share_ack` events): a delivery is a
`share_acquire` (a member's poll returned the record, with the delivery count its client reports), an outcome a
`share_ack` (error null: the broker answered it without error; an error, or no event, proves nothing either
way: the broker may or may not have applied it). What a share-partition guarantees, and so what is checked:
- Every acquisition of a record raises its delivery count by one and takes a lock of its own: a delivery count
  names one lock. The broker gives a count back only when it releases the records of a member whose share
  session ended (Kafka 4.2's releaseAcquiredRecords, KAFKA-17541: its connection dropped or it closed), because
  those records were fetched and maybe never delivered; records whose lock runs out, or released
  (RELEASE), keep their count. A leader that fails over reads the count back from the durable state (acquired
  records as available with their count), so the next acquisition has a higher one.
- share_locked_twice: two deliveries of one record with one delivery count are one lock given twice (two
  members, or one, holding the record at once), unless the first one's member ended (`share_member` end, which
  a drill records before it kills the process) between the two: then the count was given back. Times are not
  compared with the lock duration: a client's delivery time bounds the broker's acquisition from one side only
  (the broker acquired it before, by up to a fetch and the client's buffering), so an overlap of observed
  intervals would prove nothing; a repeated count does, whatever the timing.
- share_delivery_count: a record's deliveries, in the order observed, never go below an earlier one's count
  (a count going back means the share-partition's state was lost, as a new leader without durable state starts
  afresh), and never pass the group's `share.delivery.count.limit` (the `share_group` event): at the limit a
  release or a lock expiry archives the record, and a given-back count is one below its last delivery's.
- share_accepted_twice: ACCEPT and REJECT are final (ACKNOWLEDGED, ARCHIVED): the record is never acquired again.
  An acknowledgement answered without error is not always one the broker applied, though: one of an offset below
  the share-partition's start (everything below it is finished) is skipped and answered NONE, as Kafka does. So
  a member whose lock expired (a stall) while another member got the record and accepted it, the start moving
  past it, sees its own late ACCEPT succeed too. Of two final acknowledgements that succeeded, each of the
  delivery its member last had (its delivery count), only the one of the higher count can have been applied
  (the later acquisition; the earlier holder's lock had ended), and the other is then a skipped one only if the
  broker took it after it had applied the first: after the first's acknowledgement was sent (`sent`, else its
  delivery). A failure is therefore two successful final acknowledgements of equal counts, or the lower count's
  answered before the higher count's was sent: the record was acquired again after a final acknowledgement. A
  member whose acknowledgement failed (its lock had expired, the leader changed, no answer) may get the record
  again, or another member may, and accept it: at-least-once delivery is the share group's contract.
- share_lost: every record of the final log (of the share group's topic) ends: an ACCEPT or REJECT succeeded,
  or its last delivery was at the delivery count limit (whatever became of that one: a RELEASE or a lock expiry
  archives it there, an ACCEPT finishes it, and a crash gives its count back, so another delivery follows). A
  drill's members finish every record below the high watermarks before they close.
- Counts and examples are per record (group, partition, offset); a delivery count of -1 (a client that does not
  report it) takes no part in the count rules.
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

from epoch_broker.drill.history import Event, HistoryError, read_history

TopicPartition = tuple[str, int]
Record = tuple[TopicPartition, str]  # a record is named by its partition and value
FINAL_READER = "reader"
MAX_EXAMPLES = 10
_EPOCH_ERRORS = ("FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH")
# Every invariant `check` reports, in its order: name -> what it counts
INVARIANTS: dict[str, str] = {
    "lost": "an acknowledged record that the final reader did not read back in its partition",
    "duplicated": "a value the final reader read at two offsets, or in a partition it was not sent to as well",
    "inconsistent_offsets": "one offset of a partition with two values among all reads and acknowledged offsets",
    "non_monotonic": "a producer's acknowledged offsets, in send order, going back",
    "unseen": "(never fails) sends without any outcome that the final log does not hold either",
    "epoch_regression": "a broker's Metadata answers going back in leader epoch (KIP-232)",
    "latest_regression": "ListOffsets LATEST answers going back, whichever broker led (KIP-207)",
    "undetected_truncation": "a consumer read a record the final log replaced or cut, and never said so (KIP-320)",
    "replicas_consistent": "replicas' logs and epoch checkpoints agree below the high watermark (StrongIsr)",
    "epoch_fenced_produce": "an acknowledged record whose Produce carried a leader epoch (KIP-359, the send's "
                            "optional `leader_epoch`) that the final log holds in another epoch: a leader in one "
                            "epoch took a write meant for another",
    "aborted_read": "a record of an aborted transaction read by a read_committed consumer (KIP-98)",
    "partial_transaction": "a transaction of which the final log (a read_committed reader) holds some records but "
                           "not all: whatever its outcome, a transaction is atomic",
    "poll_skip": "(Jepsen's poll-skip) a consumer's successive reads of a partition within one assignment skip an "
                 "offset the final log holds",
    "nonmonotonic_poll": "(Jepsen's nonmonotonic-poll) a consumer's successive reads of a partition within one "
                         "assignment go back (or repeat an offset)",
    "owned_twice": "a partition held by two live members of one consumer group at the same time",
    "unconsumed": "a record of the final log that no member of a consumer group read: a group whose members commit "
                  "what they have read consumes every record at least once, through every rebalance and "
                  "coordinator change (a drill's members read up to the high watermarks before they close)",
    "share_accepted_twice": "a record of a share group with two final acknowledgements (ACCEPT or REJECT) that "
                            "succeeded and cannot have been one applied and one skipped (below the share-partition's "
                            "start): equal delivery counts, or the lower one's answered before the higher one's "
                            "was sent",
    "share_lost": "a record of the final log that a share group neither accepted nor rejected (successfully) nor "
                  "delivered up to its delivery count limit",
    "share_locked_twice": "two deliveries of a record by a share group with one delivery count (one acquisition "
                          "lock given twice), without the first holder's session ending between them",
    "share_delivery_count": "a share group's delivery of a record with a count below an earlier delivery's, or "
                            "above the group's delivery count limit",
    "pipeline_exactly_once": "a record of the input's final read_committed log without exactly one row in the "
                             "pipeline's read_committed output, or an output row that names no such record (one "
                             "of an aborted transaction, or of none)",
    "pipeline_order": "a stream's output rows (one key) not in its input order, or not in one output partition",
}


@dataclass(slots=True)
class Invariant:
    name: str
    passed: bool
    count: int
    examples: list[str]  # at most MAX_EXAMPLES readable lines
    note: str  # what it checks, one line


@dataclass(slots=True)
class CheckResult:
    invariants: list[Invariant]
    figures: dict[str, int | float]
    start: float = 0.0  # Unix time of the first event: example times are seconds after it

    @property
    def passed(self) -> bool:
        return all(invariant.passed for invariant in self.invariants)

    def invariant(self, name: str) -> Invariant:
        return next(invariant for invariant in self.invariants if invariant.name == name)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: passed, start, figures, invariants."""
        return {"passed": self.passed, "start": self.start, "figures": dict(self.figures),
                "invariants": [asdict(invariant) for invariant in self.invariants]}


@dataclass(slots=True)
class _Findings:
    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, example: str) -> None:
        self.count += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(example)

    def verdict(self, name: str, note: str) -> Invariant:
        return Invariant(name, self.count == 0, self.count, self.examples, note)


class _Truncations:
    """Every truncation event by (client, partition), to ask whether a read was withdrawn after it."""

    def __init__(self, events: list[Event]) -> None:
        found: dict[tuple[str, TopicPartition], list[tuple[int, int]]] = defaultdict(list)
        for index, event in enumerate(events):
            if event["op"] == "truncation":
                found[event["client"], _partition(event)].append((index, event["offset"]))
        # per key: event indexes, and the lowest truncation offset from each index on
        self._by_key: dict[tuple[str, TopicPartition], tuple[list[int], list[int]]] = {}
        for key, entries in found.items():
            lowest = [offset for _, offset in entries]
            for i in range(len(lowest) - 2, -1, -1):
                lowest[i] = min(lowest[i], lowest[i + 1])
            self._by_key[key] = ([index for index, _ in entries], lowest)

    def after(self, client: str, tp: TopicPartition, index: int, offset: int) -> bool:
        """Did `client` report a truncation of `tp` at or below `offset` after event `index`?"""
        indexes, lowest = self._by_key.get((client, tp), ([], []))
        first_later = bisect.bisect_right(indexes, index)
        return first_later < len(indexes) and lowest[first_later] <= offset


def _partition(event: Event) -> TopicPartition:
    return event["topic"], event["partition"]


def _name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


@dataclass(slots=True)
class _History:
    """The events in time order, and the indexes every invariant shares."""

    events: list[Event]
    final_reader: str
    start: float
    sends: dict[Record, Event]  # the first send of each record
    acked: dict[Record, Event]  # the first acknowledgement (error null) of each record
    answered: set[Record]  # records with any ack event, acknowledged or not
    final_reads: dict[Record, list[Event]]  # the final reader's reads of each record
    final_at: dict[tuple[TopicPartition, int], Event]  # the final reader's (first) read of each offset
    final_hw: dict[TopicPartition, int]  # one past the last offset the final reader read
    truncations: _Truncations
    by_op: dict[str, list[tuple[int, Event]]]  # op -> (index in events, event)
    transactions: dict[tuple[str, int], list[Record]]  # (producer client, txn) -> the records sent in it
    outcomes: dict[tuple[str, int], Event]  # (producer client, txn) -> its txn event

    @classmethod
    def build(cls, events: list[Event], final_reader: str) -> _History:
        events = sorted(events, key=lambda event: event["time"])
        history = cls(events=events, final_reader=final_reader, start=events[0]["time"] if events else 0.0,
                      sends={}, acked={}, answered=set(), final_reads=defaultdict(list), final_at={}, final_hw={},
                      truncations=_Truncations(events), by_op=defaultdict(list), transactions=defaultdict(list),
                      outcomes={})
        for index, event in enumerate(events):
            op = event["op"]
            history.by_op[op].append((index, event))
            if op == "send":
                record = (_partition(event), event["value"])
                if record not in history.sends and "txn" in event:
                    history.transactions[event["client"], event["txn"]].append(record)
                history.sends.setdefault(record, event)
            elif op == "txn":
                history.outcomes[event["client"], event["txn"]] = event
            elif op == "ack":
                record = (_partition(event), event["value"])
                history.answered.add(record)
                if event["error"] is None:
                    history.acked.setdefault(record, event)
            elif op == "read" and event["client"] == final_reader:
                tp = _partition(event)
                history.final_reads[tp, event["value"]].append(event)
                history.final_at.setdefault((tp, event["offset"]), event)
                history.final_hw[tp] = max(history.final_hw.get(tp, 0), event["offset"] + 1)
        return history

    def outcome(self, transaction: tuple[str, int]) -> str:
        """commit, abort, or unknown (also when its producer never said)."""
        return self.outcomes[transaction]["outcome"] if transaction in self.outcomes else "unknown"

    def at(self, event: Event) -> str:
        return f"+{event['time'] - self.start:.3f}s"

    def of_op(self, op: str) -> list[tuple[int, Event]]:
        return self.by_op.get(op, [])


def check(events: list[Event], *, final_reader: str = FINAL_READER, allow_acks1_loss: bool = False,
          allow_unclean: bool = False) -> CheckResult:
    """Check a drill's events (any order; they are sorted by time) against every invariant. `allow_unclean`: the
    drill elects uncleanly on purpose, so LATEST may go back where the log was truncated (KIP-207 holds only for
    clean elections); such regressions are counted and shown, not failures."""
    history = _History.build(events, final_reader)
    lost, forgiven, acks1_lost = _lost(history, allow_acks1_loss)
    undetected, detected = _undetected_truncation(history)
    poll_skip, nonmonotonic_poll = _polls(history)
    invariants = [lost, _duplicated(history), _inconsistent_offsets(history, forgiven),
                  _non_monotonic(history, forgiven), _unseen(history), _epoch_regression(history),
                  _latest_regression(history, allow_unclean), undetected, _replicas_consistent(history),
                  _epoch_fenced_produce(history), _aborted_read(history), _partial_transaction(history),
                  poll_skip, nonmonotonic_poll, _owned_twice(history), _unconsumed(history),
                  *_share(history), *_pipeline(history)]
    acks = [event for _, event in history.of_op("ack")]
    figures: dict[str, int | float] = {
        "events": len(history.events),
        "duration_s": round(history.events[-1]["time"] - history.start, 3) if history.events else 0.0,
        "sent": len(history.of_op("send")),
        "acked": sum(1 for event in acks if event["error"] is None),
        "failed": sum(1 for event in acks if event["error"] is not None),
        "unknown": sum(1 for record in history.sends if record not in history.answered),
        "read": len(history.of_op("read")),
        "final_read": sum(len(reads) for reads in history.final_reads.values()),
        "truncations_reported": len(history.of_op("truncation")),
        "truncations_detected": detected,
        "faults_applied": sum(1 for _, event in history.of_op("fault") if event["phase"] == "start"),
        "acks1_lost": acks1_lost,
        "produce_epoch_refused": sum(1 for event in acks if event["error"] in _EPOCH_ERRORS),
        "produce_not_leader": sum(1 for event in acks if event["error"] == "NOT_LEADER_OR_FOLLOWER"),
    }
    if history.transactions:
        outcomes = [history.outcome(key) for key in history.transactions]
        figures.update({f"transactions_{outcome}": outcomes.count(outcome)
                        for outcome in ("commit", "abort", "unknown")})
    figures.update(_group_figures(history))
    figures.update(_share_figures(history))
    figures.update(_pipeline_figures(history))
    return CheckResult(invariants, figures, history.start)


def check_directory(path: Path, *, final_reader: str = FINAL_READER, allow_acks1_loss: bool = False,
                    allow_unclean: bool = False) -> CheckResult:
    """Read and check a history directory; HistoryError if it is missing, malformed or holds no event."""
    events = read_history(Path(path))
    if not events:
        raise HistoryError(f"{path}: the history holds no events")
    return check(events, final_reader=final_reader, allow_acks1_loss=allow_acks1_loss, allow_unclean=allow_unclean)


def _lost(history: _History, allow_acks1_loss: bool) -> tuple[Invariant, set[Record], int]:
    """The invariant, the acks=1 records forgiven, and how many acks=1 records were lost."""
    found, acks1_lost = _Findings(), 0
    forgiven: set[Record] = set()
    for record, ack in history.acked.items():
        if record in history.final_reads:
            continue
        if ack["acks"] == "1":
            acks1_lost += 1
            if allow_acks1_loss:
                forgiven.add(record)
                continue
        found.add(f"{_name(record[0])} {record[1]!r}: acked at offset {ack['offset']} (acks={ack['acks']}) to "
                  f"{ack['client']} at {history.at(ack)}; the final reader never read it")
    note = "acknowledged records the final reader read back in their partition"
    if allow_acks1_loss:
        note += " (acks=1 losses allowed)"
    if history.acked and not history.final_reads:
        note += f"; no read by final reader {history.final_reader!r} at all (see --final-reader)"
    return found.verdict("lost", note), forgiven, acks1_lost


def _duplicated(history: _History) -> Invariant:
    found = _Findings()
    partitions: dict[tuple[str, str], list[int]] = defaultdict(list)  # (topic, value) -> partitions read in
    sent = history.sends.keys() | history.answered
    for (tp, value), reads in history.final_reads.items():
        partitions[tp[0], value].append(tp[1])
        offsets = sorted({read["offset"] for read in reads})
        if len(offsets) > 1:
            found.add(f"{_name(tp)} {value!r}: the final reader ({history.final_reader}) read it at offsets "
                      f"{', '.join(map(str, offsets))} (first at {history.at(reads[0])})")
    for (topic, value), numbers in partitions.items():
        # values are unique per partition: one read in each partition it was sent to is no duplicate
        strays = [n for n in numbers if ((topic, n), value) not in sent]
        if len(numbers) > 1 and strays:
            found.add(f"{topic} {value!r}: the final reader ({history.final_reader}) read it in partitions "
                      f"{', '.join(map(str, sorted(numbers)))}, never sent to {', '.join(map(str, sorted(strays)))}")
    return found.verdict("duplicated", "each value is in the final log once, in the partition it was sent to")


def _inconsistent_offsets(history: _History, forgiven: set[Record]) -> Invariant:
    found = _Findings()
    seen: dict[tuple[TopicPartition, int], dict[str, Event]] = defaultdict(dict)  # offset -> value -> first seen
    for index, event in enumerate(history.events):
        if event["op"] == "read":
            if history.truncations.after(event["client"], _partition(event), index, event["offset"]):
                continue  # withdrawn: its client reported the truncation that replaced it
        elif (event["op"] != "ack" or event["error"] is not None or event["offset"] is None
              or (_partition(event), event["value"]) in forgiven):
            continue  # not an acknowledged offset, or a lost acks=1 record forgiven
        seen[_partition(event), event["offset"]].setdefault(event["value"], event)
    for (tp, offset), values in seen.items():
        if len(values) > 1:
            found.add(f"{_name(tp)} offset {offset}: " + "; ".join(
                f"{value!r} {'read by' if event['op'] == 'read' else 'acked to'} {event['client']} at "
                f"{history.at(event)}" for value, event in values.items()))
    return found.verdict("inconsistent_offsets",
                         "every offset holds one value across all reads and acknowledged offsets "
                         "(reads a client then reported truncated excepted)")


def _non_monotonic(history: _History, forgiven: set[Record]) -> Invariant:
    found = _Findings()
    # producers: acknowledged offsets in send order (the send's place in the history, else the ack's)
    send_index: dict[Record, int] = {}
    for index, event in history.of_op("send"):
        send_index.setdefault((_partition(event), event["value"]), index)
    acks = sorted(((send_index.get((_partition(event), event["value"]), index), event)
                   for index, event in history.of_op("ack")
                   if event["error"] is None and event["offset"] is not None
                   and (_partition(event), event["value"]) not in forgiven), key=lambda entry: entry[0])
    produced: dict[tuple[str, TopicPartition], Event] = {}
    for _, ack in acks:
        key = (ack["client"], _partition(ack))
        before = produced.get(key)
        if before is not None and ack["offset"] <= before["offset"]:
            found.add(f"{ack['client']} {_name(key[1])}: {ack['value']!r} acked at offset {ack['offset']} "
                      f"({history.at(ack)}), sent after {before['value']!r} acked at offset {before['offset']}")
        produced[key] = ack
    return found.verdict("non_monotonic", "a producer's acknowledged offsets rise in send order (a consumer's "
                                          "reads: nonmonotonic_poll)")


def _unseen(history: _History) -> Invariant:
    found = _Findings()
    for record, send in history.sends.items():
        if record not in history.answered and record not in history.final_reads:
            found.add(f"{_name(record[0])} {record[1]!r}: sent by {send['client']} at {history.at(send)}, "
                      "no outcome and not in the final log")
    invariant = found.verdict("unseen", "informational, never fails: sends with no ack event (outcome unknown) "
                                        "that the final log does not hold either")
    invariant.passed = True
    return invariant


def _regressions(history: _History, op: str, field_name: str, key_of: Callable[[Event], tuple[Any, ...]],
                 describe: Callable[[Event, Event], str]) -> _Findings:
    """Each time `field_name` of an `op` answer goes below the previous answer of the same key (observer, and
    what was observed); answers without the field (-1, or an error) are skipped."""
    found = _Findings()
    last: dict[tuple[Any, ...], Event] = {}
    for _, event in history.of_op(op):
        if event.get("error") is not None or event[field_name] is None or event[field_name] < 0:
            continue
        key = key_of(event)
        before = last.get(key)
        if before is not None and event[field_name] < before[field_name]:
            found.add(describe(before, event))
        last[key] = event
    return found


def _epoch_regression(history: _History) -> Invariant:
    found = _regressions(
        history, "metadata", "leader_epoch", lambda e: (e["client"], e["broker"], _partition(e)),
        lambda before, e: f"{_name(_partition(e))} from broker {e['broker']} to {e['client']}: leader epoch "
                          f"{before['leader_epoch']} (leader {before['leader']}) at {history.at(before)}, then "
                          f"{e['leader_epoch']} (leader {e['leader']}) at {history.at(e)}")
    return found.verdict("epoch_regression", "each broker's Metadata answers never go back in leader epoch")


def _latest_regression(history: _History, allow_unclean: bool) -> Invariant:
    found = _regressions(
        history, "latest", "offset", lambda e: (e["client"], _partition(e)),
        lambda before, e: f"{_name(_partition(e))} to {e['client']}: LATEST {before['offset']} from broker "
                          f"{before['broker']} at {history.at(before)}, then {e['offset']} from broker "
                          f"{e['broker']} at {history.at(e)}")
    note = "ListOffsets LATEST answers never go back, whichever broker led"
    if allow_unclean:
        return Invariant("latest_regression", True, found.count, found.examples,
                         note + " (unclean elections allowed: where they truncated, counted, not failed)")
    return found.verdict("latest_regression", note)


def _epoch_fenced_produce(history: _History) -> Invariant:
    found = _Findings()
    for record, ack in history.acked.items():
        carried = history.sends.get(record, {}).get("leader_epoch", -1)
        reads = history.final_reads.get(record)
        if carried < 0 or not reads or reads[0]["leader_epoch"] in (carried, -1):
            continue
        found.add(f"{_name(record[0])} {record[1]!r}: sent with leader epoch {carried} to {ack['client']}'s broker "
                  f"at {history.at(ack)}, acknowledged at offset {ack['offset']}, written in epoch "
                  f"{reads[0]['leader_epoch']}")
    return found.verdict("epoch_fenced_produce",
                         "an acknowledged Produce that carried a leader epoch (KIP-359) was written in that epoch")


def _committed_reads(history: _History) -> list[Event]:
    return [event for _, event in history.of_op("read") if event.get("isolation") == "read_committed"]


def _aborted_read(history: _History) -> Invariant:
    found = _Findings()
    aborted = {record: key for key, records in history.transactions.items()
               if history.outcome(key) == "abort" for record in records}
    for read in _committed_reads(history):
        key = aborted.get((_partition(read), read["value"]))
        if key is not None:
            found.add(f"{_name(_partition(read))} offset {read['offset']}: {read['client']} read {read['value']!r} "
                      f"at {history.at(read)}, of transaction {key[1]} of {key[0]}, aborted at "
                      f"{history.at(history.outcomes[key])}")
    note = "read_committed consumers never read a record of an aborted transaction"
    return found.verdict("aborted_read", note if history.transactions else note + " (no transactions)")


def _partial_transaction(history: _History) -> Invariant:
    final = {(_partition(read), read["value"]) for read in _committed_reads(history)
             if read["client"] == history.final_reader}
    note = "the final read_committed log holds each transaction whole or not at all"
    if not history.transactions:
        return Invariant("partial_transaction", True, 0, [], note + " (no transactions)")
    if not final and history.final_reads:
        return Invariant("partial_transaction", True, 0, [], note + " (the final reader is not read_committed)")
    found = _Findings()
    for (client, txn), records in history.transactions.items():
        held = [record for record in records if record in final]
        if 0 < len(held) < len(records):
            outcome = history.outcome((client, txn))
            missing = next(record for record in records if record not in final)
            found.add(f"transaction {txn} of {client} ({outcome}): {len(held)} of its {len(records)} records in the "
                      f"final log; missing {_name(missing[0])} {missing[1]!r}")
    return found.verdict("partial_transaction", note)


def _undetected_truncation(history: _History) -> tuple[Invariant, int]:
    """The invariant, and how many replaced reads their consumer did report."""
    found, detected = _Findings(), 0
    in_transactions = {record for records in history.transactions.values() for record in records}
    for index, event in history.of_op("read"):
        if event["client"] == history.final_reader:
            continue
        tp, offset = _partition(event), event["offset"]
        final = history.final_at.get((tp, offset))
        if final is not None:
            if final["value"] == event["value"]:
                continue
            now = f"the final log has {final['value']!r} there"
        elif (tp, event["value"]) in in_transactions:
            continue  # a gap of a read_committed final log: an aborted record (aborted_read judges who read it)
        elif offset < history.final_hw.get(tp, 0):
            now = "the final log has no record there"
        else:
            continue  # beyond the final read-back: nothing to compare with
        if history.truncations.after(event["client"], tp, index, offset):
            detected += 1
            continue
        found.add(f"{_name(tp)} offset {offset}: {event['client']} read {event['value']!r} at {history.at(event)}; "
                  f"{now}, and {event['client']} reported no truncation at or below {offset} after it")
    return found.verdict("undetected_truncation", "a consumer that read a record the final log replaced or cut "
                                                  "then reported a truncation at or below it"), detected


def _replicas_consistent(history: _History) -> Invariant:
    logs: dict[TopicPartition, dict[int, Event]] = defaultdict(dict)  # the last log each replica reported
    for _, event in history.of_op("replica_log"):
        logs[_partition(event)][event["broker"]] = event
    if not logs:
        return Invariant("replicas_consistent", True, 0, [], "no replica logs")
    found = _Findings()
    for tp, replicas in sorted(logs.items()):
        hw = min(log["high_watermark"] for log in replicas.values())
        reference, *others = sorted(replicas)
        batches = {broker: [b for b in log["batches"] if b[0] < hw] for broker, log in replicas.items()}
        checkpoint = {broker: [e for e in log["epoch_checkpoint"] if e[1] < hw] for broker, log in replicas.items()}
        for broker in others:
            if batches[broker] != batches[reference]:
                found.add(f"{_name(tp)} below high watermark {hw}: "
                          f"{_first_difference(batches, reference, broker)}")
            if checkpoint[broker] != checkpoint[reference]:
                found.add(f"{_name(tp)} epoch checkpoint below high watermark {hw}: broker {reference} has "
                          f"{checkpoint[reference]}, broker {broker} {checkpoint[broker]}")
    return found.verdict("replicas_consistent", "replicas' batches (offsets, epoch, crc) and epoch checkpoints "
                                                "are the same below the partition's lowest high watermark")


def _first_difference(batches: dict[int, list[list[int]]], reference: int, broker: int) -> str:
    ours, theirs = batches[reference], batches[broker]
    at = next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b), min(len(ours), len(theirs)))
    show = [log[at] if at < len(log) else "no batch" for log in (ours, theirs)]
    return f"batch #{at}: broker {reference} has {show[0]}, broker {broker} {show[1]} ([base, last, epoch, crc])"


def _polls(history: _History) -> tuple[Invariant, Invariant]:
    """poll_skip and nonmonotonic_poll: each consumer's successive reads of a partition within one assignment
    (the module docstring says where an assignment begins and ends)."""
    skips, backs = _Findings(), _Findings()
    final: dict[TopicPartition, list[int]] = defaultdict(list)
    for tp, offset in sorted(history.final_at):
        final[tp].append(offset)
    uncommitted = {record for key, records in history.transactions.items() if history.outcome(key) != "commit"
                   for record in records}
    # what a read_committed consumer never sees in a final log read otherwise: records of transactions that
    # did not commit (a read_committed final log holds none)
    invisible = {(tp, offset) for (tp, offset), event in history.final_at.items()
                 if (tp, event["value"]) in uncommitted}
    previous: dict[tuple[str, TopicPartition], Event] = {}  # the last read, or truncation (a seek), in the assignment
    for event in history.events:
        op, client = event["op"], event["client"]
        if client == history.final_reader:
            continue
        if op in ("assigned", "revoked"):
            for partition in event["partitions"]:
                previous.pop((client, (event["topic"], partition)), None)
        elif op == "member":
            for key in [key for key in previous if key[0] == client]:
                del previous[key]
        elif op == "truncation":
            previous[client, _partition(event)] = event
        elif op == "read":
            tp = _partition(event)
            before = previous.get((client, tp))
            previous[client, tp] = event
            if before is None:
                continue
            # after a read at o the next is due above o; after a seek to t (a truncation), at t or above
            floor = before["offset"] if before["op"] == "read" else before["offset"] - 1
            what = (f"offset {before['offset']}" if before["op"] == "read"
                    else f"its truncation to offset {before['offset']}")
            offset = event["offset"]
            if offset <= floor:
                backs.add(f"{client} {_name(tp)}: read offset {offset} ({event['value']!r}) at {history.at(event)}, "
                          f"after {what} at {history.at(before)}, in one assignment")
                continue
            offsets = final.get(tp, [])
            skipped = offsets[bisect.bisect_right(offsets, floor):bisect.bisect_left(offsets, offset)]
            if event.get("isolation") == "read_committed":
                skipped = [o for o in skipped if (tp, o) not in invisible]
            if skipped:
                shown = str(skipped[0]) if len(skipped) == 1 else f"{skipped[0]}..{skipped[-1]}"
                skips.add(f"{client} {_name(tp)}: read offset {offset} ({event['value']!r}) at {history.at(event)}, "
                          f"after {what} at {history.at(before)}, in one assignment: skipped {len(skipped)} "
                          f"offset{'s' if len(skipped) > 1 else ''} the final log holds ({shown})")
    return (skips.verdict("poll_skip", "a consumer's successive reads of a partition within one assignment skip no "
                                       "offset the final log holds (Jepsen's poll-skip)"),
            backs.verdict("nonmonotonic_poll", "a consumer's successive reads of a partition within one assignment "
                                               "rise, from a truncation it reported on (Jepsen's nonmonotonic-poll)"))


@dataclass(slots=True)
class Held:
    """One member holding one partition: from its assigned event to the event that ended it (None: the end of
    the history)."""

    client: str
    start: Event
    end: Event | None = None

    def until(self) -> float:
        return self.end["time"] if self.end is not None else float("inf")


def holdings(events: list[Event]) -> dict[tuple[str | None, TopicPartition], list[Held]]:
    """(group, partition) -> every member's holding of it, in the order they began, from events in time order
    (the report draws them too). A client without a member start event is in group None."""
    group_of: dict[str, str | None] = {}
    holding: dict[tuple[str, TopicPartition], Held] = {}
    found: dict[tuple[str | None, TopicPartition], list[Held]] = defaultdict(list)
    for event in events:
        op, client = event["op"], event["client"]
        if op == "member":
            if event["phase"] == "start":
                group_of[client] = event["group"]
                continue
            for key in [key for key in holding if key[0] == client]:
                holding.pop(key).end = event
        elif op == "assigned":
            for partition in event["partitions"]:
                key = (client, (event["topic"], partition))
                if key not in holding:  # assigned again while held (an eager client's repeat): held since before
                    holding[key] = Held(client, event)
                    found[group_of.get(client), key[1]].append(holding[key])
        elif op == "revoked":
            for partition in event["partitions"]:
                if (held := holding.pop((client, (event["topic"], partition)), None)) is not None:
                    held.end = event
    return found


def _owned_twice(history: _History) -> Invariant:
    found = _Findings()

    def ended(held: Held) -> str:
        if held.end is None:
            return "the end of the history"
        what = "its end" if held.end["op"] == "member" else "lost" if held.end["how"] == "lost" else "revoked"
        return f"{what} at {history.at(held.end)}"

    for (group, tp), held in sorted(holdings(history.events).items(), key=lambda item: (str(item[0][0]), item[0][1])):
        for later_index, later in enumerate(held):
            for earlier in held[:later_index]:
                if earlier.client == later.client or earlier.until() <= later.start["time"]:
                    continue
                both = min(earlier.until(), later.until()) - later.start["time"]
                found.add(f"{group or 'the group'} {_name(tp)}: {earlier.client} held it from "
                          f"{history.at(earlier.start)} to {ended(earlier)}, {later.client} from "
                          f"{history.at(later.start)} to {ended(later)}: both for "
                          f"{'the rest of the history' if both == float('inf') else f'{both:.3f} s'}")
    return found.verdict("owned_twice", "no partition held by two live members of one consumer group at once "
                                        "(from on_assign to on_revoke, on_lost or the member's end)")


def _unconsumed(history: _History) -> Invariant:
    groups: dict[str, set[str]] = defaultdict(set)  # group -> its members (clients with a member start)
    for _, event in history.of_op("member"):
        if event["phase"] == "start":
            groups[event["group"]].add(event["client"])
    note = "every record of the final log was read by a member of each consumer group (at least once)"
    if not groups:
        return Invariant("unconsumed", True, 0, [], note + " (no consumer group)")
    found = _Findings()
    for group, members in sorted(groups.items()):
        read = {(_partition(event), event["value"]) for _, event in history.of_op("read") if event["client"] in members}
        for record, reads in sorted(history.final_reads.items(), key=lambda item: (item[0][0], item[1][0]["offset"])):
            if record not in read:
                found.add(f"{group} {_name(record[0])} offset {reads[0]['offset']} ({record[1]!r}): read by none "
                          f"of its {len(members)} members")
    return found.verdict("unconsumed", note)


ShareRecord = tuple[str, TopicPartition, int]  # a record of a share group: group, partition, offset
_FINAL_ACKS = ("accept", "reject")


@dataclass(slots=True)
class _ShareGroups:
    """Every share group's deliveries and successful acknowledgements by record, in time order, and its members'
    session ends."""

    limits: dict[str, int]  # group -> share.delivery.count.limit
    topics: dict[str, set[str]]  # group -> the topics it reads (its share_group events and its deliveries)
    deliveries: dict[ShareRecord, list[Event]]
    finals: dict[ShareRecord, list[Event]]  # ACCEPTs and REJECTs that succeeded
    releases: int  # RELEASEs that succeeded
    failed: int  # acknowledgements whose outcome was an error
    ends: dict[str, list[float]]  # member -> the times its sessions ended

    @classmethod
    def build(cls, history: _History) -> _ShareGroups:
        groups = cls({}, defaultdict(set), defaultdict(list), defaultdict(list), 0, 0, defaultdict(list))
        for _, event in history.of_op("share_group"):
            groups.limits[event["group"]] = event["delivery_count_limit"]
            groups.topics[event["group"]].add(event["topic"])
        for _, event in history.of_op("share_member"):
            if event["phase"] == "end":
                groups.ends[event["member"]].append(event["time"])
        for _, event in history.of_op("share_acquire"):
            groups.deliveries[event["group"], _partition(event), event["offset"]].append(event)
            groups.topics[event["group"]].add(event["topic"])
        for _, event in history.of_op("share_ack"):
            if event["error"] is not None:
                groups.failed += 1
            elif event["ack"] in _FINAL_ACKS:
                groups.finals[event["group"], _partition(event), event["offset"]].append(event)
            else:
                groups.releases += 1
        return groups

    def delivery_acked(self, record: ShareRecord, ack: Event) -> Event | None:
        """The delivery an acknowledgement was of: its member's last delivery of the record before it (None: no
        such delivery, or one of unknown count)."""
        before = [event for event in self.deliveries.get(record, [])
                  if event["client"] == ack["client"] and event["time"] <= ack["time"]]
        return before[-1] if before and before[-1]["delivery_count"] >= 0 else None

    def ended_between(self, member: str, start: float, end: float) -> bool:
        return any(start <= at <= end for at in self.ends.get(member, []))

    def archived(self, record: ShareRecord) -> bool:
        """Was its last delivery at its group's delivery count limit (without a limit known: never)?"""
        deliveries = self.deliveries.get(record, [])
        limit = self.limits.get(record[0])
        return bool(deliveries) and limit is not None and deliveries[-1]["delivery_count"] >= limit


def _share_name(record: ShareRecord) -> str:
    return f"{record[0]} {_name(record[1])} offset {record[2]}"


def _share(history: _History) -> tuple[Invariant, Invariant, Invariant, Invariant]:
    """share_accepted_twice, share_lost, share_locked_twice and share_delivery_count (the module docstring says
    why each holds); without share group events, all four pass, saying so."""
    notes = {"share_accepted_twice": "no record finished twice: of two ACCEPTs or REJECTs that succeeded, one was "
                                     "skipped below the start after the other was applied",
             "share_lost": "every record of the final log was accepted or rejected, or delivered up to its limit, "
                           "by each share group",
             "share_locked_twice": "no delivery count of a record (one acquisition lock) delivered twice, but after "
                                   "its holder's session ended",
             "share_delivery_count": "a record's delivery counts never go back nor pass the delivery count limit"}
    groups = _ShareGroups.build(history)
    if not groups.topics:
        return tuple(Invariant(name, True, 0, [], note + " (no share group)")  # type: ignore[return-value]
                     for name, note in notes.items())
    twice, lost, locked, counts = _Findings(), _Findings(), _Findings(), _Findings()
    for record, finals in sorted(groups.finals.items()):
        held = [(ack, delivery) for ack in finals if (delivery := groups.delivery_acked(record, ack)) is not None]
        held.sort(key=lambda pair: pair[1]["delivery_count"])
        for index, (high, high_delivery) in enumerate(held):
            for low, low_delivery in held[:index]:
                high_sent = high.get("sent", high_delivery["time"])
                if low_delivery["delivery_count"] < high_delivery["delivery_count"] and high_sent < low["time"]:
                    continue  # the low count's was skipped: the broker took it after applying the high count's
                twice.add(f"{_share_name(record)}: {low['ack'].upper()} by {low['client']} of its delivery "
                          f"{low_delivery['delivery_count']} succeeded at {history.at(low)}; {high['ack'].upper()} "
                          f"by {high['client']} of its delivery {high_delivery['delivery_count']} (delivered at "
                          f"{history.at(high_delivery)}) succeeded at {history.at(high)}")
    for group, topics in sorted(groups.topics.items()):
        for (tp, offset), read in sorted(history.final_at.items()):
            record = (group, tp, offset)
            if tp[0] in topics and record not in groups.finals and not groups.archived(record):
                deliveries = groups.deliveries.get(record, [])
                lost.add(f"{_share_name(record)} ({read['value']!r}): "
                         + (f"delivered {len(deliveries)} times, last with count {deliveries[-1]['delivery_count']}"
                            f" to {deliveries[-1]['client']} at {history.at(deliveries[-1])}, never finished"
                            if deliveries else "never delivered"))
    for record, deliveries in sorted(groups.deliveries.items()):
        limit = groups.limits.get(record[0])
        highest: Event | None = None
        for index, event in enumerate(deliveries):
            count = event["delivery_count"]
            if count < 0:
                continue
            where = f"{_share_name(record)}: count {count} to {event['client']} at {history.at(event)}"
            if limit is not None and count > limit:
                counts.add(f"{where}, above the delivery count limit {limit}")
            if highest is not None and count < highest["delivery_count"]:
                counts.add(f"{where}, after count {highest['delivery_count']} to {highest['client']} at "
                           f"{history.at(highest)}")
            if highest is None or count > highest["delivery_count"]:
                highest = event
            for earlier in deliveries[:index]:
                if earlier["delivery_count"] == count and not groups.ended_between(
                        earlier["client"], earlier["time"], event["time"]):
                    locked.add(f"{where}, and to {earlier['client']} at {history.at(earlier)}, whose session "
                               "had not ended")
    return (twice.verdict("share_accepted_twice", notes["share_accepted_twice"]),
            lost.verdict("share_lost", notes["share_lost"]),
            locked.verdict("share_locked_twice", notes["share_locked_twice"]),
            counts.verdict("share_delivery_count", notes["share_delivery_count"]))


def _share_figures(history: _History) -> dict[str, int | float]:
    """Share-group figures, where the history has share deliveries: records delivered, deliveries, the records
    accepted, rejected and archived at the limit, successful releases, redeliveries, failed acknowledgements,
    final acknowledgements answered without error after the record's first (skipped below the start), member
    starts, and deliveries of crashed members never acknowledged."""
    groups = _ShareGroups.build(history)
    if not groups.deliveries:
        return {}
    deliveries = [event for events in groups.deliveries.values() for event in events]
    acked = {(event["client"], event["group"], _partition(event), event["offset"])
             for _, event in history.of_op("share_ack")}
    crashed = {event["member"] for _, event in history.of_op("share_member")
               if event["phase"] == "end" and event["detail"] == "SIGKILL"}
    finals = [events[0]["ack"] for events in groups.finals.values()]
    return {"share_records": len(groups.deliveries),
            "share_deliveries": len(deliveries),
            "share_accepted": finals.count("accept"),
            "share_rejected": finals.count("reject"),
            "share_archived": sum(1 for record in groups.deliveries
                                  if record not in groups.finals and groups.archived(record)),
            "share_released": groups.releases,
            "share_redeliveries": len(deliveries) - len(groups.deliveries),
            "share_ack_failed": groups.failed,
            "share_acks_skipped": sum(len(events) - 1 for events in groups.finals.values()),
            "share_member_starts": sum(1 for _, event in history.of_op("share_member") if event["phase"] == "start"),
            "share_held_at_crash": sum(1 for event in deliveries if event["client"] in crashed and (
                event["client"], event["group"], _partition(event), event["offset"]) not in acked)}


def _pipeline(history: _History) -> tuple[Invariant, Invariant]:
    """pipeline_exactly_once and pipeline_order, from the `output` events (none: no pipeline, both pass)."""
    rows = [event for _, event in history.of_op("output")]
    exactly_once_note = ("every record of the input's final read_committed log has exactly one row in the "
                         "pipeline's read_committed output, and every row one such record")
    order_note = "each stream's rows (one key) are in one output partition, in input order"
    if not rows:
        return (Invariant("pipeline_exactly_once", True, 0, [], exactly_once_note + " (no pipeline)"),
                Invariant("pipeline_order", True, 0, [], order_note + " (no pipeline)"))
    inputs = {row["source_topic"] for row in rows}
    committed = {(tp, offset): event for (tp, offset), event in history.final_at.items() if tp[0] in inputs}
    aborted = {record: key for key, records in history.transactions.items() if history.outcome(key) == "abort"
               for record in records}
    made: dict[tuple[TopicPartition, int], list[Event]] = defaultdict(list)
    found = _Findings()
    for row in rows:
        where = f"{_name(_partition(row))} offset {row['offset']} ({row['value']!r})"
        if row["source_offset"] is None:
            found.add(f"{where}: names no input record")
            continue
        tp = (row["source_topic"], row["source_partition"])
        source = committed.get((tp, row["source_offset"]))
        if source is not None and source["value"].upper() == row["source_value"]:
            made[tp, row["source_offset"]].append(row)
            continue
        transaction = next((aborted[record] for record in aborted
                            if record[0] == tp and record[1].upper() == row["source_value"]), None)
        found.add(f"{where}: from {_name(tp)} offset {row['source_offset']}, "
                  + (f"a record of transaction {transaction[1]} of {transaction[0]}, aborted"
                     if transaction is not None else
                     "which the input's final log does not hold" if source is None else
                     f"where the input's final log holds {source['value']!r}"))
    for (tp, offset), source in sorted(committed.items()):
        copies = made.get((tp, offset), [])
        if len(copies) != 1:
            found.add(f"{_name(tp)} offset {offset} ({source['value']!r}): "
                      + ("no output row" if not copies else f"{len(copies)} output rows, at " + ", ".join(
                          f"{_name(_partition(row))} offset {row['offset']}" for row in copies)))
    order = _Findings()
    by_key: dict[str | None, list[Event]] = defaultdict(list)
    for row in sorted(rows, key=lambda row: (row["partition"], row["offset"])):
        if row["source_offset"] is not None:
            by_key[row["key"]].append(row)
    for key, keyed in sorted(by_key.items(), key=lambda item: str(item[0])):
        partitions = sorted({row["partition"] for row in keyed})
        if len(partitions) > 1:
            order.add(f"key {key!r}: rows in output partitions {', '.join(map(str, partitions))}")
            continue
        for before, row in pairwise(keyed):
            if (row["source_partition"], row["source_offset"]) <= (before["source_partition"],
                                                                   before["source_offset"]):
                order.add(f"key {key!r} in {_name(_partition(row))}: offset {row['offset']} is from input "
                          f"{row['source_partition']}:{row['source_offset']}, after offset {before['offset']} from "
                          f"{before['source_partition']}:{before['source_offset']}")
    return found.verdict("pipeline_exactly_once", exactly_once_note), order.verdict("pipeline_order", order_note)


def _pipeline_figures(history: _History) -> dict[str, int | float]:
    """The pipeline's figures, where the history has one: input records (the input's final log), output rows,
    and its driver's starts."""
    rows = [event for _, event in history.of_op("output")]
    if not rows:
        return {}
    inputs = {row["source_topic"] for row in rows}
    return {"pipeline_input": sum(1 for tp, _ in history.final_at if tp[0] in inputs),
            "pipeline_output": len(rows),
            "driver_starts": sum(1 for _, event in history.of_op("driver") if event["phase"] == "start")}


def _group_figures(history: _History) -> dict[str, int | float]:
    """Consumer-group figures, where the history has group members."""
    members = {event["client"] for _, event in history.of_op("member")}
    if not members and not history.of_op("assigned"):
        return {}
    revoked = [event for _, event in history.of_op("revoked")]
    return {"members": len(members),
            "member_starts": sum(1 for _, event in history.of_op("member") if event["phase"] == "start"),
            "assignments": len(history.of_op("assigned")),
            "revocations": sum(1 for event in revoked if event["how"] == "revoke"),
            "assignments_lost": sum(1 for event in revoked if event["how"] == "lost"),
            "member_reads": sum(1 for _, event in history.of_op("read") if event["client"] in members)}


def format_text(result: CheckResult) -> str:
    """A short report: a PASS/FAIL table, the figures, then the examples of the failed invariants."""
    start = datetime.fromtimestamp(result.start, UTC).isoformat(timespec="milliseconds")
    failed = [invariant for invariant in result.invariants if not invariant.passed]
    lines = [f"drill check: {result.figures['events']} events over {result.figures['duration_s']} s from {start} "
             "(example times are seconds after it)", ""]
    width = max(len(invariant.name) for invariant in result.invariants)
    lines += [f"  {'PASS' if invariant.passed else 'FAIL'}  {invariant.name:<{width}} {invariant.count:>7}  "
              f"{invariant.note}" for invariant in result.invariants]
    lines += ["", "figures: " + ", ".join(f"{name} {value}" for name, value in result.figures.items())]
    for invariant in failed:
        lines += ["", f"FAIL {invariant.name} ({invariant.count}):"] + [f"  {line}" for line in invariant.examples]
        if invariant.count > len(invariant.examples):
            lines.append(f"  ... and {invariant.count - len(invariant.examples)} more")
    lines += ["", f"verdict: {'FAIL' if failed else 'PASS'}"
                  + (f" ({', '.join(invariant.name for invariant in failed)})" if failed else "")]
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("history", metavar="HISTORY_DIR", type=Path, help="a directory of *.jsonl history files")
    parser.add_argument("--final-reader", default=FINAL_READER, metavar="NAME",
                        help=f"the client whose reads are the read-back after healing (default {FINAL_READER})")
    parser.add_argument("--allow-acks1-loss", action="store_true",
                        help="a lost acks=1 record is no failure (it is still counted)")
    parser.add_argument("--allow-unclean", action="store_true",
                        help="the drill elected uncleanly: LATEST going back is counted, not failed")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    """0 when every invariant holds, 1 when one fails, 2 when the history cannot be read."""
    try:
        result = check_directory(args.history, final_reader=args.final_reader,
                                 allow_acks1_loss=args.allow_acks1_loss, allow_unclean=args.allow_unclean)
    except HistoryError as exc:
        print(f"epoch-broker drill check: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result.to_json(), indent=2) if args.json else format_text(result))
    return 0 if result.passed else 1


def main(argv: list[str]) -> int:
    """`epoch-broker drill check`: `argv` is what follows `check`."""
    parser = argparse.ArgumentParser(prog="epoch-broker drill check", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))
