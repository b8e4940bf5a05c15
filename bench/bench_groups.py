"""Group benchmark: the same confluent-kafka workload, in the same run, against our broker and against Tansu.

Measurements per run, each broker freshly started, for the eager assignor (range) and the incremental one
(cooperative-sticky, KIP-429), with heartbeat.interval.ms 500:
- time for a group of 3 consumers, subscribing together to a 6-partition topic, to reach Stable (every
  partition assigned, each consumer holding some) from the moment they subscribe;
- then time for a 4th consumer to join until all 4 hold partitions and every partition is owned exactly once
  (an incremental rebalance takes two rounds, each started by the members' next heartbeat);
- synchronous commit throughput: one group member commits one offset at a time with `commit(asynchronous=
  False)` (OffsetCommit, appended to `__consumer_offsets` before the answer) for a fixed time; commits/s;
- heartbeat round trip: a member that joined with the requests librdkafka sends (FindCoordinator v2, JoinGroup
  v5, SyncGroup v3) sends HEARTBEATS Heartbeat v3 one after another on one connection (our blocking client):
  median and p99 of each request's round trip.

Both brokers run with session.timeout.ms 6000 on the clients. Ours runs with group.initial.rebalance.delay.ms
at --initial-delay-ms (default 0, as a test broker runs; Kafka's default of 3000 ms adds exactly that to the
first join of an empty group, by design). Ratios are ours / Tansu: above 1 means ours takes longer (join) or
commits more per second (throughput).

Then, on our broker only (Tansu has no KIP-848), the classic protocol (range, cooperative-sticky) against the
consumer protocol (`group.protocol=consumer`, the broker's default `uniform` assignor), --repeats times each per run:
- join to first record: a new group's one consumer subscribes to a 6-partition topic holding records; seconds from
  subscribe() to the first record poll() returns;
- rebalance after a leave: 3 members reading the topic; one leaves cleanly (close()); seconds from the close() call
  until a record produced to each of its partitions after it closed has been read by one of the other two (the
  close's own time is reported too).
The broker answers consumer-protocol heartbeats every 500 ms (group.consumer.heartbeat.interval.ms, the test kit's
value; Kafka's default is 5000); classic clients keep librdkafka's defaults but for heartbeat.interval.ms 500 and
session.timeout.ms 6000, as above. Neither commits offsets: a partition moved to another member is read from the
start (auto.offset.reset=earliest), which with RECORDS_PER_PARTITION records is one fetch.
"""

from __future__ import annotations

import argparse
import struct
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.common import (
    BrokerProc,
    alternate_runs,
    compare_row,
    fmt_spread,
    print_table,
    start_ours,
    start_tansu,
    write_results,
)
from epoch_broker.client.blocking import BlockingKafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import find_coordinator, heartbeat, join_group, sync_group

PARTITIONS = 6
MEMBERS = 3
SESSION_MS = 6000
JOIN_TIMEOUT_S = 90.0
COOPERATIVE = "cooperative-sticky"
HEARTBEATS = 2000
CONSUMER_HEARTBEAT_MS = 500  # group.consumer.heartbeat.interval.ms, as epoch_broker.testing's BROKER_DEFAULTS
RECORDS_PER_PARTITION = 20
# (label, protocol): classic with its assignor, or the consumer protocol (KIP-848)
PROTOCOLS = (("classic range", "range"), ("classic cooperative-sticky", COOPERATIVE), ("consumer", "consumer"))
PROTOCOL_MEASURES = (("join to first record (s)", "first_record_s"), ("rebalance after a leave (s)", "rebalance_s"),
                     ("  of which close() (s)", "close_s"))


