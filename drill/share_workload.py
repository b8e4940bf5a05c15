"""The share-group drill's workload (KIP-932): a share group whose members are processes of their own, so that a
crash is a real SIGKILL of a client holding acquired records.

- `configure`: the share group's configs set with IncrementalAlterConfigs on its GROUP resource (as an operator
  sets them): `share.auto.offset.reset=earliest` (it reads the drill's topic from its start), a short
  `share.record.lock.duration.ms` (LOCK_DURATION_MS, so that a stalled member's locks expire within a drill) and
  a small `share.delivery.count.limit` (DELIVERY_COUNT_LIMIT, so that poison records reach it); recorded as a
  `share_group` event, which the checker reads the limit from.
- `ShareGroup`: the members, started and stopped as the share faults say (drill/nemesis.py's FAULTS): members
  are named share-member-0, 1, ... in the order they start; a crash SIGKILLs one mid-batch (once the last event
  it recorded is a delivery: its records were acquired and never acknowledged, and the broker releases them when
  its connection drops), a stall SIGSTOPs one mid-batch past the lock duration (its locks expire while its
  connection stays, and its acknowledgements then fail), and a replacement starts after a crash. Their lives
  are `share_member` events of client SHARE_GROUP_CLIENT.
- `main` (`python -m epoch_broker.drill.share_workload`): one member. A confluent-kafka ShareConsumer in explicit
  acknowledgement mode; for each batch it polls it records every record as a `share_acquire` (with the delivery
  count its client reports), then acknowledges each record after PROCESS_S of "work" (so that a member holds
  records most of the time), and commits the batch; the acknowledgement commit callback's outcome of each offset
  is a `share_ack` (error null: the broker answered it without error). SIGTERM makes it finish its batch, commit
  and close.

What a member does with a record depends on the record only (its value's number n), so that every member treats
it alike whoever gets it: a poison record (n % POISON_EVERY == POISON_AT) is RELEASEd at every delivery until
the delivery count limit archives it; a record n % REJECT_EVERY == REJECT_AT is REJECTed; a record n %
RELEASE_EVERY == RELEASE_AT is RELEASEd at its first delivery and ACCEPTed after; every other record is ACCEPTed.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from epoch_broker.drill.history import HistoryWriter, read_history

SHARE_GROUP_ID = "drill-share-group"
SHARE_GROUP_CLIENT = "share-group"  # the history file of the members' lives (and the group's configs)
MEMBER_PREFIX = "share-member-"
LOCK_DURATION_MS = 3000
DELIVERY_COUNT_LIMIT = 4
HEARTBEAT_INTERVAL_MS = 1000  # a replacement member is assigned within a second or two
MAX_POLL_RECORDS = 20
PROCESS_S = 0.01  # per record, before its acknowledgement: a member holds records most of the time
POISON_EVERY, POISON_AT = 97, 13
REJECT_EVERY, REJECT_AT = 41, 7
RELEASE_EVERY, RELEASE_AT = 9, 4
COMMIT_TIMEOUT_S = 10.0
MEMBER_STOP_S = 30.0
MID_BATCH_WAIT_S = 5.0  # a crash or stall waits this long at most for its member to hold records
ACK_NAMES = {AcknowledgeType.ACCEPT: "accept", AcknowledgeType.RELEASE: "release", AcknowledgeType.REJECT: "reject"}


def configure(bootstrap: str, topic: str, history: HistoryWriter) -> None:
    """The share group's configs on its GROUP resource, before any member starts; recorded in the history."""
    configs = {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": str(LOCK_DURATION_MS),
               "share.delivery.count.limit": str(DELIVERY_COUNT_LIMIT),
               "share.heartbeat.interval.ms": str(HEARTBEAT_INTERVAL_MS)}
    resource = ConfigResource(ResourceType.GROUP, SHARE_GROUP_ID, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET) for key, value in configs.items()])
    client = AdminClient({"bootstrap.servers": bootstrap})  # held until answered: its handle dies with it
    client.incremental_alter_configs([resource])[resource].result(60)
    history.record("share_group", group=SHARE_GROUP_ID, topic=topic, delivery_count_limit=DELIVERY_COUNT_LIMIT,
                   record_lock_duration_ms=LOCK_DURATION_MS)


