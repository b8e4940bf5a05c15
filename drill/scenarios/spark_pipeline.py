"""spark-pipeline: its plan holds each of its three faults once, in an order drawn from the seed, then more drawn
from them while the duration lasts, each a gap apart in which the query runs a few micro-batches. A driver-kill is
followed by DRIVER_START_S more: the driver's start (a JVM, two executors, the query resumed and a micro-batch run)
takes 15-30 s on two loaded cores, and the heal waits for it; without it the faults after one would come back to
back, and a driver killed again before its first micro-batch ended would never let the query commit one."""

import random

from epoch_broker.drill.nemesis import FAULTS, SPARK_DRIVER, SPARK_EXECUTOR, ScheduledFault
from epoch_broker.drill.scenarios import PRODUCER_INVARIANTS, Scenario

PIPELINE_FAULTS = ("leader-kill", "executor-kill", "driver-kill")
GAP_S = (2.0, 4.0)  # between faults: a few 500 ms triggers
DRIVER_START_S = 20.0


def plan(seed: int, duration_s: float, brokers: list[str], partitions: int) -> list[ScheduledFault]:
    rng = random.Random(seed)
    first = list(PIPELINE_FAULTS)
    rng.shuffle(first)
    schedule: list[ScheduledFault] = []
    at = rng.uniform(*GAP_S)
    while True:
        name = first[len(schedule)] if len(schedule) < len(first) else rng.choice(PIPELINE_FAULTS)
        length = round(rng.uniform(*FAULTS[name].durations), 2)
        if at + length > duration_s:
            return schedule
        target = {"driver-kill": SPARK_DRIVER, "executor-kill": SPARK_EXECUTOR}.get(
            name, f"leader:{rng.randrange(partitions)}")
        schedule.append(ScheduledFault(round(at, 2), name, target, length))
        at += length + rng.uniform(*GAP_S) + (DRIVER_START_S if name == "driver-kill" else 0.0)


SCENARIO = Scenario(
    "spark-pipeline", "a Spark streaming query copies the topic exactly once while its driver, an executor and "
                      "leaders are killed",
    "The transactional producer of the transactions drill feeds the topic (committing three transactions in four, "
    "aborting the fourth on purpose) while a Spark Structured Streaming query, a driver process of its own on "
    "`local-cluster[2,1,1024]` (drill/pipeline.py), reads it through `kafka-epoch` with "
    "`kafka.isolation.level=read_committed`, maps each record to one row (key: the record's stream `p<partition>`; "
    "value: `<partition>:<offset>:<VALUE>`) and writes a second topic, `drill-output`, through the exactly-once "
    "sink (`exactlyOnce=true`), a micro-batch every 500 ms, its checkpoint in the report directory. The nemesis "
    "SIGKILLs partition leaders, one executor JVM (Spark's worker starts another and the tasks run again, fencing "
    "the killed attempts' transactions) and the driver with everything it started (started again from its "
    "checkpoint: the micro-batch it was in runs again and writes only what had not committed); each of the three "
    "comes at least once, in an order drawn from the seed. After healing the output is read read_committed: every "
    "record of the input's final read_committed log has exactly one row, no row comes from an aborted transaction "
    "or names no input record, and each stream's rows are in its input order.",
    PIPELINE_FAULTS, (*PRODUCER_INVARIANTS, "aborted_read", "partial_transaction", "pipeline_exactly_once",
                      "pipeline_order"),
    duration_s=60.0, transactional=True, pipeline=True, plan=plan)