@dataclass
class RunResult:
    broker: str
    stable_s: float  # 3 consumers to Stable, eager
    fourth_s: float  # a 4th joins, eager
    cooperative_stable_s: float
    cooperative_fourth_s: float
    commits_per_s: float
    heartbeat_p50_ms: float
    heartbeat_p99_ms: float
    # ours only: protocol -> measure (PROTOCOL_MEASURES) -> one value per repeat
    protocols: dict[str, dict[str, list[float]]] = field(default_factory=dict)


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(30)


def consumer(bootstrap: str, group: str, strategy: str = "range") -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                     "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 500,
                     "auto.offset.reset": "earliest", "partition.assignment.strategy": strategy})


def time_to_stable(bootstrap: str, topic: str, strategy: str) -> tuple[float, float]:
    """Seconds from subscribe() to a group of MEMBERS sharing every partition, then from a further member's
    subscribe() to all of them sharing every partition."""
    group = f"bench-stable-{uuid.uuid4().hex[:8]}"
    members = [consumer(bootstrap, group, strategy) for _ in range(MEMBERS + 1)]
    assignments: list[set[int]] = [set() for _ in members]
    stop = threading.Event()

    def run(i: int) -> None:
        # eager: each assignment replaces the last; incremental: partitions are added and revoked one by one
        def on_assign(_: Consumer, partitions: list[TopicPartition]) -> None:
            assignments[i] = (assignments[i] if strategy == COOPERATIVE else set()) | {p.partition for p in partitions}

        def on_revoke(_: Consumer, partitions: list[TopicPartition]) -> None:
            assignments[i] = assignments[i] - {p.partition for p in partitions} if strategy == COOPERATIVE else set()

        members[i].subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        while not stop.is_set():
            members[i].poll(0.05)

    def wait_shared(count: int) -> float:
        start = time.perf_counter()
        while True:
            owned = [p for a in assignments[:count] for p in a]
            if sorted(owned) == list(range(PARTITIONS)) and all(assignments[:count]):
                return time.perf_counter() - start
            if time.perf_counter() - start > JOIN_TIMEOUT_S:
                raise TimeoutError(f"no stable group of {count} within {JOIN_TIMEOUT_S} s")
            time.sleep(0.005)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(MEMBERS + 1)]
    try:
        for t in threads[:MEMBERS]:
            t.start()
        formed = wait_shared(MEMBERS)
        threads[MEMBERS].start()
        return formed, wait_shared(MEMBERS + 1)
    finally:
        stop.set()
        for t in threads:
            if t.is_alive():
                t.join()
        for m in members:
            m.close()


def protocol_consumer(bootstrap: str, group: str, protocol: str) -> Consumer:
    """A classic consumer with `protocol` as its assignor, or a consumer-protocol one: librdkafka refuses the classic
    keys (session and heartbeat timing, assignor) with group.protocol=consumer, the broker deciding them."""
    if protocol != "consumer":
        return consumer(bootstrap, group, protocol)
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "group.protocol": "consumer"})


def fill(bootstrap: str, topic: str) -> Producer:
    """RECORDS_PER_PARTITION records in each partition; the producer, kept warm for the markers."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for partition in range(PARTITIONS):
        for i in range(RECORDS_PER_PARTITION):
            producer.produce(topic, f"fill-{i}".encode(), partition=partition)
    if producer.flush(30) != 0:
        raise RuntimeError("the topic was not filled within 30 s")
    return producer


def join_to_first_record(bootstrap: str, topic: str, protocol: str) -> float:
    """Seconds from a new group's only consumer subscribing to the first record it polls."""
    member = protocol_consumer(bootstrap, f"bench-first-{uuid.uuid4().hex[:8]}", protocol)
    try:
        start = time.perf_counter()
        member.subscribe([topic])
        while time.perf_counter() - start < JOIN_TIMEOUT_S:
            message = member.poll(0.01)
            if message is not None and message.error() is None:
                return time.perf_counter() - start
        raise TimeoutError(f"{protocol}: no record within {JOIN_TIMEOUT_S} s")
    finally:
        member.close()


