"""A drill's workload: real clients on the drill's topic, each writing its history (drill/history.py).

- `Producers`: confluent-kafka idempotent producers (acks=all; plain acks=1 producers where a scenario allows
  loss), one thread, values "p<partition>-<n>" counting up
  per partition, at a steady modest rate (a drill checks outcomes, not throughput, on two cores).
- `TransactionalProducer` (the transaction drills, KIP-98): one confluent-kafka transactional producer writing
  transactions of TXN_RECORDS records over every partition, committing them, except every ABORT_EVERY-th, which
  it aborts on purpose. A transaction it cannot end (the coordinator gone past the timeout, a fatal error) is
  recorded with outcome "unknown" and the producer is made anew (init_transactions fences the old one and the
  coordinator ends the transaction); one whose commit is refused as abortable is aborted.
- `LiveConsumer`: a read_committed confluent-kafka consumer assigned every partition from the start with
  auto.offset.reset=error, so that a truncation its client detects (KIP-320: OffsetForLeaderEpoch after a
  leader change) is reported, recorded as a `truncation` event, and the consumer seeks to where the broker
  says the log ends. Any other error its client reports is recorded as a `client_error` event.
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
  seconds sees retries happen. Their own logs (librdkafka's connection failures during faults) go to the
  logger given, a file of the report, not to the drill's progress lines.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
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
                 logger: logging.Logger) -> None:
        super().__init__("drill-consumer")
        self.topic = topic
        self.history = history
        self.read = 0
        self.truncations = 0
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "drill-live-consumer",
                                  "enable.auto.commit": False, "auto.offset.reset": "error",
                                  "isolation.level": ISOLATION, "topic.metadata.refresh.interval.ms": 1000,
                                  "logger": logger})
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