def ack_type(value: str, delivery_count: int) -> AcknowledgeType:
    """What every member does with the record `value` ("p<partition>-<n>") at this delivery."""
    n = int(value.rpartition("-")[2])
    if n % POISON_EVERY == POISON_AT:
        return AcknowledgeType.RELEASE
    if n % REJECT_EVERY == REJECT_AT:
        return AcknowledgeType.REJECT
    if n % RELEASE_EVERY == RELEASE_AT and delivery_count <= 1:
        return AcknowledgeType.RELEASE
    return AcknowledgeType.ACCEPT


class ShareGroup:
    """The drill's share group: member processes, started, crashed, stalled and stopped from the drill's thread."""

    def __init__(self, bootstrap: str, topic: str, directory: Path, log: Path) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.directory = directory  # the history directory: each member writes its own file there
        self.log = log  # the members' clients' own logs
        self.history = HistoryWriter(directory, SHARE_GROUP_CLIENT)
        self.members: dict[str, subprocess.Popen[bytes]] = {}  # running (or stalled) ones, oldest first
        self.started = 0
        self.crashed = 0

    def start(self, members: int) -> ShareGroup:
        configure(self.bootstrap, self.topic, self.history)
        for _ in range(members):
            self.join()
        return self

    def next_name(self) -> str:
        return f"{MEMBER_PREFIX}{self.started}"

    def join(self) -> str:
        name = self.next_name()
        self.started += 1
        self.history.record("share_member", group=SHARE_GROUP_ID, member=name, phase="start", detail=None)
        with self.log.open("ab") as log:
            self.members[name] = subprocess.Popen(
                [sys.executable, "-m", "epoch_broker.drill.share_workload", "--bootstrap", self.bootstrap,
                 "--topic", self.topic, "--history", str(self.directory), "--name", name],
                stdout=log, stderr=subprocess.STDOUT)
        return name

    def oldest(self) -> str:
        if not self.members:
            raise RuntimeError(f"share group {SHARE_GROUP_ID} has no member running")
        return next(iter(self.members))

    def holding(self, name: str) -> bool:
        """Is member `name` mid-batch: is the last event it recorded a delivery (acknowledgements are recorded when
        their batch is committed)? Waits for it up to MID_BATCH_WAIT_S; False if it never was."""
        path = self.directory / f"{name}.jsonl"
        deadline = time.monotonic() + MID_BATCH_WAIT_S
        while time.monotonic() < deadline:
            with path.open("rb") as lines:
                lines.seek(max(0, path.stat().st_size - 1024))
                last = lines.read().rstrip(b"\n").rpartition(b"\n")[2]
            if b'"op":"share_acquire"' in last:
                return True
            time.sleep(0.002)
        return False

    def crash(self, name: str) -> None:
        """SIGKILL member `name` mid-batch (as soon as it holds records, within MID_BATCH_WAIT_S): the end of its
        session is recorded first, so that it is never after a delivery the broker made once the connection
        dropped."""
        self.holding(name)
        process = self.members.pop(name)
        self.history.record("share_member", group=SHARE_GROUP_ID, member=name, phase="end", detail="SIGKILL")
        process.kill()
        process.wait()
        self.crashed += 1

    def stall(self, name: str) -> None:
        """SIGSTOP member `name` mid-batch, as a crash."""
        self.holding(name)
        os.kill(self.members[name].pid, signal.SIGSTOP)

    def resume(self, name: str) -> None:
        os.kill(self.members[name].pid, signal.SIGCONT)

    def stop(self) -> None:
        """Every member finishes its batch, commits and closes (SIGTERM); one that does not within MEMBER_STOP_S
        is killed."""
        for process in self.members.values():
            process.send_signal(signal.SIGCONT)
            process.terminate()
        for name, process in list(self.members.items()):
            try:
                process.wait(MEMBER_STOP_S)
                detail = f"closed (exit {process.returncode})"
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                detail = "SIGKILL: not closed in time"
            self.history.record("share_member", group=SHARE_GROUP_ID, member=name, phase="end", detail=detail)
            del self.members[name]
        self.history.close()

    def done(self, ends: dict[int, int]) -> bool:
        """Has every record below `ends` (partition -> high watermark) reached its end: an ACCEPT or REJECT that
        succeeded, or a last delivery at the delivery count limit (its members' histories so far)?"""
        finished: set[tuple[int, int]] = set()
        last: dict[tuple[int, int], int] = {}  # the delivery count of each record's last delivery
        for event in read_history(self.directory):
            if event["op"] not in ("share_acquire", "share_ack") or event["group"] != SHARE_GROUP_ID:
                continue
            key = (event["partition"], event["offset"])
            if event["op"] == "share_acquire":
                last[key] = event["delivery_count"]
            elif event["error"] is None and event["ack"] in ("accept", "reject"):
                finished.add(key)
        finished |= {key for key, count in last.items() if count >= DELIVERY_COUNT_LIMIT}
        return all((partition, offset) in finished for partition, end in ends.items() for offset in range(end))


