"""What the managers of one `__consumer_offsets` partition may use of the coordinator that runs them (Kafka's
CoordinatorRuntime, as a shard sees it): the one write path, writes nobody waits for, the clock, the metadata.

Rules:
- Every record reaches the log through `append`: one batch, appended in call order, its future completing with the
  batch's base offset once replicated (None for no entries), or raising KafkaError. A manager applies a write to
  its state after the append (commits), or before it and undoes it on failure (deletions), as each rule says.
- `spawn` runs a write no request waits for (a group turned empty, a deleted topic's offsets): logged if it
  fails, awaited by the coordinator's stop().
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from epoch_broker.broker.groups.group import Entry

if TYPE_CHECKING:
    from epoch_broker.broker.groups.consumer_protocol import ConsumerGroupConfig
    from epoch_broker.broker.groups.coordinator import GroupCoordinator
    from epoch_broker.broker.groups.share_protocol import ShareGroupConfig


class ShardRuntime:
    def __init__(self, coordinator: GroupCoordinator, partition: int) -> None:
        self._coordinator = coordinator
        self.partition = partition  # of __consumer_offsets

    def append(self, entries: Sequence[Entry], producer: tuple[int, int] | None = None) -> asyncio.Future[Any]:
        """Append `entries` to this partition in one batch (with `producer` (id, epoch): that producer's
        transactional batch); await the result for the base offset once they are replicated."""
        return self._coordinator.append(self.partition, entries, producer)

    def spawn(self, write: Awaitable[Any]) -> None:
        self._coordinator.spawn(write)

    def now_ms(self) -> int:
        return self._coordinator.now_ms()

    def topic_partition(self, topic: str, partition: int) -> Any:
        """The metadata's PartitionState of a topic partition, None if it does not exist."""
        return self._coordinator.broker.metadata.partition(topic, partition)

    def topics(self) -> Mapping[str, Any]:
        """The metadata's topics by name (TopicState: topic_id, partitions)."""
        topics: Mapping[str, Any] = self._coordinator.broker.metadata.topics_by_name
        return topics

    @property
    def consumer_group_config(self) -> ConsumerGroupConfig:
        return self._coordinator.consumer_group_config

    @property
    def share_group_config(self) -> ShareGroupConfig:
        return self._coordinator.share_group_config

    def group_config(self, group_id: str, name: str) -> str | None:
        """A config the group set on its GROUP resource, None when it did not."""
        value: str | None = self._coordinator.broker.metadata.group_config(group_id, name)
        return value

    def topic_id(self, topic: str) -> bytes | None:
        state = self._coordinator.broker.metadata.topics_by_name.get(topic)
        return None if state is None else state.topic_id

    @property
    def initial_rebalance_delay_ms(self) -> int:
        return self._coordinator.initial_delay_ms

    @property
    def session_timeout_bounds_ms(self) -> tuple[int, int]:
        return self._coordinator.session_timeout_bounds_ms

    def record_rebalance(self, group_id: str) -> None:
        if (metrics := self._coordinator.broker.metrics) is not None:
            metrics.record_rebalance(group_id)

    def record_consumer_group_rebalance(self, group_id: str) -> None:
        """A consumer group's epoch was bumped (Kafka's ConsumerGroupRebalances sensor)."""
        if (metrics := self._coordinator.broker.metrics) is not None:
            metrics.record_consumer_group_rebalance(group_id)
