"""Every stock client survives a leader failover without losing an acknowledged record, as a developer using our
cluster as a test broker expects.

For each client (confluent-kafka, kafka-python, aiokafka, kafkajs through node, kcat with librdkafka 2.0.2) on
three broker processes: a topic of 3 partitions with replication factor 3 and `min.insync.replicas` 2; the client
produces numbered records (record n to partition n % 3) with acks=all, paced, while the leader of partition 0 is
SIGKILLed once some records are acknowledged. The client must carry on through the failover with its own retries
(NOT_LEADER_OR_FOLLOWER, a closed connection, newer metadata) and get every record acknowledged. Then a consumer
of the same library reads every partition from the beginning up to its high watermark: every acknowledged record
is there, in the order it was produced, per partition. Each client runs twice: with its idempotent producer
(all five have one): exactly once; and without (one request in flight, so order holds): at-least-once, a batch
whose answer the kill lost may have been written twice.

kafkajs sends one record per send(): see `_kafkajs_run` for the kafkajs flaw a multi-partition send() meets.
kcat has no per-record delivery report in a simple form: every line it was given counts as acknowledged once it
exited 0 (it exits non-zero when a delivery fails). Seeds: KIP-101 (an acknowledged record survives a leader
change) and Kafka's acks=all contract with min.insync.replicas.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import threading
import time
import uuid
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.cluster.support import Cluster, create_topic, list_offset, partition_state
from tests.helpers import not_yet, wait_for, wait_for_sync
from tests.interop.support import JS_DIR, kcat_bin, node_bin

pytestmark = pytest.mark.slow

TOPIC = "payments"
PARTITIONS = 3
RECORDS = 300
KILL_AFTER = 60  # acknowledged records before the leader of partition 0 is SIGKILLed
PACE_S = 0.01  # between sends: the stream lasts ~3 s, so records keep coming during the ~1 s failover
DELIVERY_TIMEOUT_MS = 25_000  # a producer gives a record up after this: far beyond a failover

CLIENTS = ["confluent-kafka", "kafka-python", "aiokafka", "kafkajs", "kcat"]


@dataclass
class Produced:
    """What the producer reported: numbers acknowledged (in report order), failures (number, error)."""

    acked: list[int] = field(default_factory=list)
    failed: list[tuple[int, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ack(self, n: int) -> None:
        with self.lock:
            self.acked.append(n)

    def fail(self, n: int, error: object) -> None:
        with self.lock:
            self.failed.append((n, str(error)))


@dataclass
class Run:
    """A producer under way: `acked_count` (maybe async) for the kill, `done` to await its end."""

    produced: Produced
    acked_count: Callable[[], int | Awaitable[int]]
    done: Awaitable[None]


Consumed = list[tuple[int, int, int]]  # (partition, offset, record number)


# --- producers ------------------------------------------------------------------------------------------------

def _confluent_produce(bootstrap: str, produced: Produced, idempotent: bool) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": idempotent,
                         "max.in.flight": 5 if idempotent else 1, "linger.ms": 5,
                         "message.timeout.ms": DELIVERY_TIMEOUT_MS})

    def report(err: object, message: object, n: int) -> None:
        produced.ack(n) if err is None else produced.fail(n, err)

    for n in range(RECORDS):
        producer.produce(TOPIC, value=str(n).encode(), partition=n % PARTITIONS,
                         on_delivery=lambda err, msg, n=n: report(err, msg, n))
        producer.poll(0)
        time.sleep(PACE_S)
    assert producer.flush(DELIVERY_TIMEOUT_MS / 1000 + 5) == 0


def _kafka_python_produce(bootstrap: str, produced: Produced, idempotent: bool) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=idempotent,
                             max_in_flight_requests_per_connection=5 if idempotent else 1, linger_ms=5,
                             delivery_timeout_ms=DELIVERY_TIMEOUT_MS, request_timeout_ms=10_000)
    try:
        for n in range(RECORDS):
            future = producer.send(TOPIC, value=str(n).encode(), partition=n % PARTITIONS)
            future.add_callback(lambda _meta, n=n: produced.ack(n))
            future.add_errback(lambda err, n=n: produced.fail(n, err))
            time.sleep(PACE_S)
        producer.flush(DELIVERY_TIMEOUT_MS / 1000 + 5)
    finally:
        producer.close(timeout=5)


def _thread_run(target: Callable[[str, Produced, bool], None], bootstrap: str, idempotent: bool) -> Run:
    produced = Produced()
    done = asyncio.ensure_future(asyncio.to_thread(target, bootstrap, produced, idempotent))
    return Run(produced, lambda: len(produced.acked), done)


async def _aiokafka_produce(bootstrap: str, produced: Produced, idempotent: bool) -> None:
    """(aiokafka sends one batch per partition at a time: its order holds without idempotence.)"""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=idempotent,
                                linger_ms=5, request_timeout_ms=DELIVERY_TIMEOUT_MS)
    await producer.start()
    try:
        futures = []
        for n in range(RECORDS):
            future = await producer.send(TOPIC, value=str(n).encode(), partition=n % PARTITIONS)
            future.add_done_callback(lambda f, n=n: produced.fail(n, f.exception()) if f.exception()
                                     else produced.ack(n))
            futures.append(future)
            await asyncio.sleep(PACE_S)
        await asyncio.gather(*futures, return_exceptions=True)
    finally:
        await producer.stop()


def _aiokafka_run(bootstrap: str, idempotent: bool) -> Run:
    produced = Produced()
    done = asyncio.ensure_future(_aiokafka_produce(bootstrap, produced, idempotent))
    return Run(produced, lambda: len(produced.acked), done)


async def _node(mode: str, args: dict[str, object], log: Path,
                on_line: Callable[[dict[str, object]], None]) -> None:
    """failover.js `mode`, each stdout JSON line to `on_line`; kafkajs' own log to `log`."""
    with log.open("ab") as stderr:
        process = await asyncio.create_subprocess_exec(node_bin(), str(JS_DIR / "failover.js"), mode, json.dumps(args),
                                                       stdout=asyncio.subprocess.PIPE, stderr=stderr, cwd=JS_DIR)
        assert process.stdout is not None
        async for line in process.stdout:
            on_line(json.loads(line))
        code = await process.wait()
    assert code == 0, f"failover.js {mode} exited {code}: {log.read_text()[-3000:]}"