class _Member:
    """One member's loop, in its own process (see the module docstring)."""

    def __init__(self, bootstrap: str, topic: str, history: HistoryWriter) -> None:
        self.topic = topic
        self.history = history
        self.stopping = False
        self.pending: dict[tuple[int, int], AcknowledgeType] = {}  # (partition, offset) -> acknowledged as
        self.sent = 0.0  # when the commit carrying the pending acknowledgements began
        self.consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": SHARE_GROUP_ID,
                                       "share.acknowledgement.mode": "explicit",
                                       "max.poll.records": MAX_POLL_RECORDS,
                                       "logger": logging.getLogger("share-member")})
        self.consumer.set_acknowledgement_commit_callback(self._committed)
        self.consumer.subscribe([topic])

    def _committed(self, offsets: dict[Any, set[int]], exception: KafkaException | None) -> None:
        for tp, numbers in offsets.items():
            error = exception.args[0].str() if exception is not None else (
                tp.error.str() if getattr(tp, "error", None) is not None else None)
            for offset in sorted(numbers):
                kind = self.pending.pop((tp.partition, offset), None)
                if kind is None:  # an acknowledgement this member did not make: kept, not checked
                    self.history.record("client_error", topic=tp.topic,
                                        detail=f"acknowledgement outcome of unknown offset {tp.partition}:{offset}")
                    continue
                self.history.record("share_ack", group=SHARE_GROUP_ID, topic=tp.topic, partition=tp.partition,
                                    offset=offset, ack=ACK_NAMES[kind], error=error, sent=self.sent)

    def run(self) -> None:
        while not self.stopping:
            try:
                batch = self.consumer.poll(0.5)
            except KafkaException as exc:
                self.history.record("client_error", topic=self.topic, detail=f"poll: {exc}")
                continue
            held: list[tuple[Any, int, int, str, int]] = []  # message, partition, offset, value, delivery count
            for message in batch:
                if (error := message.error()) is not None:
                    self.history.record("client_error", topic=self.topic, detail=f"{error.name()}: {error.str()}")
                    continue
                partition, offset, value = message.partition(), message.offset(), message.value()
                assert partition is not None and offset is not None and value is not None  # a record polled
                count, epoch = message.delivery_count(), message.leader_epoch()
                self.history.record("share_acquire", group=SHARE_GROUP_ID, topic=message.topic(), partition=partition,
                                    offset=offset, value=value.decode(), delivery_count=-1 if count is None else count,
                                    leader_epoch=-1 if epoch is None else epoch)
                held.append((message, partition, offset, value.decode(), count or 1))
            for message, partition, offset, text, count in held:
                time.sleep(PROCESS_S)
                kind = ack_type(text, count)
                self.pending[partition, offset] = kind
                self.consumer.acknowledge(message, kind)
            if held:
                self.sent = time.time()
                try:
                    self.consumer.commit_sync(COMMIT_TIMEOUT_S)
                except KafkaException as exc:
                    self.history.record("client_error", topic=self.topic, detail=f"commit_sync: {exc}")
        try:
            self.consumer.close()
        except KafkaException as exc:
            self.history.record("client_error", topic=self.topic, detail=f"close: {exc}")
        for (partition, offset), kind in self.pending.items():  # sent with the close, outcome never reported
            self.history.record("client_error", topic=self.topic,
                                detail=f"no outcome for {ACK_NAMES[kind]} of {partition}:{offset}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m epoch_broker.drill.share_workload",
                                     description="one member of the share-group drill's share group")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--history", type=Path, required=True)
    parser.add_argument("--name", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {args.name} %(message)s")
    with HistoryWriter(args.history, args.name) as history:
        member = _Member(args.bootstrap, args.topic, history)

        def stop(signum: int, frame: Any) -> None:
            member.stopping = True

        signal.signal(signal.SIGTERM, stop)
        member.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