def rebalance_after_leave(bootstrap: str, topic: str, protocol: str, producer: Producer) -> tuple[float, float]:
    """(seconds from a member's close() until a record produced to each partition it held, after it closed, has
    been read by another member; seconds the close() took)."""
    group = f"bench-leave-{uuid.uuid4().hex[:8]}"
    members = [protocol_consumer(bootstrap, group, protocol) for _ in range(MEMBERS)]
    owned: list[set[int]] = [set() for _ in members]
    read: set[bytes] = set()  # values the members still in the group read
    lock = threading.Lock()
    stops = [threading.Event() for _ in members]
    incremental = protocol != "range"  # cooperative-sticky and the consumer protocol assign and revoke partitions

    def run(i: int) -> None:
        def on_assign(_: Consumer, partitions: list[TopicPartition]) -> None:
            with lock:
                owned[i] = (owned[i] if incremental else set()) | {p.partition for p in partitions}

        def on_revoke(_: Consumer, partitions: list[TopicPartition]) -> None:
            with lock:
                owned[i] = owned[i] - {p.partition for p in partitions} if incremental else set()

        try:
            members[i].subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
            while not stops[i].is_set():
                message = members[i].poll(0.01)
                if message is not None and message.error() is None and i != 0:
                    with lock:
                        read.add(bytes(message.value() or b""))
        finally:
            members[i].close()  # the consumer's own thread closes it: a Consumer is not shared between threads

    threads = [threading.Thread(target=run, args=(i,)) for i in range(MEMBERS)]
    for t in threads:
        t.start()
    try:
        deadline = time.perf_counter() + JOIN_TIMEOUT_S
        while True:
            with lock:
                held = [set(o) for o in owned]
            if all(held) and sorted(p for o in held for p in o) == list(range(PARTITIONS)):
                break
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{protocol}: no stable group of {MEMBERS} within {JOIN_TIMEOUT_S} s")
            time.sleep(0.005)
        lost = held[0]
        start = time.perf_counter()
        stops[0].set()
        threads[0].join()
        closed = time.perf_counter() - start
        markers = {f"marker-{group}-{p}".encode() for p in lost}
        for p in lost:
            producer.produce(topic, f"marker-{group}-{p}".encode(), partition=p)
        producer.flush(30)
        while True:
            with lock:
                if markers <= read:
                    return time.perf_counter() - start, closed
            if time.perf_counter() - start > JOIN_TIMEOUT_S:
                raise TimeoutError(f"{protocol}: partitions {sorted(lost)} not read again within {JOIN_TIMEOUT_S} s")
            time.sleep(0.002)
    finally:
        for stop in stops:
            stop.set()
        for t in threads:
            t.join()


def compare_protocols(bootstrap: str, repeats: int) -> dict[str, dict[str, list[float]]]:
    topic = f"bench-protocols-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    producer = fill(bootstrap, topic)
    results: dict[str, dict[str, list[float]]] = {}
    for _, protocol in PROTOCOLS:
        measured = results[protocol] = {attr: [] for _, attr in PROTOCOL_MEASURES}
        for _ in range(repeats):
            measured["first_record_s"].append(join_to_first_record(bootstrap, topic, protocol))
            rebalance, closed = rebalance_after_leave(bootstrap, topic, protocol, producer)
            measured["rebalance_s"].append(rebalance)
            measured["close_s"].append(closed)
    return results