def _kafkajs_run(bootstrap: str, log: Path, idempotent: bool) -> Run:
    produced = Produced()

    def on_line(line: dict[str, object]) -> None:
        for n in line.get("acked", []):  # type: ignore[union-attr]
            produced.ack(n)
        for n in line.get("failed", []):  # type: ignore[union-attr]
            produced.fail(n, line["error"])
        assert "fatal" not in line, line

    # One record (one partition) per send(): kafkajs 2.2.4 loses records of a send() that spans partitions when
    # one partition's leader moves to a broker that already answered that send(): sendMessages.js keeps the
    # answers per broker (`responsePerBroker`) and its retry sends only to brokers without one, so the moved
    # partition's records are never sent again and the send() resolves. Seen against this cluster (one record
    # in ~2 runs, never on any broker's log nor in any Produce it received); a Kafka broker cannot prevent it.
    args = {"brokers": bootstrap.split(","), "topic": TOPIC, "partitions": PARTITIONS, "records": RECORDS,
            "idempotent": idempotent, "paceMs": PACE_S * 1000}
    return Run(produced, lambda: len(produced.acked), asyncio.ensure_future(_node("produce", args, log, on_line)))


def _kcat_base(bootstrap: str) -> list[str]:
    return [kcat_bin(), "-b", bootstrap, "-t", TOPIC]


def _kcat_keys() -> list[str]:
    """One key per partition that librdkafka's default partitioner (consistent_random: CRC-32 of the key modulo
    the partition count) sends there, so that kcat too writes record n to partition n % PARTITIONS."""
    keys: dict[int, str] = {}
    for i in itertools.count():
        keys.setdefault(zlib.crc32(f"key-{i}".encode()) % PARTITIONS, f"key-{i}")
        if len(keys) == PARTITIONS:
            return [keys[p] for p in range(PARTITIONS)]
    raise AssertionError("unreachable")


async def _kcat_produce(bootstrap: str, produced: Produced, log: Path, idempotent: bool) -> None:
    """Lines "key:n" for n in 0..RECORDS-1 on kcat's stdin, paced; all count as acknowledged once kcat exits 0."""
    keys = _kcat_keys()
    with log.open("ab") as stderr:
        process = await asyncio.create_subprocess_exec(
            *_kcat_base(bootstrap), "-P", "-K", ":", "-X", "acks=all",
            "-X", f"enable.idempotence={str(idempotent).lower()}", "-X", f"max.in.flight={5 if idempotent else 1}",
            "-X", "linger.ms=5", "-X", f"message.timeout.ms={DELIVERY_TIMEOUT_MS}",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL, stderr=stderr)
        assert process.stdin is not None
        for n in range(RECORDS):
            process.stdin.write(f"{keys[n % PARTITIONS]}:{n}\n".encode())
            await process.stdin.drain()
            await asyncio.sleep(PACE_S)
        process.stdin.close()
        code = await asyncio.wait_for(process.wait(), DELIVERY_TIMEOUT_MS / 1000 + 10)
    assert code == 0, f"kcat -P exited {code}: {log.read_text()[-3000:]}"
    produced.acked.extend(range(RECORDS))


