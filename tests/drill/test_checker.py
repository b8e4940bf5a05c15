"""The history format (drill/history.py) and the checker (drill/checker.py) on synthetic histories: no cluster.

Every test writes a clean drill with HistoryWriter, adds one anomaly, and asserts that exactly the invariant
meant to catch it fails, with the right count and an example that names where and who.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from epoch_broker.drill import checker
from epoch_broker.drill.checker import CheckResult, check_directory
from epoch_broker.drill.history import HistoryError, HistoryWriter, read_history

TOPIC = "t"
CLEAN = {0: 5, 1: 3}  # partition -> records in the clean drill
INVARIANTS = ["lost", "duplicated", "inconsistent_offsets", "non_monotonic", "unseen", "epoch_regression",
              "latest_regression", "undetected_truncation", "replicas_consistent", "epoch_fenced_produce",
              "aborted_read", "partial_transaction", "poll_skip", "nonmonotonic_poll", "owned_twice", "unconsumed",
              "share_accepted_twice", "share_lost", "share_locked_twice", "share_delivery_count",
              "pipeline_exactly_once", "pipeline_order"]


class Drill:
    """One synthetic history directory: a writer per client, opened on first use."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.writers: dict[str, HistoryWriter] = {}

    def __call__(self, client: str) -> HistoryWriter:
        if client not in self.writers:
            self.writers[client] = HistoryWriter(self.directory, client)
        return self.writers[client]

    def produce(self, partition: int, value: str, offset: int | None, *, acks: str = "all",
                error: str | None = None, client: str = "producer") -> None:
        self(client).record("send", topic=TOPIC, partition=partition, value=value, acks=acks)
        self(client).record("ack", topic=TOPIC, partition=partition, value=value, offset=offset, error=error,
                            acks=acks)

    def read(self, client: str, partition: int, offset: int, value: str) -> None:
        self(client).record("read", topic=TOPIC, partition=partition, offset=offset, value=value, leader_epoch=1)

    def truncation(self, client: str, partition: int, offset: int) -> None:
        self(client).record("truncation", topic=TOPIC, partition=partition, offset=offset,
                            detail=f"truncated to {offset}")

    def metadata(self, broker: int, epoch: int, partition: int = 0) -> None:
        self("poller").record("metadata", broker=broker, topic=TOPIC, partition=partition, leader=broker,
                              leader_epoch=epoch)

    def latest(self, broker: int, offset: int | None, error: str | None = None) -> None:
        self("poller").record("latest", broker=broker, topic=TOPIC, partition=0, offset=offset, error=error)

    def replica_log(self, broker: int, high_watermark: int, batches: list[list[int]],
                    epoch_checkpoint: list[list[int]]) -> None:
        self("reader").record("replica_log", broker=broker, topic=TOPIC, partition=0, high_watermark=high_watermark,
                              batches=batches, epoch_checkpoint=epoch_checkpoint)

    def check(self, **options: Any) -> CheckResult:
        self.close()
        return check_directory(self.directory, **options)

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()
        self.writers.clear()


@pytest.fixture
def drill(tmp_path: Path) -> Drill:
    """A clean drill: acks=all records read by a consumer and read back, a healed fault, rising polls."""
    history = Drill(tmp_path / "history")
    history("nemesis").record("fault", fault="kill", target="broker-0", phase="start", detail="SIGKILL")
    for partition, count in CLEAN.items():
        for offset in range(count):
            history.produce(partition, f"p{partition}-{offset}", offset)
            history.read("consumer", partition, offset, f"p{partition}-{offset}")
    history.metadata(broker=0, epoch=1)
    history.metadata(broker=1, epoch=2)
    history.latest(broker=0, offset=3)
    history.latest(broker=1, offset=5)
    history("nemesis").record("fault", fault="kill", target="broker-0", phase="end", detail=None)
    for partition, count in CLEAN.items():
        for offset in range(count):
            history.read("reader", partition, offset, f"p{partition}-{offset}")
    return history


def failed(result: CheckResult) -> dict[str, int]:
    return {invariant.name: invariant.count for invariant in result.invariants if not invariant.passed}


# --- the history format


def test_a_writer_flushes_every_line_and_the_reader_sorts_all_files_by_time(tmp_path: Path) -> None:
    first, second = HistoryWriter(tmp_path, "a"), HistoryWriter(tmp_path, "b")
    first.record("fault", fault="kill", target="broker-1", phase="start", detail=None)
    second.record("fault", fault="kill", target="broker-1", phase="end", detail=None)
    first.record("custom", anything=[1, 2])  # ops the checker does not know are kept
    # nothing closed yet: a crashed drill keeps its lines
    events = read_history(tmp_path)
    assert [(e["client"], e["op"]) for e in events] == [("a", "fault"), ("b", "fault"), ("a", "custom")]
    assert [e["time"] for e in events] == sorted(e["time"] for e in events)
    first.close()
    second.close()