def commit_rate(bootstrap: str, topic: str, seconds: float) -> float:
    """Synchronous commits per second by one member of a stable group."""
    member = consumer(bootstrap, f"bench-commit-{uuid.uuid4().hex[:8]}")
    assigned = threading.Event()
    member.subscribe([topic], on_assign=lambda *_: assigned.set())
    try:
        deadline = time.perf_counter() + JOIN_TIMEOUT_S
        while not assigned.is_set():
            if time.perf_counter() > deadline:
                raise TimeoutError("the commit benchmark's consumer was never assigned")
            member.poll(0.05)
        commits = 0
        start = time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            commits += 1
            member.commit(offsets=[TopicPartition(topic, commits % PARTITIONS, commits)], asynchronous=False)
        return commits / elapsed
    finally:
        member.close()


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def heartbeat_round_trips(bootstrap: str, topic: str) -> tuple[float, float]:
    """(median, p99) ms of HEARTBEATS heartbeats of a member of a one-member group, sent one after another."""
    group = f"bench-heartbeat-{uuid.uuid4().hex[:8]}"
    # ConsumerProtocolSubscription / Assignment v0: version, topics, user data (null)
    subscription = struct.pack(">hi", 0, 1) + _string(topic) + struct.pack(">i", -1)
    assignment = struct.pack(">hii", 0, 0, -1)
    deadline = time.perf_counter() + JOIN_TIMEOUT_S
    with BlockingKafkaClient.connect(bootstrap, "bench-heartbeat") as client:
        client.negotiate()
        member_id, generation = "", -1
        while generation < 0:
            if time.perf_counter() > deadline:
                raise TimeoutError("the heartbeat benchmark's member never joined")
            client.request(find_coordinator.API, 2, find_coordinator.REQUEST.cls(key=group))
            joined = client.request(join_group.API, 5, join_group.REQUEST.cls(
                group_id=group, session_timeout_ms=SESSION_MS, rebalance_timeout_ms=SESSION_MS, member_id=member_id,
                protocol_type="consumer",
                protocols=[join_group.REQUEST.JoinGroupRequestProtocol(name="range", metadata=subscription)]))
            member_id = joined.member_id or member_id  # MEMBER_ID_REQUIRED hands out the id to join with
            if joined.error_code == ErrorCode.NONE:
                generation = joined.generation_id
            elif joined.error_code != ErrorCode.MEMBER_ID_REQUIRED:
                time.sleep(0.05)  # the coordinator is still loading
        synced = client.request(sync_group.API, 3, sync_group.REQUEST.cls(
            group_id=group, generation_id=generation, member_id=member_id,
            assignments=[sync_group.REQUEST.SyncGroupRequestAssignment(member_id=member_id, assignment=assignment)]))
        if synced.error_code != ErrorCode.NONE:
            raise RuntimeError(f"SyncGroup answered {ErrorCode(synced.error_code).name}")
        request = heartbeat.REQUEST.cls(group_id=group, generation_id=generation, member_id=member_id)
        rtts = []
        for _ in range(HEARTBEATS):
            started = time.perf_counter()
            answer = client.request(heartbeat.API, 3, request)
            rtts.append(time.perf_counter() - started)
            if answer.error_code != ErrorCode.NONE:
                raise RuntimeError(f"Heartbeat answered {ErrorCode(answer.error_code).name}")
    rtts.sort()
    return rtts[len(rtts) // 2] * 1000, rtts[int(len(rtts) * 0.99)] * 1000


def run_once(which: str, workdir: Path, commit_seconds: float, initial_delay_ms: int, repeats: int) -> RunResult:
    starter = start_tansu(workdir) if which == "tansu" else start_ours(
        workdir, {"group.initial.rebalance.delay.ms": str(initial_delay_ms), "offsets.topic.num.partitions": "5",
                  "group.consumer.heartbeat.interval.ms": str(CONSUMER_HEARTBEAT_MS)})
    with starter as broker:
        broker: BrokerProc
        topic = f"bench-groups-{uuid.uuid4().hex[:8]}"
        create_topic(broker.bootstrap, topic)
        eager = time_to_stable(broker.bootstrap, topic, "range")
        cooperative = time_to_stable(broker.bootstrap, topic, COOPERATIVE)
        rate = commit_rate(broker.bootstrap, topic, commit_seconds)
        beats = heartbeat_round_trips(broker.bootstrap, topic)
        protocols = compare_protocols(broker.bootstrap, repeats) if which == "ours" and repeats else {}
    return RunResult(which, *eager, *cooperative, rate, *beats, protocols)


def summarize(runs: list[RunResult]) -> list[list[str]]:
    def values(broker: str, attr: str) -> list[float]:
        return [getattr(r, attr) for r in runs if r.broker == broker]

    rows = []
    for label, attr, digits in (("range: 3 consumers to Stable (s)", "stable_s", 2),
                                ("range: a 4th joins, all 4 assigned (s)", "fourth_s", 2),
                                ("cooperative-sticky: 3 consumers to Stable (s)", "cooperative_stable_s", 2),
                                ("cooperative-sticky: a 4th joins, all 4 assigned (s)", "cooperative_fourth_s", 2),
                                ("sync commits/s", "commits_per_s", 0),
                                ("heartbeat round trip p50 (ms)", "heartbeat_p50_ms", 3),
                                ("heartbeat round trip p99 (ms)", "heartbeat_p99_ms", 3)):
        rows.append(compare_row(label, values("ours", attr), values("tansu", attr), digits))
    return rows


def summarize_protocols(runs: list[RunResult]) -> list[list[str]]:
    """One row per measure, one column per protocol: median (min-max) over every repeat of every run."""
    ours = [r for r in runs if r.protocols]
    return [[label, *(fmt_spread([v for r in ours for v in r.protocols[protocol][attr]], 2)
                      for _, protocol in PROTOCOLS)] for label, attr in PROTOCOL_MEASURES] if ours else []


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_groups", description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--commit-seconds", type=float, default=3.0)
    ap.add_argument("--initial-delay-ms", type=int, default=0, help="our group.initial.rebalance.delay.ms")
    ap.add_argument("--only", choices=["ours", "tansu"], help="measure one broker only")
    ap.add_argument("--repeats", type=int, default=3,
                    help="per run, repeats of each classic vs consumer protocol measure (ours; 0: none)")
    args = ap.parse_args(argv)
    runs = alternate_runs("epoch-bench-groups-", args.runs, args.only,
                          lambda which, workdir: run_once(which, workdir, args.commit_seconds, args.initial_delay_ms,
                                                          args.repeats),
                          lambda r: f"stable in {r.stable_s:.2f} s (cooperative {r.cooperative_stable_s:.2f} s), "
                                    f"4th in {r.fourth_s:.2f} s (cooperative {r.cooperative_fourth_s:.2f} s), "
                                    f"{r.commits_per_s:.0f} commits/s, heartbeat p50 {r.heartbeat_p50_ms:.3f} ms")
    table = summarize(runs)
    print_table(f"groups, confluent-kafka, median (min-max) of {args.runs} runs; ours with "
                f"group.initial.rebalance.delay.ms={args.initial_delay_ms}",
                ["metric", "ours", "tansu", "ours/tansu"], table)
    protocols = summarize_protocols(runs)
    if protocols:
        print_table(f"ours: classic vs consumer protocol (KIP-848), confluent-kafka, median (min-max) of "
                    f"{args.runs} runs x {args.repeats} repeats; 6 partitions, 3 members, one leaves with close(); "
                    f"broker: group.consumer.heartbeat.interval.ms={CONSUMER_HEARTBEAT_MS} (the test kit's; Kafka's "
                    f"is 5000), group.initial.rebalance.delay.ms={args.initial_delay_ms}; classic clients: "
                    f"heartbeat.interval.ms 500, session.timeout.ms {SESSION_MS}",
                    ["metric", *(label for label, _ in PROTOCOLS)], protocols)
    path = write_results("bench_groups", {"initial_delay_ms": args.initial_delay_ms, "repeats": args.repeats,
                                          "consumer_heartbeat_interval_ms": CONSUMER_HEARTBEAT_MS,
                                          "runs": [asdict(r) for r in runs], "table": table,
                                          "protocols_table": protocols})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