def _kcat_run(cluster: Cluster, bootstrap: str, log: Path, idempotent: bool) -> Run:
    produced = Produced()

    async def committed() -> int:  # kcat reports nothing per record: count what the leaders committed
        return sum((await high_watermarks(cluster, set())).values())

    return Run(produced, committed, asyncio.ensure_future(_kcat_produce(bootstrap, produced, log, idempotent)))


# --- consumers: every partition from the beginning up to `ends` -------------------------------------------------

def _confluent_consume(bootstrap: str, ends: dict[int, int]) -> Consumed:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in ends])
    out: Consumed = []
    try:
        _poll_until(ends, out, lambda: [(m.partition(), m.offset(), m.value())
                                        for m in consumer.consume(100, 0.2) if m.error() is None])
    finally:
        consumer.close()
    return out


def _kafka_python_consume(bootstrap: str, ends: dict[int, int]) -> Consumed:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(TOPIC, p) for p in ends])
    consumer.seek_to_beginning()
    out: Consumed = []
    try:
        _poll_until(ends, out, lambda: [(r.partition, r.offset, r.value) for records in
                                        consumer.poll(200).values() for r in records])
    finally:
        consumer.close()
    return out


def _poll_until(ends: dict[int, int], out: Consumed, poll: Callable[[], list[tuple[int, int, bytes]]],
                timeout_s: float = 20.0) -> None:
    def read() -> object:
        out.extend((p, offset, int(value)) for p, offset, value in poll())
        return _reached(ends, out)

    wait_for_sync(read, timeout_s, interval=0, what=f"every partition read up to {ends}")


def _reached(ends: dict[int, int], out: Consumed) -> object:
    """True once every partition was read up to its end; else how far each got."""
    nexts = {p: offset + 1 for p, offset, _ in out}
    return all(nexts.get(p, 0) >= end for p, end in ends.items()) or not_yet(f"read up to {nexts}")


async def _aiokafka_consume(bootstrap: str, ends: dict[int, int]) -> Consumed:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    out: Consumed = []
    try:
        consumer.assign([TopicPartition(TOPIC, p) for p in ends])
        await consumer.seek_to_beginning()

        async def read() -> object:
            batches = await consumer.getmany(timeout_ms=200)
            out.extend((r.partition, r.offset, int(r.value)) for records in batches.values() for r in records)
            return _reached(ends, out)

        await wait_for(read, 20, interval=0, what=f"every partition read up to {ends}")
    finally:
        await consumer.stop()
    return out


async def _kafkajs_consume(bootstrap: str, ends: dict[int, int], log: Path) -> Consumed:
    out: Consumed = []

    def on_line(line: dict[str, object]) -> None:
        out.extend((p, offset, int(value)) for p, offset, value in line["records"])  # type: ignore[union-attr]

    await _node("consume", {"brokers": bootstrap.split(","), "topic": TOPIC, "ends": ends,
                            "group": f"check-{uuid.uuid4().hex[:8]}"}, log, on_line)
    return out


async def _kcat_consume(bootstrap: str, log: Path) -> Consumed:
    """`kcat -C -e` from the beginning: it exits at the end of every partition."""
    with log.open("ab") as stderr:
        process = await asyncio.create_subprocess_exec(
            *_kcat_base(bootstrap), "-C", "-e", "-o", "beginning", "-f", "%p %o %s\n",
            stdout=asyncio.subprocess.PIPE, stderr=stderr)
        stdout, _ = await asyncio.wait_for(process.communicate(), 20)
    assert process.returncode == 0, f"kcat -C exited {process.returncode}: {log.read_text()[-3000:]}"
    return [(int(p), int(offset), int(value)) for p, offset, value in
            (line.split() for line in stdout.decode().splitlines())]


# --- the cluster side -------------------------------------------------------------------------------------------

async def high_watermarks(cluster: Cluster, dead: set[int]) -> dict[int, int]:
    """partition -> high watermark, asked of each partition's leader (0 where it has none, or a dead one)."""
    out = {}
    for p in range(PARTITIONS):
        state = await partition_state(cluster, TOPIC, p)
        if state is None or state.leader < 0 or state.leader in dead:
            out[p] = 0
            continue
        async with cluster.client(state.leader) as client:
            out[p] = (await list_offset(client, TOPIC, 4, partition=p)).offset
    return out


async def settled_ends(cluster: Cluster, dead: int) -> dict[int, int]:
    """The high watermarks once every partition is led by a live broker with an ISR of the two survivors."""
    for p in range(PARTITIONS):
        await wait_for(lambda p=p: partition_state(cluster, TOPIC, p, lambda s: s.leader not in (-1, dead)
                                                   and dead not in s.isr and len(s.isr) == 2),
                       what=f"{TOPIC}-{p} led by a survivor")
    return await high_watermarks(cluster, {dead})


