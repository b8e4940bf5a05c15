"""One group consumer in its own process, for the group tests: `worker.py CLIENT BOOTSTRAP TOPIC GROUP SESSION_MS`.

CLIENT is confluent, confluent-consumer (KIP-848, `group.protocol=consumer`: the broker sets the session and
heartbeat timings, and rebalances are incremental), kafka-python or aiokafka. The consumer subscribes, and for
every record commits offset + 1 synchronously before reporting it, so a reported record is a committed one; a
record whose commit fails (the partition moved in a rebalance) is not reported and the new owner reads it again.
Stdout, one JSON object per line:
    {"e": "assigned", "p": [partitions], "ms": ms since start}    each new assignment (also when revoked: [])
    {"e": "committed", "p": partition, "o": offset, "v": value}
    {"e": "closed"}                                                 after "close" on stdin: a clean leave
"""

from __future__ import annotations

import asyncio
import json
import select
import sys
import time
from typing import Any

CLIENT, BOOTSTRAP, TOPIC, GROUP, SESSION_MS = sys.argv[1:6]
SESSION = int(SESSION_MS)
HEARTBEAT = 500
START = time.monotonic()


def emit(**event: Any) -> None:
    print(json.dumps(event), flush=True)


def assigned(partitions: list[int]) -> None:
    emit(e="assigned", p=sorted(partitions), ms=int((time.monotonic() - START) * 1000))


def close_requested() -> bool:
    return bool(select.select([sys.stdin], [], [], 0)[0]) and sys.stdin.readline().strip() == "close"


def run_confluent(group_protocol: str) -> None:
    from confluent_kafka import Consumer, KafkaException

    config: dict[str, Any] = {"bootstrap.servers": BOOTSTRAP, "group.id": GROUP, "auto.offset.reset": "earliest",
                              "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000}
    if group_protocol == "consumer":
        # Incremental: on_assign adds, on_revoke/on_lost take away; the broker owns the session timings.
        owned: set[int] = set()

        def add(c: Any, ps: list[Any]) -> None:
            owned.update(p.partition for p in ps)
            assigned(list(owned))

        def take(c: Any, ps: list[Any]) -> None:
            owned.difference_update(p.partition for p in ps)
            assigned(list(owned))

        consumer = Consumer({**config, "group.protocol": "consumer"})
        consumer.subscribe([TOPIC], on_assign=add, on_revoke=take, on_lost=take)
    else:
        consumer = Consumer({**config, "session.timeout.ms": SESSION, "heartbeat.interval.ms": HEARTBEAT})
        consumer.subscribe([TOPIC], on_assign=lambda c, ps: assigned([p.partition for p in ps]),
                           on_revoke=lambda c, ps: assigned([]))
    while not close_requested():
        message = consumer.poll(0.1)
        if message is None or message.error():
            continue
        try:
            consumer.commit(message=message, asynchronous=False)
        except KafkaException:
            continue
        emit(e="committed", p=message.partition(), o=message.offset(), v=message.value().decode())
    consumer.close()


def run_kafka_python() -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata
    from kafka.errors import KafkaError

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            assigned([])

        def on_partitions_assigned(self, assignment: Any) -> None:
            assigned([tp.partition for tp in assignment])

    consumer = KafkaConsumer(
        bootstrap_servers=BOOTSTRAP, group_id=GROUP, auto_offset_reset="earliest", enable_auto_commit=False,
        session_timeout_ms=SESSION, heartbeat_interval_ms=HEARTBEAT, metadata_max_age_ms=1000,
    )
    consumer.subscribe([TOPIC], listener=Listener())
    while not close_requested():
        for tp, messages in consumer.poll(timeout_ms=100).items():
            for message in messages:
                try:
                    consumer.commit({tp: OffsetAndMetadata(message.offset + 1, "", -1)})
                except KafkaError:
                    break
                emit(e="committed", p=tp.partition, o=message.offset, v=message.value.decode())
    consumer.close()


async def run_aiokafka() -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.errors import KafkaError

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked: Any) -> None:
            assigned([])

        async def on_partitions_assigned(self, assignment: Any) -> None:
            assigned([tp.partition for tp in assignment])

    consumer = AIOKafkaConsumer(
        bootstrap_servers=BOOTSTRAP, group_id=GROUP, auto_offset_reset="earliest", enable_auto_commit=False,
        session_timeout_ms=SESSION, heartbeat_interval_ms=HEARTBEAT, metadata_max_age_ms=1000,
    )
    consumer.subscribe([TOPIC], listener=Listener())
    await consumer.start()
    while not close_requested():
        for tp, messages in (await consumer.getmany(timeout_ms=100)).items():
            for message in messages:
                try:
                    await consumer.commit({tp: message.offset + 1})
                except KafkaError:
                    break
                emit(e="committed", p=tp.partition, o=message.offset, v=message.value.decode())
    await consumer.stop()


if CLIENT in ("confluent", "confluent-consumer"):
    run_confluent("consumer" if CLIENT == "confluent-consumer" else "classic")
elif CLIENT == "kafka-python":
    run_kafka_python()
else:
    asyncio.run(run_aiokafka())
emit(e="closed")
