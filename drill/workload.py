"""A drill's workload: real clients on the drill's topic, each writing its history (drill/history.py).

- `Producers`: confluent-kafka idempotent producers (acks=all; plain acks=1 producers where a scenario allows
  loss), one thread, values "p<partition>-<n>" counting up
  per partition, at a steady modest rate (a drill checks outcomes, not throughput, on two cores).
- `TransactionalProducer` (the transaction drills, KIP-98): one confluent-kafka transactional producer writing
  transactions of TXN_RECORDS records over every partition, committing them, except every ABORT_EVERY-th, which
  it aborts on purpose. A transaction it cannot end (the coordinator gone past the timeout, a fatal error) is
  recorded with outcome "unknown" and the producer is made anew (init_transactions fences the old one and the
  coordinator ends the transaction); one whose commit is refused as abortable is aborted.
- `LiveConsumer`: a read_committed confluent-kafka consumer assigned every partition from the start (by hand,
  whatever the group protocol) with auto.offset.reset=error, so that a truncation its client detects (KIP-320:
  OffsetForLeaderEpoch after a leader change) is reported, recorded as a `truncation` event, and the consumer
  seeks to where the broker says the log ends. Any other error its client reports is recorded as a `client_error` event.
- `ConsumerGroup` (drills with a consumer group): members of group GROUP_ID, each a confluent-kafka consumer
  subscribed to the topic with `group.protocol` classic or consumer (KIP-848), committing automatically, reading
  from the earliest offset where the group has none. One of them is static (`group.instance.id`). The
  nemesis's member faults (drill/nemesis.py's FAULTS) start and stop members through it: a member joins, leaves
  cleanly (close), and the static one closes and starts again as a new instance with the same id. Each member
  records its life (`member`), what its rebalance callbacks gave and took (`assigned`, `revoked`) and its reads.
- `Poller`: every broker's own Metadata for the topic (leader, leader epoch: KIP-232 says they never go back)
  and ListOffsets LATEST from each partition's leader (KIP-207 says it never goes back), over this project's
  blocking client with a short timeout (a paused broker only delays the poll).
- `EpochProbe` (the stale-leader drill, KIP-359): when a partition's leader changes, the old leader is a stale
  route (where a producer whose metadata lags still sends); while it does not lead, it is sent a Produce now and
  then of each kind: carrying the epoch the probe now knows ("kip359": refused with UNKNOWN_LEADER_EPOCH by a
  stale leader, NOT_LEADER_OR_FOLLOWER by a demoted one), carrying the old epoch ("stale-kip359": a producer
  with stale metadata, refused with FENCED_LEADER_EPOCH once the broker knows), and carrying none ("stock":
  NOT_LEADER_OR_FOLLOWER, or appended by a stale leader and never committed). Each is a `send` and `ack` of
  its own record, with the epoch it carried (`leader_epoch`) and the broker asked, acks=all.
- `read_back`: after healing, every partition from its log start to its high watermark, as client "reader":
  the checker's reference of what the cluster kept.

Rules:
- Each client runs on its own thread and records events as they happen; `stop()` returns once it has stopped.
- Clients are configured as users configure them; only the timeouts are short, so that a drill of tens of
  seconds sees retries happen. With `group.protocol=consumer` the settings librdkafka refuses there
  (CLASSIC_ONLY: the coordinator decides sessions, heartbeats and assignment) are left out. Their own logs
  (librdkafka's connection failures during faults) go to the logger given, a file of the report, not to the
  drill's progress lines.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from epoch_broker.client.blocking import BlockingKafkaClient
from epoch_broker.drill.history import HistoryWriter
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import list_offsets, metadata, produce
from epoch_broker.protocol.records import build_batch

PRODUCER_CLIENT_ID = "drill-producer"  # its client.id: what a client-partition fault cuts off
TRANSACTIONAL_ID = "drill-transactions"  # the transactional producer's: whose coordinator a txn fault kills
TXN_RECORDS = 12
ABORT_EVERY = 4
TXN_RETRY_S = 60.0  # how long init, commit and abort are retried while their error is retriable
ISOLATION = "read_committed"  # the consumers' (librdkafka's default, said here as the history records it)
STALE_ROUTE_S = 15.0  # how long after a leader change the probe keeps asking the old leader
PROBE_EVERY_S = 0.5
PROBE_TIMEOUT_MS = 500  # a stale leader that appends never commits: its acks=all answer is a timeout
TRUNCATION_OFFSET = re.compile(r"broker end offset is (\d+)")
GROUP_ID = "drill-group"  # the consumer group's: whose coordinator a group-coordinator-kill kills
GROUP_PROTOCOLS = ("classic", "consumer")
# librdkafka refuses these with group.protocol=consumer (KIP-848: the coordinator decides them)
CLASSIC_ONLY = ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy", "group.protocol.type")
# classic members: a session of a few seconds and frequent heartbeats, so that a rebalance starts within a second
# of a member joining or leaving (librdkafka's defaults, 45 s and 3 s, are for real deployments)
CLASSIC_SESSION_MS = 6000
CLASSIC_HEARTBEAT_MS = 500
AUTO_COMMIT_MS = 1000
STATIC_MEMBER = "member-static"
MEMBER_STOP_S = 30.0  # a member's close (a final commit, LeaveGroup) waited for, at most


class Worker:
    """A thread running `step()` until stopped."""

    def __init__(self, name: str) -> None:
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Self:
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self.stopping.is_set():
            self.step()
        self.finish()

    def step(self) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        """Called on the thread once stopped."""

    def stop(self, timeout_s: float = 90.0) -> None:
        self.stopping.set()
        self.thread.join(timeout_s)


class _Producing(Worker):
    """What the producers share: the round-robin over the partitions, values "p<partition>-<n>", the counts."""

    def __init__(self, name: str, topic: str, partitions: int, history: HistoryWriter, rate_per_s: float) -> None:
        super().__init__(name)
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self.interval = 1.0 / rate_per_s
        self.next_number = [0] * partitions
        self.acked = 0
        self.failed = 0
        self._turn = 0

    def _send(self, producer: Producer, on_delivery: Callable[[KafkaError | None, Any], None],
              **fields: Any) -> tuple[int, str]:
        """Produce the next record (polling while the client's queue is full) and record its send with `fields`;
        (partition, value)."""
        partition = self._turn % self.partitions
        value = f"p{partition}-{self.next_number[partition]}"
        while True:
            try:
                producer.produce(self.topic, value.encode(), partition=partition, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)
        self.history.record("send", topic=self.topic, partition=partition, value=value, **fields)
        self.next_number[partition] += 1
        self._turn += 1
        return partition, value


class Producers(_Producing):
    def __init__(self, bootstrap: str, topic: str, partitions: int, history: HistoryWriter, logger: logging.Logger,
                 acks: str = "all", rate_per_s: float = 200.0) -> None:
        super().__init__("drill-producer", topic, partitions, history, rate_per_s)
        self.acks = acks
        self.producer = Producer({"bootstrap.servers": bootstrap, "client.id": PRODUCER_CLIENT_ID,
                                  "enable.idempotence": acks == "all", "acks": acks,
                                  "linger.ms": 5, "message.timeout.ms": 60000,
                                  "topic.metadata.refresh.interval.ms": 1000, "logger": logger})

    def _delivered(self, error: KafkaError | None, message: Any) -> None:
        value = message.value().decode()
        if error is None:
            self.acked += 1
            self.history.record("ack", topic=self.topic, partition=message.partition(), value=value,
                                offset=message.offset(), error=None, acks=self.acks)
        else:
            self.failed += 1
            self.history.record("ack", topic=self.topic, partition=message.partition(), value=value, offset=None,
                                error=str(error), acks=self.acks)

    def step(self) -> None:
        self._send(self.producer, self._delivered, acks=self.acks)
        self.producer.poll(self.interval)

    def finish(self) -> None:
        self.producer.flush(60)  # every send gets its outcome (or stays unknown past the timeout)


class TransactionalProducer(_Producing):
    def __init__(self, bootstrap: str, topic: str, partitions: int, history: HistoryWriter, logger: logging.Logger,
                 rate_per_s: float = 200.0) -> None:
        super().__init__("drill-transactional-producer", topic, partitions, history, rate_per_s)
        self.logger = logger
        self.txn = 0
        self.config = {"bootstrap.servers": bootstrap, "client.id": PRODUCER_CLIENT_ID,
                       "transactional.id": TRANSACTIONAL_ID, "linger.ms": 5, "transaction.timeout.ms": 30000,
                       "message.timeout.ms": 30000, "topic.metadata.refresh.interval.ms": 1000, "logger": logger}
        self.producer: Producer | None = None
        self._offsets: dict[str, int] = {}  # value -> offset, from the delivery reports of this transaction

    def _delivered(self, error: KafkaError | None, message: Any) -> None:
        if error is None:
            self._offsets[message.value().decode()] = message.offset()

    def step(self) -> None:
        if self.producer is None:
            self.producer = self._initialized()
            return
        txn = self.txn
        sent: list[tuple[int, str]] = []
        why = None
        try:
            self.producer.begin_transaction()
            self.txn += 1
            for _ in range(TXN_RECORDS):
                sent.append(self._send(self.producer, self._delivered, acks="all", txn=txn))
                self.producer.poll(self.interval)
        except KafkaException as exc:
            if not sent:  # not begun: a producer left in an error state is made anew
                self.logger.warning("drill: begin_transaction: %s; a new producer", exc.args[0].str())
                self.producer = None
                return
            why = f"send: {exc.args[0].str()}"
        wanted = "abort" if why or txn % ABORT_EVERY == ABORT_EVERY - 1 else "commit"
        outcome, error = self._end(self.producer, wanted, why)
        self.history.record("txn", txn=txn, outcome=outcome, error=error)
        for partition, value in sent:
            if outcome == "commit":
                self.acked += 1
                self.history.record("ack", topic=self.topic, partition=partition, value=value,
                                    offset=self._offsets.get(value), error=None, acks="all")
            elif outcome == "abort":
                self.failed += 1
                self.history.record("ack", topic=self.topic, partition=partition, value=value, offset=None,
                                    error="transaction aborted", acks="all")
        self._offsets.clear()
        if outcome == "unknown":
            self.producer = None  # init_transactions of the next one fences it; the coordinator ends the txn

    def _end(self, producer: Producer, wanted: str, why: str | None) -> tuple[str, str | None]:
        """Commit or abort as `wanted`: (outcome, why it aborted or is unknown)."""
        if wanted == "commit":
            try:
                _retrying(producer.commit_transaction)
                return "commit", None
            except KafkaException as exc:
                if not exc.args[0].txn_requires_abort():
                    return "unknown", f"commit: {exc.args[0].name()}: {exc.args[0].str()}"
                why = f"commit refused: {exc.args[0].name()}: {exc.args[0].str()}"
        try:
            _retrying(producer.abort_transaction)
            return "abort", why
        except KafkaException as exc:
            return "unknown", f"{why + '; ' if why else ''}abort: {exc.args[0].name()}: {exc.args[0].str()}"

    def _initialized(self) -> Producer | None:
        producer = Producer(self.config)
        try:
            _retrying(producer.init_transactions)
        except KafkaException as exc:
            self.logger.warning("drill: init_transactions: %s; trying again", exc.args[0].str())
            self.stopping.wait(1.0)
            return None
        return producer


def _retrying(call: Callable[[float], Any]) -> Any:
    """`call(timeout)` again while its error is retriable, for TXN_RETRY_S at most (librdkafka's advice)."""
    deadline = time.monotonic() + TXN_RETRY_S
    while True:
        try:
            return call(max(1.0, deadline - time.monotonic()))
        except KafkaException as exc:
            if not exc.args[0].retriable() or time.monotonic() >= deadline:
                raise


class LiveConsumer(Worker):
    def __init__(self, bootstrap: str, topic: str, partitions: int, history: HistoryWriter,
                 logger: logging.Logger, protocol: str = "classic") -> None:
        super().__init__("drill-consumer")
        self.topic = topic
        self.history = history
        self.read = 0
        self.truncations = 0
        # its partitions are assigned by hand: the group protocol only changes which requests its client may send
        self.consumer = Consumer(consumer_config({
            "bootstrap.servers": bootstrap, "group.id": "drill-live-consumer", "enable.auto.commit": False,
            "auto.offset.reset": "error", "isolation.level": ISOLATION, "topic.metadata.refresh.interval.ms": 1000,
            "logger": logger}, protocol))
        self.assigned = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
        self.consumer.assign(self.assigned)
        self.positions: dict[int, int] = {}  # partition -> the client's position (past markers, aborted records)

    def caught_up(self, ends: dict[int, int]) -> bool:
        return all(self.positions.get(partition, -1) >= end for partition, end in ends.items())

    def step(self) -> None:
        message = self.consumer.poll(0.2)
        if message is None:
            self.positions = {tp.partition: tp.offset for tp in self.consumer.position(self.assigned)}
            return
        error = message.error()
        if error is None:
            self.read += 1
            self.history.record("read", topic=self.topic, partition=message.partition(), offset=message.offset(),
                                value=_text(message), leader_epoch=_epoch(message), isolation=ISOLATION)
        elif error.code() == KafkaError._AUTO_OFFSET_RESET and (found := TRUNCATION_OFFSET.search(error.str())):
            offset = int(found.group(1))
            partition = message.partition()
            assert partition is not None  # an offset reset is of a partition
            self.truncations += 1
            self.history.record("truncation", topic=self.topic, partition=partition, offset=offset,
                                detail=error.str())
            self.consumer.seek(TopicPartition(self.topic, partition, offset))
        else:  # what else its client reported (kept in the history, not checked): a stall's explanation
            self.history.record("client_error", topic=self.topic, detail=f"{error.name()}: {error.str()}")

    def finish(self) -> None:
        self.consumer.close()


def consumer_config(config: dict[str, Any], protocol: str) -> dict[str, Any]:
    """`config` with `group.protocol` set to `protocol`; for consumer, without the CLASSIC_ONLY settings."""
    if protocol not in GROUP_PROTOCOLS:
        raise ValueError(f"group protocol {protocol!r} is not one of {', '.join(GROUP_PROTOCOLS)}")
    if protocol == "classic":
        return {**config, "group.protocol": protocol}
    return {**{key: value for key, value in config.items() if key not in CLASSIC_ONLY}, "group.protocol": protocol}


class GroupMember(Worker):
    """One member of the drill's consumer group, on its own thread: subscribes, polls, and closes when stopped.
    Its history records its life, its rebalance callbacks and its reads (drill/history.py's `member`,
    `assigned`, `revoked`, `read`)."""

    def __init__(self, name: str, bootstrap: str, topic: str, protocol: str, history: HistoryWriter,
                 logger: logging.Logger, instance: str | None = None) -> None:
        super().__init__(f"drill-{name}")
        self.name = name
        self.topic = topic
        self.protocol = protocol
        self.instance = instance
        self.history = history
        self.read = 0
        self.positions: dict[int, int] = {}  # partition -> its client's position, as of its last idle poll
        config = {"bootstrap.servers": bootstrap, "group.id": GROUP_ID, "client.id": f"drill-{name}",
                  "enable.auto.commit": True, "auto.commit.interval.ms": AUTO_COMMIT_MS,
                  "auto.offset.reset": "earliest", "isolation.level": ISOLATION,
                  "session.timeout.ms": CLASSIC_SESSION_MS, "heartbeat.interval.ms": CLASSIC_HEARTBEAT_MS,
                  "topic.metadata.refresh.interval.ms": 1000, "logger": logger}
        if instance is not None:
            config["group.instance.id"] = instance
        self._life("start")
        self.consumer = Consumer(consumer_config(config, protocol))
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._lost)

    def _life(self, phase: str) -> None:
        self.history.record("member", group=GROUP_ID, phase=phase, instance=self.instance, protocol=self.protocol)

    def _record(self, op: str, partitions: list[TopicPartition], **fields: Any) -> None:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        for topic, numbers in sorted(by_topic.items()):
            self.history.record(op, topic=topic, partitions=sorted(numbers), **fields)

    # the callbacks run on this member's thread, inside poll() or close(), before the client (re)assigns
    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._record("assigned", partitions)

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._record("revoked", partitions, how="revoke")

    def _lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._record("revoked", partitions, how="lost")

    def step(self) -> None:
        message = self.consumer.poll(0.2)
        if message is None:
            # a position at or past an offset means this member read up to it (a partition it no longer holds
            # keeps its last position here: that reading happened all the same)
            with contextlib.suppress(KafkaException):
                self.positions.update((tp.partition, tp.offset)
                                      for tp in self.consumer.position(self.consumer.assignment()))
            return
        error = message.error()
        if error is None:
            self.read += 1
            self.history.record("read", topic=self.topic, partition=message.partition(), offset=message.offset(),
                                value=_text(message), leader_epoch=_epoch(message), isolation=ISOLATION)
        else:
            self.history.record("client_error", topic=self.topic, detail=f"{error.name()}: {error.str()}")

    def finish(self) -> None:
        try:
            self.consumer.close()  # on_revoke of what it holds, its last commit, then it leaves
        except (KafkaException, RuntimeError) as exc:
            self.history.record("client_error", topic=self.topic, detail=f"close: {exc}")
        self._life("end")


class ConsumerGroup:
    """The drill's consumer group: its members, started and stopped as the member faults say. Members are named
    member-0, member-1, ... in the order they join (a schedule replayed names the same ones), the static member
    STATIC_MEMBER; each writes its own history file (a static member's new instance continues it). Its methods
    are called from one thread (the drill's)."""

    def __init__(self, bootstrap: str, topic: str, protocol: str, directory: Path, logger: logging.Logger) -> None:
        consumer_config({}, protocol)  # an unknown protocol is refused here, before any member starts
        self.bootstrap = bootstrap
        self.topic = topic
        self.protocol = protocol
        self.directory = directory
        self.logger = logger
        self.members: dict[str, GroupMember] = {}  # the running ones, by name, oldest first
        self.histories: dict[str, HistoryWriter] = {}
        self.started = 0  # members started, instances of the static one included
        self._read_by_stopped = 0
        self._numbers = 0

    def start(self, members: int) -> Self:
        """`members` members: the static one, then dynamic ones (a single member is dynamic)."""
        if members > 1:
            self.start_static()
        for _ in range(members - len(self.members)):
            self.join()
        return self

    @property
    def read(self) -> int:
        return self._read_by_stopped + sum(member.read for member in self.members.values())

    def caught_up(self, ends: dict[int, int]) -> bool:
        """Has a running member read each partition up to its end in `ends`?"""
        return all(end <= 0 or any(member.positions.get(partition, -1) >= end for member in self.members.values())
                   for partition, end in ends.items())

    def next_name(self) -> str:
        return f"member-{self._numbers}"

    def join(self) -> str:
        """A new dynamic member joins; its name."""
        name = self.next_name()
        self._numbers += 1
        self._start(name, None)
        return name

    def oldest(self) -> str:
        """The longest-running dynamic member: the one member-leave takes."""
        names = [name for name in self.members if name != STATIC_MEMBER]
        if not names:
            raise RuntimeError(f"no dynamic member in group {GROUP_ID} to leave")
        return names[0]

    def leave(self, name: str) -> None:
        """Close member `name` (on_revoke, its last commit, LeaveGroup or heartbeat epoch -1); wait for it."""
        member = self.members.pop(name)
        member.stop(MEMBER_STOP_S)
        self._read_by_stopped += member.read
        if member.thread.is_alive():  # wedged in close: it is no member for the checker from now on
            self.logger.warning("drill: %s did not close within %.0f s; left behind", name, MEMBER_STOP_S)
            member.history.record("member", group=GROUP_ID, phase="end", instance=member.instance,
                                  protocol=self.protocol)

    def start_static(self) -> str:
        """The static member (a new instance of it, when it ran before)."""
        if STATIC_MEMBER in self.members:
            raise RuntimeError(f"{STATIC_MEMBER} runs already")
        self._start(STATIC_MEMBER, f"drill-{STATIC_MEMBER}")
        return STATIC_MEMBER

    def stop_static(self) -> str:
        if STATIC_MEMBER not in self.members:
            raise RuntimeError(f"group {GROUP_ID} has no static member running")
        self.leave(STATIC_MEMBER)
        return STATIC_MEMBER

    def _start(self, name: str, instance: str | None) -> None:
        if name not in self.histories:
            self.histories[name] = HistoryWriter(self.directory, name)
        member = GroupMember(name, self.bootstrap, self.topic, self.protocol, self.histories[name], self.logger,
                             instance)
        self.members[name] = member.start()
        self.started += 1

    def stop(self) -> None:
        """Every member closed, in turn."""
        for name in list(self.members):
            self.leave(name)

    def close(self) -> None:
        """The history files closed (once the members have stopped)."""
        for history in self.histories.values():
            history.close()


class Poller(Worker):
    def __init__(self, addresses: Callable[[], dict[int, str]], topic: str, history: HistoryWriter,
                 interval_s: float = 0.25) -> None:
        super().__init__("drill-poller")
        self.addresses = addresses  # node id -> address of the brokers running now
        self.topic = topic
        self.history = history
        self.interval_s = interval_s

    def step(self) -> None:
        def record(node: int, p: Any) -> None:
            self.history.record("metadata", broker=node, topic=self.topic, partition=p.partition_index,
                                leader=p.leader_id, leader_epoch=p.leader_epoch)

        leaders = newest_leaders(self.addresses(), self.topic, record)
        addresses = self.addresses()
        for partition, (leader, epoch) in sorted(leaders.items()):
            if leader in addresses:
                self._latest(leader, addresses[leader], partition, epoch)
        self.stopping.wait(self.interval_s)

    def _latest(self, node: int, address: str, partition: int, epoch: int) -> None:
        request = list_offsets.REQUEST.cls(replica_id=-1, isolation_level=0, topics=[
            list_offsets.REQUEST.ListOffsetsTopic(name=self.topic, partitions=[
                list_offsets.REQUEST.ListOffsetsPartition(partition_index=partition, timestamp=-1,
                                                          current_leader_epoch=epoch)])])
        try:
            answer = self._ask(address, list_offsets.API, 7, request).topics[0].partitions[0]
        except OSError:
            return
        error = None if answer.error_code == ErrorCode.NONE else ErrorCode(answer.error_code).name
        self.history.record("latest", broker=node, topic=self.topic, partition=partition,
                            offset=answer.offset if error is None else None, error=error)

    @staticmethod
    def _ask(address: str, api: Any, version: int, request: Any) -> Any:
        return ask(address, api, version, request, "epoch-broker-drill-poller")


def ask(address: str, api: Any, version: int, request: Any, client_id: str) -> Any:
    """One request on a connection of its own, with a short timeout (a paused broker only delays the asker)."""
    with BlockingKafkaClient.connect(address, client_id, timeout_s=1.0) as client:
        return client.request(api, version, request)


def newest_leaders(addresses: dict[int, str], topic: str,
                   observe: Callable[[int, Any], None] = lambda node, answer: None) -> dict[int, tuple[int, int]]:
    """partition -> (leader, leader epoch) of `topic` with the newest epoch among the brokers' own Metadata
    answers (KIP-232: an older epoch is never believed); `observe(node, partition answer)` sees every answer."""
    leaders: dict[int, tuple[int, int]] = {}
    request = metadata.REQUEST.cls(topics=[metadata.REQUEST.MetadataRequestTopic(name=topic)],
                                   allow_auto_topic_creation=False)
    for node, address in addresses.items():
        try:
            answer = ask(address, metadata.API, 12, request, "epoch-broker-drill-metadata")
        except OSError:
            continue  # paused or just killed: its silence is in the fault events
        for found in answer.topics:
            for p in found.partitions if found.name == topic else []:
                observe(node, p)
                if p.leader_id >= 0 and p.leader_epoch >= leaders.get(p.partition_index, (-1, -1))[1]:
                    leaders[p.partition_index] = (p.leader_id, p.leader_epoch)
    return leaders


class EpochProbe(Worker):
    """Produces to the old leaders of partitions whose leader changed, as a producer with lagging metadata does
    (the module docstring says what each kind of probe carries and what it should get)."""

    KINDS = ("kip359", "stale-kip359", "stock")

    def __init__(self, addresses: Callable[[], dict[int, str]], topic: str, history: HistoryWriter) -> None:
        super().__init__("drill-epoch-probe")
        self.addresses = addresses
        self.topic = topic
        self.history = history
        self.known: dict[int, tuple[int, int]] = {}  # partition -> (leader, epoch) last seen
        self.stale: dict[int, tuple[int, int, float]] = {}  # partition -> (old leader, its epoch, until when)
        self.sent = 0

    def step(self) -> None:
        now = time.monotonic()
        for partition, (leader, epoch) in newest_leaders(self.addresses(), self.topic).items():
            old = self.known.get(partition)
            if old is not None and epoch > old[1] and leader != old[0]:
                self.stale[partition] = (old[0], old[1], now + STALE_ROUTE_S)
            self.known[partition] = (leader, epoch)
        addresses = self.addresses()
        for partition, (old_leader, old_epoch, until) in list(self.stale.items()):
            if now > until:
                del self.stale[partition]
            elif old_leader != self.known[partition][0] and old_leader in addresses:
                for kind, carried in zip(self.KINDS, (self.known[partition][1], old_epoch, -1), strict=True):
                    self._probe(kind, old_leader, addresses[old_leader], partition, carried)
        self.stopping.wait(PROBE_EVERY_S)

    def _probe(self, kind: str, broker: int, address: str, partition: int, leader_epoch: int) -> None:
        value = f"probe-{kind}-{partition}-{self.sent}"
        self.sent += 1
        request = produce.REQUEST.cls(acks=-1, timeout_ms=PROBE_TIMEOUT_MS, topic_data=[
            produce.REQUEST.TopicProduceData(name=self.topic, partition_data=[produce.REQUEST.PartitionProduceData(
                index=partition, records=build_batch([(None, value.encode(), [], None)]),
                current_leader_epoch=leader_epoch)])])
        self.history.record("send", topic=self.topic, partition=partition, value=value, acks="all",
                            leader_epoch=leader_epoch, broker=broker, probe=kind)
        try:
            answer = ask(address, produce.API, 9, request, "epoch-broker-drill-probe"
                         ).responses[0].partition_responses[0]
        except OSError as exc:  # no answer: the outcome is unknown (a stale leader may hold the record)
            self.history.record("ack", topic=self.topic, partition=partition, value=value, offset=None,
                                error=f"no answer: {exc}", acks="all", broker=broker, probe=kind)
            return
        error = None if answer.error_code == ErrorCode.NONE else ErrorCode(answer.error_code).name
        self.history.record("ack", topic=self.topic, partition=partition, value=value,
                            offset=answer.base_offset if error is None else None, error=error, acks="all",
                            broker=broker, probe=kind)


def read_back(bootstrap: str, topic: str, ends: dict[int, int], history: HistoryWriter, logger: logging.Logger,
              timeout_s: float = 60.0) -> int:
    """Every record of each partition up to its high watermark in `ends`, as `read` events; the count."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "drill-reader", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": ISOLATION, "logger": logger})
    try:
        assigned = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends]
        consumer.assign(assigned)
        positions = dict.fromkeys(ends, 0)
        count = 0
        deadline = time.monotonic() + timeout_s
        while any(positions[p] < ends[p] for p in ends):
            if time.monotonic() > deadline:
                raise TimeoutError(f"read back up to {positions} of high watermarks {ends} in {timeout_s:.0f} s")
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                if message.error() is not None:
                    continue
                history.record("read", topic=topic, partition=message.partition(), offset=message.offset(),
                               value=_text(message), leader_epoch=_epoch(message), isolation=ISOLATION)
                count += 1
            # the client's positions: past the transaction markers and aborted records it skips too
            positions.update((tp.partition, tp.offset) for tp in consumer.position(assigned) if tp.offset >= 0)
        return count
    finally:
        consumer.close()


def _text(message: Any) -> str:
    value = message.value()
    assert value is not None  # the drill writes no record without a value
    return value.decode()


def _epoch(message: Any) -> int:
    epoch = message.leader_epoch()
    return -1 if epoch is None else epoch