def check(client: str, idempotent: bool, produced: Produced, consumed: Consumed,
          ends: dict[int, int]) -> dict[str, int]:
    """Every acknowledged record consumed, in production order per partition: exactly once from an idempotent
    producer; without idempotence a retried batch may have been written twice (at-least-once), so order is
    checked on first occurrences."""
    assert produced.failed == [], f"{client}: deliveries failed: {produced.failed[:5]}"
    assert sorted(produced.acked) == list(range(RECORDS)), f"{client}: acked {len(produced.acked)} of {RECORDS}"
    numbers = [n for _, _, n in consumed]
    duplicates = len(numbers) - len(set(numbers))
    missing = sorted(set(produced.acked) - set(numbers))
    assert missing == [], f"{client}: {len(missing)} acknowledged records lost, first {missing[:10]}"
    if idempotent:
        assert duplicates == 0, f"{client}: {duplicates} records written twice by an idempotent producer"
    assert sum(ends.values()) == len(numbers), f"{client}: the logs hold {ends}, {len(numbers)} consumed"
    for p in range(PARTITIONS):
        mine = [(offset, n) for q, offset, n in consumed if q == p]
        assert [offset for offset, _ in mine] == list(range(ends[p])), f"{client}: partition {p} offsets"
        in_partition = list(dict.fromkeys(n for _, n in mine))  # first occurrences
        assert in_partition == sorted(in_partition), f"{client}: partition {p} out of order: {in_partition}"
        assert all(n % PARTITIONS == p for n in in_partition), f"{client}: partition {p} holds {in_partition}"
    return {"acked": len(produced.acked), "consumed": len(numbers), "duplicates": duplicates}


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "at-least-once"])
@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.cluster(brokers=3)
async def test_a_stock_client_keeps_every_acknowledged_record_when_the_leader_is_sigkilled_mid_stream(
        cluster: Cluster, client: str, idempotent: bool, tmp_path: Path) -> None:
    """KIP-101 and acks=all with min.insync.replicas=2: a record a stock producer got acknowledged survives the
    SIGKILL of its partition's leader; the producer carries on through the election with its own retries; a
    consumer of the same library reads each record in order, once when the producer is idempotent."""
    await create_topic(cluster, TOPIC, partitions=PARTITIONS, configs={"min.insync.replicas": "2"})
    leader = (await partition_state(cluster, TOPIC, 0)).leader  # type: ignore[union-attr]
    bootstrap, log = cluster.bootstrap, tmp_path / f"{client}.log"
    run = {"confluent-kafka": lambda: _thread_run(_confluent_produce, bootstrap, idempotent),
           "kafka-python": lambda: _thread_run(_kafka_python_produce, bootstrap, idempotent),
           "aiokafka": lambda: _aiokafka_run(bootstrap, idempotent),
           "kafkajs": lambda: _kafkajs_run(bootstrap, log, idempotent),
           "kcat": lambda: _kcat_run(cluster, bootstrap, log, idempotent)}[client]()

    await wait_for(lambda: _at_least(run.acked_count, KILL_AFTER), timeout=15,
                   what=f"{KILL_AFTER} records acknowledged before the kill")
    acked_at_kill = await _count(run.acked_count)
    cluster.kill(leader, signal.SIGKILL)
    assert acked_at_kill < RECORDS, f"{client} finished before the kill: not mid-stream"
    await asyncio.wait_for(run.done, DELIVERY_TIMEOUT_MS / 1000 + 15)

    ends = await settled_ends(cluster, leader)
    consumed = await {"confluent-kafka": lambda: asyncio.to_thread(_confluent_consume, bootstrap, ends),
                      "kafka-python": lambda: asyncio.to_thread(_kafka_python_consume, bootstrap, ends),
                      "aiokafka": lambda: _aiokafka_consume(bootstrap, ends),
                      "kafkajs": lambda: _kafkajs_consume(bootstrap, ends, log),
                      "kcat": lambda: _kcat_consume(bootstrap, log)}[client]()
    stats = check(client, idempotent, run.produced, consumed, ends)
    print(f"{client} {'idempotent' if idempotent else 'at-least-once'}: {stats} "
          f"(acked before the kill of broker {leader}: {acked_at_kill}; ends {ends})")


async def _count(count: Callable[[], int | Awaitable[int]]) -> int:
    value = count()
    return value if isinstance(value, int) else await value


async def _at_least(count: Callable[[], int | Awaitable[int]], floor: int) -> bool:
    return await _count(count) >= floor
