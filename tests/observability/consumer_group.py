"""A KIP-848 consumer group for the observability tests: confluent-kafka consumers with `group.protocol=consumer`,
each polled by its own thread (reconciliation moves on as the application polls), until closed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from epoch_broker import testing


class PolledMember:
    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
        self.owned: set[int] = set()
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _assigned(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        with self.lock:
            self.owned.update(p.partition for p in partitions)

    def _revoked(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        with self.lock:
            self.owned.difference_update(p.partition for p in partitions)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.consumer.poll(0.1)
        finally:
            self.consumer.close()  # a leave: member epoch -1

    def owns(self) -> set[int]:
        with self.lock:
            return set(self.owned)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "the consumer did not close"


@contextmanager
def consumer_group(bootstrap: str, group: str, topic: str, partitions: int,
                   members: int) -> Iterator[list[PolledMember]]:
    """`members` members subscribed to `topic`, yielded once they own its `partitions` partitions between them, each
    at least one; closed (left) at the end unless the test closed them already."""
    started = [PolledMember(bootstrap, group, topic) for _ in range(members)]
    try:
        def spread() -> bool:
            owned = [member.owns() for member in started]
            return all(owned) and sorted(p for o in owned for p in o) == list(range(partitions))

        testing.wait_until(spread, f"{members} members owning the {partitions} partitions of {topic}")
        yield started
    finally:
        for member in started:
            if member._thread.is_alive():
                member.close()
