"""Transaction benchmark: transactional against idempotent produce, in the same run, on our broker and on Tansu.

Each run, on a freshly started broker with a 3-partition topic, confluent-kafka with a user's ordinary settings
(acks=all, linger.ms 5, enable.idempotence):
- idempotent produce: N records of 1 KB (round-robin over the partitions), MB/s until all are acknowledged;
- transactional produce: the same N records as transactions of --txn-records records (begin, produce, commit:
  AddPartitionsToTxn, the records, EndTxn and the markers on every partition), MB/s, and each commit's latency
  (commit_transaction() call to return) at p50 and p99.
Ratios: transactional / idempotent within each broker (the cost of transactions), and ours / Tansu.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from confluent_kafka import Producer

from bench.bench_broker import create_topic
from bench.common import (
    BrokerProc,
    alternate_runs,
    compare_row,
    fmt_spread,
    print_table,
    send_all,
    start_ours,
    start_tansu,
    write_results,
)

PARTITIONS = 3
RECORD = b"x" * 1024
MB = 1024 * 1024


@dataclass
class RunResult:
    broker: str
    idempotent_mb_s: float
    transactional_mb_s: float
    commit_p50_ms: float
    commit_p99_ms: float


def producer_settings(bootstrap: str) -> dict[str, object]:
    return {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True}


def idempotent(bootstrap: str, topic: str, records: int) -> float:
    producer = Producer(producer_settings(bootstrap))
    producer.produce(topic, RECORD)  # connected, producer id and metadata known before the clock starts (as
    producer.flush(30)  # init_transactions() does for the transactional producer)
    elapsed = send_all(producer, topic, records, PARTITIONS, lambda _: RECORD)
    return records * len(RECORD) / MB / elapsed


def transactional(bootstrap: str, topic: str, records: int, per_txn: int) -> tuple[float, list[float]]:
    producer = Producer({**producer_settings(bootstrap), "transactional.id": f"bench-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(30)
    commits_ms = []
    started = time.perf_counter()
    for first in range(0, records, per_txn):
        producer.begin_transaction()
        for i in range(first, min(first + per_txn, records)):
            producer.produce(topic, RECORD, partition=i % PARTITIONS)
        committing = time.perf_counter()
        producer.commit_transaction(60)
        commits_ms.append((time.perf_counter() - committing) * 1000)
    return records * len(RECORD) / MB / (time.perf_counter() - started), commits_ms


def run_once(which: str, workdir: Path, records: int, per_txn: int) -> RunResult:
    starter = start_tansu(workdir) if which == "tansu" else start_ours(
        workdir, {"offsets.topic.num.partitions": "5", "transaction.state.log.num.partitions": "5"})
    with starter as broker:
        broker: BrokerProc
        idempotent_topic, txn_topic = (f"bench-{kind}-{uuid.uuid4().hex[:8]}" for kind in ("idem", "txn"))
        create_topic(broker.bootstrap, idempotent_topic, PARTITIONS)
        create_topic(broker.bootstrap, txn_topic, PARTITIONS)
        idempotent_rate = idempotent(broker.bootstrap, idempotent_topic, records)
        txn_rate, commits = transactional(broker.bootstrap, txn_topic, records, per_txn)
    commits.sort()
    return RunResult(which, idempotent_rate, txn_rate, statistics.median(commits),
                     commits[min(len(commits) - 1, int(len(commits) * 0.99))])


def summarize(runs: list[RunResult]) -> list[list[str]]:
    def values(broker: str, attr: str) -> list[float]:
        return [getattr(r, attr) for r in runs if r.broker == broker]

    rows = []
    for label, attr in (("idempotent produce MB/s", "idempotent_mb_s"),
                        ("transactional produce MB/s", "transactional_mb_s"),
                        ("commit_transaction p50 ms", "commit_p50_ms"), ("commit_transaction p99 ms", "commit_p99_ms")):
        rows.append(compare_row(label, values("ours", attr), values("tansu", attr)))
    for broker in ("ours", "tansu"):
        ratios = [r.transactional_mb_s / r.idempotent_mb_s for r in runs if r.broker == broker]
        if ratios:
            rows.append([f"{broker}: transactional / idempotent", fmt_spread(ratios, 2), "", ""])
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_transactions", description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--txn-records", type=int, default=100, help="records per transaction")
    ap.add_argument("--only", choices=["ours", "tansu"], help="measure one broker only")
    args = ap.parse_args(argv)
    runs = alternate_runs("epoch-bench-txn-", args.runs, args.only,
                          lambda which, workdir: run_once(which, workdir, args.records, args.txn_records),
                          lambda r: f"idempotent {r.idempotent_mb_s:.1f} MB/s, transactional "
                                    f"{r.transactional_mb_s:.1f} MB/s, commit p50 {r.commit_p50_ms:.1f} ms")
    table = summarize(runs)
    print_table(f"transactions of {args.txn_records} x 1 KB, {args.records} records, confluent-kafka acks=all "
                f"linger.ms 5, median (min-max) of {args.runs} runs", ["metric", "ours", "tansu", "ours/tansu"],
                table)
    path = write_results("bench_transactions", {"records": args.records, "txn_records": args.txn_records,
                                                "runs": [asdict(r) for r in runs], "table": table})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