def test_a_writer_shared_by_threads_never_tears_a_line(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path, "producer") as writer:
        def send(thread: int) -> None:
            for n in range(200):
                writer.record("send", topic=TOPIC, partition=thread, value=f"p{thread}-{n}", acks="all")

        threads = [threading.Thread(target=send, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(read_history(tmp_path)) == 800


@pytest.mark.parametrize(("op", "fields", "message"), [
    ("send", {"topic": TOPIC, "partition": "0", "value": "v", "acks": "all"}, "'partition' is \"0\", expected int"),
    ("send", {"topic": TOPIC, "partition": 0, "value": "v", "acks": "-1"}, "'acks' is '-1'"),
    ("ack", {"topic": TOPIC, "partition": 0, "value": "v", "acks": "all"}, "the ack event lacks 'offset'"),
    ("read", {"topic": TOPIC, "partition": 0, "offset": True, "value": "v", "leader_epoch": 1}, "expected int"),
    ("send", {"time": 1.0, "topic": TOPIC, "partition": 0, "value": "v", "acks": "all"}, "stamps time"),
    ("send", {"topic": TOPIC, "partition": 0, "value": "v", "acks": "all", "leader_epoch": "3"},
     "'leader_epoch' is \"3\", expected int"),  # an optional field, checked when present
    ("read", {"topic": TOPIC, "partition": 0, "offset": 0, "value": "v", "leader_epoch": 1, "isolation": "dirty"},
     "'isolation' is 'dirty', expected one of 'read_committed', 'read_uncommitted'"),
    ("txn", {"txn": 0, "outcome": "committed", "error": None}, "'outcome' is 'committed'"),
    ("txn", {"txn": 0, "outcome": "commit"}, "the txn event lacks 'error'"),
    ("assigned", {"topic": TOPIC, "partitions": [0, "1"]}, "'partitions' must be a list of integers"),
    ("assigned", {"topic": TOPIC, "partitions": 0}, "'partitions' is 0, expected list"),
    ("revoked", {"topic": TOPIC, "partitions": [0], "how": "fenced"}, "'how' is 'fenced'"),
    ("member", {"group": "g", "phase": "start", "protocol": "consumer"}, "the member event lacks 'instance'"),
])
def test_a_writer_refuses_an_event_the_format_does_not_allow(tmp_path: Path, op: str, fields: dict[str, Any],
                                                              message: str) -> None:
    with HistoryWriter(tmp_path, "producer") as writer, pytest.raises(ValueError, match=message):
        writer.record(op, **fields)


def test_a_malformed_line_is_named_by_file_and_line(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path, "producer") as writer:
        writer.record("send", topic=TOPIC, partition=0, value="v", acks="all")
    with (tmp_path / "producer.jsonl").open("a") as file:
        file.write('{"time": 2.0, "client": "producer", "op": "send", "topic": "t"\n')
    with pytest.raises(HistoryError, match=r"producer\.jsonl:2: .*delimiter"):
        read_history(tmp_path)


# --- the invariants


def test_a_clean_history_breaks_no_invariant(drill: Drill) -> None:
    result = drill.check()
    assert result.passed
    assert [invariant.name for invariant in result.invariants] == INVARIANTS
    assert all(invariant.count == 0 and invariant.examples == [] for invariant in result.invariants)
    assert result.invariant("replicas_consistent").note == "no replica logs"
    figures = result.figures
    assert (figures["sent"], figures["acked"], figures["failed"], figures["unknown"]) == (8, 8, 0, 0)
    assert (figures["read"], figures["final_read"], figures["faults_applied"]) == (16, 8, 1)
    assert (figures["truncations_reported"], figures["truncations_detected"], figures["acks1_lost"]) == (0, 0, 0)


def test_an_acknowledged_record_missing_from_the_final_log_is_lost(drill: Drill) -> None:
    drill.produce(0, "p0-5", 5)
    drill.produce(0, "p0-6", None, error="REQUEST_TIMED_OUT")  # not acknowledged: may be missing
    result = drill.check()
    assert failed(result) == {"lost": 1}
    (example,) = result.invariant("lost").examples
    assert "t-0 'p0-5': acked at offset 5 (acks=all) to producer at +" in example
    assert result.figures["failed"] == 1


def test_a_lost_acks1_record_fails_unless_allowed_and_its_reused_offset_is_then_no_anomaly(drill: Drill) -> None:
    drill.produce(0, "p0-5", 5, acks="1")  # the leader acknowledged it alone, then lost it
    drill.produce(0, "p0-6", 5, acks="1")  # the new leader gave its offset to the next record
    drill.read("reader", 0, 5, "p0-6")
    strict = drill.check()
    assert failed(strict) == {"lost": 1, "inconsistent_offsets": 1, "non_monotonic": 1}
    assert strict.figures["acks1_lost"] == 1
    allowed = check_directory(drill.directory, allow_acks1_loss=True)
    assert allowed.passed
    assert allowed.figures["acks1_lost"] == 1
    assert "acks=1 losses allowed" in allowed.invariant("lost").note


def test_a_value_read_back_twice_is_duplicated(drill: Drill) -> None:
    drill.read("reader", 0, 5, "p0-2")  # at a second offset
    drill.read("reader", 1, 3, "p0-4")  # in a partition it was never sent to
    result = drill.check()
    assert failed(result) == {"duplicated": 2}
    at_two_offsets, in_two_partitions = result.invariant("duplicated").examples
    assert at_two_offsets.startswith("t-0 'p0-2': the final reader (reader) read it at offsets 2, 5 (first at +")
    assert in_two_partitions == "t 'p0-4': the final reader (reader) read it in partitions 0, 1, never sent to 1"


def test_two_values_at_one_offset_are_inconsistent(drill: Drill) -> None:
    drill.read("other-consumer", 0, 3, "p0-9")
    result = drill.check()
    assert failed(result) == {"inconsistent_offsets": 1, "undetected_truncation": 1}
    (example,) = result.invariant("inconsistent_offsets").examples
    assert example.startswith("t-0 offset 3: 'p0-3' acked to producer at +")
    assert "'p0-9' read by other-consumer at +" in example


def test_an_acknowledged_offset_holding_another_value_in_the_final_log_is_inconsistent(tmp_path: Path) -> None:
    history = Drill(tmp_path)
    history.produce(0, "p0-0", 0)
    history.produce(0, "p0-1", 1)
    history.read("reader", 0, 0, "p0-0")
    history.read("reader", 0, 1, "p0-1")
    history.read("reader", 0, 2, "p0-1")  # where the acknowledged record now sits
    history.produce(0, "p0-x", 2)
    result = history.check()
    assert failed(result) == {"inconsistent_offsets": 1, "lost": 1, "duplicated": 1}
    (example,) = result.invariant("inconsistent_offsets").examples
    assert example.startswith("t-0 offset 2: 'p0-1' read by reader at +")
    assert "'p0-x' acked to producer at +" in example


def test_a_producer_acknowledged_at_a_lower_offset_than_an_earlier_send_is_non_monotonic(drill: Drill) -> None:
    for value in ("p0-5", "p0-6"):
        drill("producer").record("send", topic=TOPIC, partition=0, value=value, acks="all")
    for value, offset in (("p0-6", 5), ("p0-5", 6)):  # acks in the other order are fine; offsets are not
        drill("producer").record("ack", topic=TOPIC, partition=0, value=value, offset=offset, error=None, acks="all")
        drill.read("reader", 0, offset, value)
    result = drill.check()
    assert failed(result) == {"non_monotonic": 1}
    (example,) = result.invariant("non_monotonic").examples
    assert example.startswith("producer t-0: 'p0-6' acked at offset 5 (+")
    assert example.endswith("), sent after 'p0-5' acked at offset 6")


def test_a_consumer_going_back_is_a_nonmonotonic_poll_unless_it_reported_a_truncation(drill: Drill) -> None:
    drill.read("consumer", 0, 2, "p0-2")
    result = drill.check()
    assert failed(result) == {"nonmonotonic_poll": 1}
    (example,) = result.invariant("nonmonotonic_poll").examples
    assert example.startswith("consumer t-0: read offset 2 ('p0-2') at +")
    assert ", after offset 4 at +" in example and example.endswith(", in one assignment")

    drill.close()
    (drill.directory / "consumer.jsonl").write_text("")
    for offset in (0, 1, 2):
        drill.read("consumer", 0, offset, f"p0-{offset}")
    drill.truncation("consumer", 0, 1)
    drill.read("consumer", 0, 1, "p0-1")
    drill.read("consumer", 0, 2, "p0-2")
    assert drill.check().passed

    drill.truncation("consumer", 0, 2)
    drill.read("consumer", 0, 1, "p0-1")  # back past the truncation it reported
    (example,) = drill.check().invariant("nonmonotonic_poll").examples
    assert ", after its truncation to offset 2 at +" in example


def test_a_brokers_leader_epoch_going_back_is_an_epoch_regression(drill: Drill) -> None:
    drill.metadata(broker=1, epoch=1)  # broker 1 said 2 before
    drill.metadata(broker=2, epoch=1)  # another broker that lags is no regression
    result = drill.check()
    assert failed(result) == {"epoch_regression": 1}
    (example,) = result.invariant("epoch_regression").examples
    assert example.startswith("t-0 from broker 1 to poller: leader epoch 2 (leader 1) at +")
    assert ", then 1 (leader 1) at +" in example


def test_latest_going_back_across_leaders_is_a_latest_regression(drill: Drill) -> None:
    drill.latest(broker=2, offset=None, error="NOT_LEADER_OR_FOLLOWER")  # errors do not count
    drill.latest(broker=2, offset=4)
    result = drill.check()
    assert failed(result) == {"latest_regression": 1}
    (example,) = result.invariant("latest_regression").examples
    assert example.startswith("t-0 to poller: LATEST 5 from broker 1 at +")
    assert ", then 4 from broker 2 at +" in example


def test_latest_going_back_is_counted_not_failed_where_the_drill_elects_uncleanly(drill: Drill) -> None:
    drill.latest(broker=2, offset=4)
    result = drill.check(allow_unclean=True)
    regression = result.invariant("latest_regression")
    assert result.passed and regression.count == 1 and "unclean elections allowed" in regression.note


def test_a_replaced_read_is_an_undetected_truncation_until_its_consumer_reports_one(tmp_path: Path) -> None:
    history = Drill(tmp_path)
    history.truncation("consumer", 0, 0)  # before the reads: it covers none of them
    for offset, value in enumerate(["p0-0", "old-1", "old-2", "p0-3"]):
        history.read("consumer", 0, offset, value)
    for offset, value in enumerate(["p0-0", "p0-1"]):
        history.read("reader", 0, offset, value)
    history.read("reader", 0, 3, "p0-3")  # offset 2 is gone from the final log
    result = history.check()
    assert failed(result) == {"undetected_truncation": 2, "inconsistent_offsets": 1}
    assert [example.split(" at +")[0] for example in result.invariant("undetected_truncation").examples] == [
        "t-0 offset 1: consumer read 'old-1'", "t-0 offset 2: consumer read 'old-2'"]
    assert "the final log has 'p0-1' there, and consumer reported no truncation at or below 1 after it" in (
        result.invariant("undetected_truncation").examples[0])
    assert "the final log has no record there" in result.invariant("undetected_truncation").examples[1]

    history.truncation("consumer", 0, 1)
    reported = history.check()
    assert reported.passed
    assert (reported.figures["truncations_detected"], reported.figures["truncations_reported"]) == (2, 2)


BATCHES = [[0, 4, 1, 111], [5, 9, 2, 222], [10, 12, 2, 333]]
CHECKPOINT = [[1, 0], [2, 5]]


def test_replicas_differing_below_the_high_watermark_are_inconsistent(drill: Drill) -> None:
    drill.replica_log(0, 13, BATCHES, CHECKPOINT)
    drill.replica_log(1, 10, [BATCHES[0], [5, 9, 2, 999]], [[1, 0], [3, 5]])
    drill.replica_log(2, 10, BATCHES[:2], CHECKPOINT)
    result = drill.check()
    assert failed(result) == {"replicas_consistent": 2}
    assert result.invariant("replicas_consistent").examples == [
        "t-0 below high watermark 10: batch #1: broker 0 has [5, 9, 2, 222], broker 1 [5, 9, 2, 999] "
        "([base, last, epoch, crc])",
        "t-0 epoch checkpoint below high watermark 10: broker 0 has [[1, 0], [2, 5]], broker 1 [[1, 0], [3, 5]]",
    ]


def test_replicas_may_differ_at_and_above_the_high_watermark(drill: Drill) -> None:
    drill.replica_log(0, 10, BATCHES, [*CHECKPOINT, [3, 10]])
    drill.replica_log(1, 10, [*BATCHES[:2], [10, 11, 3, 444]], [*CHECKPOINT, [4, 10]])
    drill.replica_log(2, 12, BATCHES[:2], CHECKPOINT)
    result = drill.check()
    assert result.passed
    assert result.invariant("replicas_consistent").note.startswith("replicas' batches")


def test_an_acknowledged_produce_written_in_another_epoch_than_it_carried_is_epoch_fenced(tmp_path: Path) -> None:
    """KIP-359: a Produce carrying epoch 2 must not be acknowledged by a leader writing in epoch 1; refusals
    are counted as figures, and a send that carried no epoch (-1, or no field) is not judged."""
    history = Drill(tmp_path / "history")
    for offset, (carried, written) in enumerate([(1, 1), (2, 1), (-1, 1)]):
        value = f"e{offset}"
        history("probe").record("send", topic=TOPIC, partition=0, value=value, acks="all", leader_epoch=carried,
                                broker=0, probe="kip359")
        history("probe").record("ack", topic=TOPIC, partition=0, value=value, offset=offset, error=None, acks="all")
        history("reader").record("read", topic=TOPIC, partition=0, offset=offset, value=value, leader_epoch=written)
    history("probe").record("send", topic=TOPIC, partition=0, value="refused", acks="all", leader_epoch=3)
    history("probe").record("ack", topic=TOPIC, partition=0, value="refused", offset=None,
                            error="UNKNOWN_LEADER_EPOCH", acks="all")
    result = history.check()
    assert failed(result) == {"epoch_fenced_produce": 1}
    (example,) = result.invariant("epoch_fenced_produce").examples
    assert "t-0 'e1': sent with leader epoch 2" in example and "written in epoch 1" in example
    assert (result.figures["produce_epoch_refused"], result.figures["produce_not_leader"]) == (1, 0)


def test_sends_without_outcome_or_record_are_unseen_and_fail_nothing(drill: Drill) -> None:
    drill("producer").record("send", topic=TOPIC, partition=0, value="p0-5", acks="all")
    drill("producer").record("send", topic=TOPIC, partition=0, value="p0-6", acks="all")
    drill.read("reader", 0, 5, "p0-6")  # its outcome is unknown, but it is in the final log
    result = drill.check()
    assert result.passed
    unseen = result.invariant("unseen")
    assert (unseen.passed, unseen.count, result.figures["unknown"]) == (True, 1, 2)
    assert unseen.examples[0].startswith("t-0 'p0-5': sent by producer at +")


class Transactions:
    """A transactional producer's history: its transactions, and read_committed reads of their records."""

    def __init__(self, directory: Path) -> None:
        self.drill = Drill(directory)
        self.next_offset = 0

    def transaction(self, txn: int, outcome: str, records: int = 3) -> list[tuple[str, int]]:
        """Sends `records` values in transaction `txn`, ends it with `outcome`; (value, offset) of each."""
        written = []
        for n in range(records):
            value = f"t{txn}-{n}"
            self.drill("producer").record("send", topic=TOPIC, partition=0, value=value, acks="all", txn=txn)
            written.append((value, self.next_offset))
            self.next_offset += 1
        self.next_offset += 1  # the transaction's marker
        self.drill("producer").record("txn", txn=txn, outcome=outcome,
                                      error=None if outcome == "commit" else "on purpose")
        for value, offset in written:
            if outcome != "unknown":
                self.drill("producer").record("ack", topic=TOPIC, partition=0, value=value,
                                              offset=offset if outcome == "commit" else None,
                                              error=None if outcome == "commit" else "transaction aborted",
                                              acks="all")
        return written

    def read(self, client: str, records: list[tuple[str, int]], isolation: str = "read_committed") -> None:
        for value, offset in records:
            self.drill(client).record("read", topic=TOPIC, partition=0, offset=offset, value=value, leader_epoch=1,
                                      isolation=isolation)


def test_committed_transactions_read_whole_and_aborted_ones_never_break_nothing(tmp_path: Path) -> None:
    history = Transactions(tmp_path / "history")
    committed, aborted, unknown = (history.transaction(0, "commit"), history.transaction(1, "abort"),
                                   history.transaction(2, "unknown"))
    history.read("consumer", committed)
    history.read("reader", committed + unknown)  # an unknown outcome: whole is fine (so is nothing)
    history.read("dirty-consumer", aborted, isolation="read_uncommitted")  # allowed to see them
    result = history.drill.check()
    assert result.passed, failed(result)
    assert (result.figures["transactions_commit"], result.figures["transactions_abort"],
            result.figures["transactions_unknown"]) == (1, 1, 1)
    assert result.figures["acked"] == 3 and result.figures["failed"] == 3


def test_a_read_committed_read_of_an_aborted_record_is_an_aborted_read(tmp_path: Path) -> None:
    history = Transactions(tmp_path / "history")
    committed, aborted = history.transaction(0, "commit"), history.transaction(1, "abort")
    history.read("consumer", committed + aborted[:1])
    history.read("reader", committed)
    result = history.drill.check()
    assert failed(result) == {"aborted_read": 1}
    (example,) = result.invariant("aborted_read").examples
    assert example.startswith("t-0 offset 4: consumer read 't1-0' at +")
    assert "of transaction 1 of producer, aborted at +" in example


def test_a_transaction_partly_in_the_final_log_is_partial_whatever_the_producer_learned(tmp_path: Path) -> None:
    history = Transactions(tmp_path / "history")
    committed, unknown = history.transaction(0, "commit"), history.transaction(1, "unknown")
    history.read("reader", committed + unknown[:2])
    result = history.drill.check()
    assert failed(result) == {"partial_transaction": 1}
    assert result.invariant("partial_transaction").examples == [
        "transaction 1 of producer (unknown): 2 of its 3 records in the final log; missing t-0 't1-2'"]


def test_histories_without_transactions_say_so_and_pass_them(drill: Drill) -> None:
    result = drill.check()
    assert result.invariant("aborted_read").note.endswith("(no transactions)")
    assert result.invariant("partial_transaction").note.endswith("(no transactions)")
    assert "transactions_commit" not in result.figures


# --- consumer groups: polls within an assignment, and who holds a partition

GROUP_LOG = {0: range(10), 1: [0, 1, 2, 4, 5]}  # the final log's offsets; partition 1 has none at 3 (a marker)
Step = tuple[Any, ...]


def group_history(directory: Path, steps: list[Step]) -> Drill:
    """The final log of GROUP_LOG, then `steps` in order, each one event of a member (times rise in step order):
    ("start", client[, group]), ("end", client), ("assign", client, partitions), ("revoke" | "lost", client,
    partitions), ("read", client, partition, offset), ("truncation", client, partition, offset)."""
    history = Drill(directory)
    for partition, offsets in GROUP_LOG.items():
        for offset in offsets:
            history.read("reader", partition, offset, f"p{partition}-{offset}")
    for kind, client, *rest in steps:
        writer = history(client)
        if kind == "start":
            writer.record("member", group=rest[0] if rest else "g", phase="start", instance=None, protocol="consumer")
        elif kind == "end":
            writer.record("member", group="g", phase="end", instance=None, protocol="consumer")
        elif kind == "assign":
            writer.record("assigned", topic=TOPIC, partitions=rest[0])
        elif kind in ("revoke", "lost"):
            writer.record("revoked", topic=TOPIC, partitions=rest[0], how=kind)
        elif kind == "read":
            partition, offset = rest
            history.read(client, partition, offset, f"p{partition}-{offset}")
        else:
            history.truncation(client, *rest)
    return history


def reads(client: str, partition: int, *offsets: int) -> list[Step]:
    return [("read", client, partition, offset) for offset in offsets]


def group_failed(result: CheckResult) -> dict[str, int]:
    """What failed but unconsumed (the tables' members read a few records of the final log, not all)."""
    return {name: count for name, count in failed(result).items() if name != "unconsumed"}


START = [("start", "a"), ("start", "b")]

GROUP_CASES: list[tuple[str, list[Step], dict[str, int]]] = [
    # protocols as they should behave: nothing to report
    ("classic eager: everything revoked, then the new assignment; the new owner re-reads from the commit",
     [*START, ("assign", "a", [0, 1]), *reads("a", 0, 0, 1, 2), *reads("a", 1, 0, 1), ("revoke", "a", [0, 1]),
      ("assign", "a", [0]), ("assign", "b", [1]), *reads("a", 0, 2, 3), *reads("b", 1, 1, 2, 4)], {}),
    ("classic cooperative: only the partition that moves is revoked; the other's polls go on",
     [*START, ("assign", "a", [0, 1]), *reads("a", 0, 0, 1), ("revoke", "a", [1]), ("assign", "b", [1]),
      *reads("a", 0, 2, 3), *reads("b", 1, 0, 1)], {}),
    ("consumer (KIP-848): lost when fenced, then the partition moves", [
        *START, ("assign", "a", [0]), *reads("a", 0, 0, 1), ("lost", "a", [0]), ("assign", "b", [0]),
        *reads("b", 0, 0, 1, 2)], {}),
    ("a member that closed holds nothing after its end", [
        *START, ("assign", "a", [0]), ("end", "a"), ("assign", "b", [0])], {}),
    ("a static member's new instance is the same client: it holds again what it held",
     [("start", "s"), ("assign", "s", [0]), ("end", "s"), ("start", "s"), ("assign", "s", [0])], {}),
    ("members of two groups may both hold a partition", [
        ("start", "a", "g1"), ("start", "b", "g2"), ("assign", "a", [0]), ("assign", "b", [0])], {}),
    ("the first read of an assignment may start anywhere", [*START, ("assign", "a", [0]), *reads("a", 0, 4, 5)], {}),
    ("offsets the final log does not hold (markers, aborted records) are no skip", [
        *START, ("assign", "a", [1]), *reads("a", 1, 1, 2, 4, 5)], {}),
    ("a reported truncation is a seek: the next read is due at its offset", [
        *START, ("assign", "a", [0]), *reads("a", 0, 0, 1, 2), ("truncation", "a", 0, 1), *reads("a", 0, 1, 2)], {}),
    # anomalies
    ("two live members holding one partition", [
        *START, ("assign", "a", [0, 1]), ("assign", "b", [1])], {"owned_twice": 1}),
    ("a revocation of another partition does not end a holding", [
        *START, ("assign", "a", [0, 1]), ("revoke", "a", [1]), ("assign", "b", [0, 1])], {"owned_twice": 1}),
    ("a skipped offset within one assignment", [
        *START, ("assign", "a", [0]), *reads("a", 0, 0, 1, 3, 4, 7)], {"poll_skip": 2}),
    ("a skip after a seek to a reported truncation", [
        *START, ("assign", "a", [0]), *reads("a", 0, 0, 1, 2), ("truncation", "a", 0, 1), *reads("a", 0, 2)],
     {"poll_skip": 1}),
    ("polls going back, or repeating an offset, within one assignment", [
        *START, ("assign", "a", [0]), *reads("a", 0, 0, 1, 2, 1, 1)], {"nonmonotonic_poll": 2}),
    ("below a seek to a reported truncation", [
        *START, ("assign", "a", [0]), *reads("a", 0, 0, 1, 2), ("truncation", "a", 0, 2), *reads("a", 0, 1)],
     {"nonmonotonic_poll": 1}),
    ("polls going back or skipping across a new assignment are no anomaly", [
        *START, ("assign", "a", [0]), *reads("a", 0, 0, 1, 2, 3), ("revoke", "a", [0]), ("assign", "a", [0]),
        *reads("a", 0, 1), ("lost", "a", [0]), ("assign", "a", [0]), *reads("a", 0, 5), ("end", "a"),
        ("start", "a"), ("assign", "a", [0]), *reads("a", 0, 0)], {}),
    ("a consumer with partitions assigned by hand has one assignment of each", [*reads("c", 0, 0, 1, 3, 2)],
     {"poll_skip": 1, "nonmonotonic_poll": 1}),
]


@pytest.mark.parametrize(("steps", "anomalies"), [case[1:] for case in GROUP_CASES],
                         ids=[case[0] for case in GROUP_CASES])
def test_consumer_group_rules_on_synthetic_histories(tmp_path: Path, steps: list[Step],
                                                     anomalies: dict[str, int]) -> None:
    assert group_failed(group_history(tmp_path, steps).check()) == anomalies


def test_an_overlap_names_both_members_and_when_each_held_the_partition(tmp_path: Path) -> None:
    history = group_history(tmp_path, [*START, ("start", "c"), ("assign", "a", [0]), ("assign", "b", [0]),
                                       ("lost", "a", [0]), ("assign", "c", [1]), ("assign", "b", [1]), ("end", "b")])
    result = history.check()
    assert group_failed(result) == {"owned_twice": 2}
    first, second = result.invariant("owned_twice").examples
    assert first.startswith("g t-0: a held it from +") and " to lost at +" in first
    assert ", b from +" in first and " to its end at +" in first and "both for 0.0" in first and first.endswith(" s")
    assert second.startswith("g t-1: c held it from +") and "to the end of the history, b from +" in second
    figures = result.figures
    assert (figures["members"], figures["member_starts"], figures["assignments"], figures["revocations"],
            figures["assignments_lost"], figures["member_reads"]) == (3, 3, 4, 0, 1, 0)


def test_a_record_no_member_of_a_group_read_is_unconsumed(tmp_path: Path) -> None:
    everything = [read for partition, offsets in GROUP_LOG.items() for read in reads("a", partition, *offsets)]
    clean = group_history(tmp_path / "clean", [*START, ("assign", "a", [0, 1]), *everything]).check()
    assert clean.passed and clean.invariant("unconsumed").count == 0
    # group g2's member read all but two records; a client outside any group reads none and is not judged
    history = group_history(tmp_path / "two", [*START, ("start", "c", "g2"), ("assign", "a", [0, 1]), *everything,
                                               ("assign", "c", [0]), *reads("c", 0, *range(8)),
                                               ("assign", "c", [1]), *reads("c", 1, *GROUP_LOG[1]),
                                               *reads("outsider", 0, 0)])
    result = history.check()
    assert failed(result) == {"unconsumed": 2}
    assert result.invariant("unconsumed").examples == ["g2 t-0 offset 8 ('p0-8'): read by none of its 1 members",
                                                       "g2 t-0 offset 9 ('p0-9'): read by none of its 1 members"]
    assert result.invariant("unconsumed").note.startswith("every record of the final log was read by a member")


def test_clients_that_record_no_member_event_are_one_group(tmp_path: Path) -> None:
    result = group_history(tmp_path, [("assign", "a", [0]), ("assign", "b", [0])]).check()
    assert failed(result) == {"owned_twice": 1}
    (example,) = result.invariant("owned_twice").examples
    assert example.startswith("the group t-0: a held it from +")
    assert example.endswith("to the end of the history: both for the rest of the history")
    assert result.figures["members"] == 0 and result.figures["assignments"] == 2


def test_a_poll_skip_names_the_consumer_the_offsets_and_what_it_skipped(tmp_path: Path) -> None:
    history = group_history(tmp_path, [*START, ("assign", "a", [0]), *reads("a", 0, 0, 4), ("assign", "b", [1]),
                                       *reads("b", 1, 1, 4)])
    result = history.check()
    assert group_failed(result) == {"poll_skip": 2}
    four, one = result.invariant("poll_skip").examples
    assert four.startswith("a t-0: read offset 4 ('p0-4') at +") and ", after offset 0 at +" in four
    assert four.endswith(", in one assignment: skipped 3 offsets the final log holds (1..3)")
    assert one.endswith("skipped 1 offset the final log holds (2)")
    assert "poll-skip" in result.invariant("poll_skip").note


def test_a_read_committed_consumer_skipping_an_aborted_transaction_is_no_poll_skip(tmp_path: Path) -> None:
    """A final log read read_uncommitted holds the aborted records; a read_committed consumer never sees them."""
    history = Transactions(tmp_path / "history")
    committed, aborted, after = (history.transaction(0, "commit"), history.transaction(1, "abort"),
                                 history.transaction(2, "commit"))
    history.read("reader", committed + aborted + after, isolation="read_uncommitted")
    history.read("consumer", committed + after)
    history.read("dirty-consumer", committed + after, isolation="read_uncommitted")
    result = history.drill.check()
    assert failed(result) == {"poll_skip": 1}
    (example,) = result.invariant("poll_skip").examples
    assert example.startswith("dirty-consumer t-0: read offset 8 ") and example.endswith("(4..6)")


# --- the command


# --- share groups (KIP-932)

SHARE_LIMIT = 4
SHARE_LOG = 5  # records of t-0 in a share drill's final log


class ShareDrill(Drill):
    """A share group "s" reading t-0 (SHARE_LOG records, produced and read back), delivery count limit 4; each
    step below is an event of a member (its own client) or of the group's lives."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self("share-group").record("share_group", group="s", topic=TOPIC, delivery_count_limit=SHARE_LIMIT,
                                   record_lock_duration_ms=3000)
        for offset in range(SHARE_LOG):
            self.produce(0, f"p0-{offset}", offset)

    def life(self, member: str, phase: str, detail: str | None = None) -> None:
        self("share-group").record("share_member", group="s", member=member, phase=phase, detail=detail)

    def deliver(self, member: str, offset: int, count: int) -> None:
        self(member).record("share_acquire", group="s", topic=TOPIC, partition=0, offset=offset,
                            value=f"p0-{offset}", delivery_count=count, leader_epoch=1)

    def ack(self, member: str, offset: int, ack: str, error: str | None = None, sent: float | None = None) -> None:
        self(member).record("share_ack", group="s", topic=TOPIC, partition=0, offset=offset, ack=ack, error=error,
                            **({} if sent is None else {"sent": sent}))

    def check(self, **options: Any) -> CheckResult:
        for offset in range(SHARE_LOG):
            self.read("reader", 0, offset, f"p0-{offset}")
        return super().check(**options)


def clean_share_drill(directory: Path) -> ShareDrill:
    """a accepts 0 and 1; b releases 2, which a then accepts at count 2; b rejects 3; 4 is poison: released at
    every delivery up to the limit (the last by c, whose ack outcome never came: archived all the same)."""
    drill = ShareDrill(directory)
    for member in "abc":
        drill.life(member, "start")
    for offset in (0, 1):
        drill.deliver("a", offset, 1)
        drill.ack("a", offset, "accept")
    drill.deliver("b", 2, 1)
    drill.ack("b", 2, "release")
    drill.deliver("a", 2, 2)
    drill.ack("a", 2, "accept")
    drill.deliver("b", 3, 1)
    drill.ack("b", 3, "reject")
    for count, member in zip(range(1, SHARE_LIMIT), "abab", strict=False):
        drill.deliver(member, 4, count)
        drill.ack(member, 4, "release")
    drill.deliver("c", 4, SHARE_LIMIT)
    return drill


def share_failed(result: CheckResult) -> dict[str, int]:
    return {name: count for name, count in failed(result).items() if name.startswith("share_")}


def test_a_clean_share_group_history_breaks_no_invariant_and_counts_what_happened(tmp_path: Path) -> None:
    result = clean_share_drill(tmp_path).check()
    assert result.passed, failed(result)
    figures = result.figures
    assert (figures["share_records"], figures["share_deliveries"], figures["share_redeliveries"]) == (5, 9, 4)
    assert (figures["share_accepted"], figures["share_rejected"], figures["share_archived"]) == (3, 1, 1)
    assert (figures["share_released"], figures["share_ack_failed"], figures["share_acks_skipped"]) == (4, 0, 0)
    assert figures["share_member_starts"] == 3


def test_histories_without_a_share_group_say_so_and_pass_its_invariants(drill: Drill) -> None:
    result = drill.check()
    assert all(result.invariant(name).note.endswith("(no share group)") for name in INVARIANTS
               if name.startswith("share_"))
    assert "share_records" not in result.figures


def test_a_record_finished_again_after_its_acceptance_is_accepted_twice(tmp_path: Path) -> None:
    """A new leader without the share-partition's state delivers an accepted record again at count 1 (and a
    broker that acquired an accepted record again would at count 2): both ACCEPTs succeed."""
    drill = clean_share_drill(tmp_path)
    drill.deliver("b", 0, 1)  # the state lost: count 1 again, while a's session lives
    drill.ack("b", 0, "accept")
    drill.deliver("c", 1, 2)  # acquired again after a's ACCEPT of it succeeded
    drill.ack("c", 1, "reject")
    result = drill.check()
    assert share_failed(result) == {"share_accepted_twice": 2, "share_locked_twice": 1}
    zero, one = result.invariant("share_accepted_twice").examples
    assert zero.startswith("s t-0 offset 0: ACCEPT by a of its delivery 1 succeeded at +")
    assert "; ACCEPT by b of its delivery 1 (delivered at +" in zero
    assert one.startswith("s t-0 offset 1: ACCEPT by a of its delivery 1") and "REJECT by c of its delivery 2" in one


def test_a_late_acceptance_skipped_below_the_start_is_not_accepted_twice(tmp_path: Path) -> None:
    """a stalls holding record 0 past its lock; b gets it at count 2 and accepts it; a's ACCEPT, answered after
    b's was sent, is skipped by the broker (below the start) and answered NONE: not a second acceptance."""
    drill = ShareDrill(tmp_path)
    drill.deliver("a", 0, 1)
    drill.deliver("b", 0, 2)
    drill.ack("b", 0, "accept", sent=time.time())
    drill.ack("a", 0, "accept")
    for offset in range(1, SHARE_LOG):
        drill.deliver("b", offset, 1)
        drill.ack("b", offset, "accept")
    result = drill.check()
    assert result.passed, failed(result)
    assert (result.figures["share_accepted"], result.figures["share_acks_skipped"]) == (SHARE_LOG, 1)


def test_a_record_neither_finished_nor_delivered_up_to_the_limit_is_share_lost(tmp_path: Path) -> None:
    drill = ShareDrill(tmp_path)
    drill.deliver("a", 0, 1)
    drill.ack("a", 0, "accept")
    drill.deliver("a", 1, 1)
    drill.ack("a", 1, "accept", error="INVALID_RECORD_STATE")  # failed: the record may come back, and did not
    drill.deliver("a", 2, 3)
    drill.ack("a", 2, "release")  # released below the limit: never delivered again
    drill.deliver("a", 3, SHARE_LIMIT)  # archived at the limit (any outcome)
    result = drill.check()
    assert share_failed(result) == {"share_lost": 3}
    assert result.invariant("share_lost").examples == [
        f"s t-0 offset 1 ('p0-1'): delivered 1 times, last with count 1 to a at {example_time(result, 1)}, "
        "never finished",
        f"s t-0 offset 2 ('p0-2'): delivered 1 times, last with count 3 to a at {example_time(result, 2)}, "
        "never finished",
        "s t-0 offset 4 ('p0-4'): never delivered"]
    assert result.figures["share_ack_failed"] == 1 and result.figures["share_archived"] == 1


def example_time(result: CheckResult, offset: int) -> str:
    """The time of the lost record's last delivery, as the example shows it."""
    (example,) = [line for line in result.invariant("share_lost").examples if f"offset {offset} " in line]
    return example.split(" at ")[1].split(",")[0]


def test_one_delivery_count_delivered_twice_is_locked_twice_unless_its_holders_session_ended(
        tmp_path: Path) -> None:
    drill = clean_share_drill(tmp_path)
    drill.deliver("c", 2, 2)  # a holds record 2 at count 2 (it accepted it since): one lock given twice
    drill.deliver("a", 3, 1)  # b held count 1 of record 3 and still lives
    drill.life("c", "end", "SIGKILL")  # c ends holding record 4 at the limit: the broker gives its count back
    drill.deliver("a", 4, SHARE_LIMIT)
    drill.ack("a", 4, "release")
    result = drill.check()
    assert share_failed(result) == {"share_locked_twice": 2}
    two, three = result.invariant("share_locked_twice").examples
    assert two.startswith("s t-0 offset 2: count 2 to c at +") and ", and to a at +" in two
    assert two.endswith(", whose session had not ended")
    assert three.startswith("s t-0 offset 3: count 1 to a at +") and ", and to b at +" in three


def test_a_delivery_count_going_back_or_past_the_limit_is_a_share_delivery_count_failure(tmp_path: Path) -> None:
    drill = clean_share_drill(tmp_path)
    drill.deliver("b", 2, 1)  # after a's delivery at count 2: the count went back (a leader without the state)
    drill.ack("b", 2, "release", error="INVALID_RECORD_STATE")
    drill.deliver("a", 4, SHARE_LIMIT + 1)  # past the limit: the record should have been archived
    drill.ack("a", 4, "release", error="INVALID_RECORD_STATE")
    result = drill.check()
    assert share_failed(result) == {"share_delivery_count": 2, "share_locked_twice": 1}
    back, past = result.invariant("share_delivery_count").examples
    assert back.startswith("s t-0 offset 2: count 1 to b at +") and ", after count 2 to a at +" in back
    assert past.startswith("s t-0 offset 4: count 5 to a at +") and past.endswith(", above the delivery count limit 4")


def test_main_exits_0_when_everything_holds_and_1_with_the_examples_when_not(
        drill: Drill, capsys: pytest.CaptureFixture[str]) -> None:
    drill.close()
    assert checker.main([str(drill.directory)]) == 0
    assert "verdict: PASS" in capsys.readouterr().out
    drill.produce(0, "p0-5", 5)
    drill.close()
    assert checker.main([str(drill.directory)]) == 1
    out = capsys.readouterr().out
    assert "  FAIL  lost" in out and "FAIL lost (1):\n  t-0 'p0-5': acked at offset 5" in out
    assert "verdict: FAIL (lost)" in out
    assert checker.main([str(drill.directory), "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["passed"] is False and document["figures"]["acked"] == 9
    assert checker.main([str(drill.directory), "--final-reader", "consumer"]) == 1  # it never read p0-5 either


def test_main_exits_2_with_one_line_for_a_missing_empty_or_malformed_history(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert checker.main([str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err == f"epoch-broker drill check: {tmp_path / 'missing'}: no such directory\n"
    assert checker.main([str(tmp_path)]) == 2
    assert "no *.jsonl history files" in capsys.readouterr().err
    (tmp_path / "empty.jsonl").write_text("")
    assert checker.main([str(tmp_path)]) == 2
    assert "holds no events" in capsys.readouterr().err
    (tmp_path / "bad.jsonl").write_text('{"time": 1.0, "client": "c", "op": "read"}\n')
    assert checker.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == f"epoch-broker drill check: {tmp_path / 'bad.jsonl'}:1: the read event lacks 'topic'\n"

