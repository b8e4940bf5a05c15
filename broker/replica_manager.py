"""The partitions this broker hosts: created, led and deleted as metadata records arrive; appends and reads.

Rules:
- Partitions follow the metadata (`apply_metadata`): a replica assigned here gets a Partition and a log; a
  removed topic loses both; a leadership with a newer epoch is taken before any request sees the partition.
- Produce appends only on the leader, after the KIP-320/359 epoch check; every batch is validated (framing,
  magic, CRC32C, message.max.bytes) and the idempotent producer's sequence checked before a byte is written.
- acks=all completes when the high watermark passes the batch (`Partition.wait_for_high_watermark`, the
  delayed-produce purgatory); on one broker that is right after the local append.
- Reads never decode records: they return file ranges (`FileRecords`) that the server sends with sendfile.
- Internal topics (`__consumer_offsets`) use the same logs through `ensure_internal_topic`, `append_internal`
  and `read_internal`, which do decode records: they serve the group coordinator, not the hot path.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from broker.config import BrokerConfig, topic_config
from broker.controller.channel import ControllerChannel
from broker.controller.controller import NewTopic
from broker.controller.records import RemoveTopicRecord
from broker.faults import BrokerFaults
from broker.metadata_cache import MetadataCache, TopicState
from broker.partition import Partition
from protocol.errors import ErrorCode, KafkaError
from protocol.records import iter_batches, iter_records
from storage.log import LONG_MAX, LogConfig
from storage.log_manager import LogManager
from storage.producer_state import Verdict

log = logging.getLogger(__name__)

_VERDICT_ERRORS = {
    Verdict.OUT_OF_ORDER_SEQUENCE: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    Verdict.INVALID_PRODUCER_EPOCH: ErrorCode.INVALID_PRODUCER_EPOCH,
}


INTERNAL_APPEND_TIMEOUT_S = 5.0


@dataclass(slots=True)
class AppendResult:
    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    last_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None


def log_config_for(config: BrokerConfig, topic_configs: dict[str, Any]) -> LogConfig:
    compacted = topic_configs["cleanup.policy"] == "compact"  # never deleted by age or size
    return LogConfig(
        segment_bytes=topic_configs["segment.bytes"],
        segment_ms=topic_configs["segment.ms"],
        retention_bytes=-1 if compacted else topic_configs["retention.bytes"],
        retention_ms=-1 if compacted else topic_configs["retention.ms"],
        flush_interval_messages=topic_configs["flush.messages"],
        flush_interval_ms=LONG_MAX if topic_configs["flush.ms"] is None else topic_configs["flush.ms"],
        message_timestamp_type=topic_configs["message.timestamp.type"],
        fsync_every_append=config.log_flush_every_append,
    )


class ReplicaManager:
    def __init__(self, config: BrokerConfig, log_manager: LogManager, metadata: MetadataCache,
                 channel: ControllerChannel, faults: BrokerFaults, broker_epoch: Callable[[], int]) -> None:
        self.config = config
        self.node_id = config.node_id
        self.log_manager = log_manager
        self.metadata = metadata
        self.channel = channel
        self.faults = faults
        self.broker_epoch = broker_epoch  # the current epoch changes when the broker re-registers
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.partitions_by_topic_id: dict[bytes, dict[int, Partition]] = {}
        self.stopping = False  # set at shutdown: long polls answer at once

    # -- following the metadata ---------------------------------------------------------------------

    def apply_metadata(self, records: list[Any]) -> None:
        """Bring hosted partitions in line with the metadata after `records` were applied to the cache."""
        for record in records:
            if isinstance(record, RemoveTopicRecord):
                self._remove_topic(record.topic_id)
        touched = {r.topic_id for r in records if hasattr(r, "topic_id") and not isinstance(r, RemoveTopicRecord)}
        for topic_id in touched:
            topic = self.metadata.topics_by_id.get(topic_id)
            if topic is not None:
                self._sync_topic(topic)

    def _sync_topic(self, topic: TopicState) -> None:
        configs = topic_config(self.config, topic.configs)
        hosted = self.partitions_by_topic_id.setdefault(topic.topic_id, {})
        for index, state in topic.partitions.items():
            if self.node_id not in state.replicas:
                continue
            partition = hosted.get(index)
            if partition is None:
                partition_log = self.log_manager.get_or_create_log(topic.name, index)
                partition = Partition(topic.name, index, topic.topic_id, partition_log, self.node_id, configs)
                hosted[index] = self.partitions[(topic.name, index)] = partition
            partition.configs = configs
            partition.log.config = log_config_for(self.config, configs)
            if partition.update(state.leader, state.leader_epoch, state.partition_epoch, state.replicas, state.isr):
                log.info("%s-%d: leading in epoch %d from offset %d", topic.name, index, state.leader_epoch,
                         partition.log.log_end_offset)

    def _remove_topic(self, topic_id: bytes) -> None:
        for partition in self.partitions_by_topic_id.pop(topic_id, {}).values():
            del self.partitions[(partition.topic, partition.index)]
            partition.leader_id = -1
            partition.wake_waiters()
            self.log_manager.delete_log(partition.topic, partition.index)

    def remove_strays(self) -> None:
        """Start: delete logs of partitions the metadata no longer places here (deleted while we were down)."""
        for topic, index in list(self.log_manager.logs):
            if (topic, index) not in self.partitions:
                log.warning("deleting stray log %s-%d: not assigned to this broker", topic, index)
                self.log_manager.delete_log(topic, index)

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def get_by_id(self, topic_id: bytes, index: int) -> Partition | None:
        return self.partitions_by_topic_id.get(topic_id, {}).get(index)

    def lookup_error(self, topic: str, index: int) -> ErrorCode:
        """Why there is no local partition: the topic exists elsewhere (not leader) or not at all."""
        if self.metadata.partition(topic, index) is not None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    # -- produce ------------------------------------------------------------------------------------

    def append(self, partition: Partition, records: Any, current_leader_epoch: int = -1) -> AppendResult:
        """Validate and append one partition's batches as leader (the frame bytes are stamped in place)."""
        error = partition.leader_error(current_leader_epoch)
        if error != ErrorCode.NONE:
            return AppendResult(error)
        partition_log = partition.log
        try:
            duplicate = self._check_batches(partition, records)
            if duplicate is not None:
                return duplicate
            info = partition_log.append_as_leader(records, partition.leader_epoch)
        except KafkaError as exc:
            return AppendResult(exc.code, message=str(exc))
        partition.maybe_advance_high_watermark()
        return AppendResult(ErrorCode.NONE, info.first_offset, info.last_offset, info.log_append_time,
                            partition_log.log_start_offset)

    @staticmethod
    def _check_batches(partition: Partition, records: Any) -> AppendResult | None:
        """message.max.bytes and the idempotent producer's sequence; a duplicate batch is answered as the
        original was (DUPLICATE_SEQUENCE_NUMBER is success to the producer)."""
        max_bytes = partition.configs["max.message.bytes"]
        producer_state = partition.log.producer_state
        for _, header in iter_batches(records):
            if header.total_size > max_bytes:
                return AppendResult(ErrorCode.MESSAGE_TOO_LARGE,
                                    message=f"batch of {header.total_size} bytes > max.message.bytes {max_bytes}")
            if header.producer_id < 0:
                continue
            check = producer_state.check_and_update(header.producer_id, header.producer_epoch,
                                                    header.base_sequence, header.last_sequence)
            if check.verdict is Verdict.DUPLICATE:
                return AppendResult(ErrorCode.NONE, check.first_offset, check.last_offset, -1,
                                    partition.log.log_start_offset)
            if check.verdict is not Verdict.OK:
                return AppendResult(_VERDICT_ERRORS[check.verdict],
                                    message=f"producer {header.producer_id}: {check.verdict.value}")
        return None

    # -- fetch --------------------------------------------------------------------------------------

    def release_waiters(self) -> None:
        """Shutdown: answer every long-polling fetch now."""
        self.stopping = True
        for partition in self.partitions.values():
            partition.wake_waiters()

    # -- internal topics (the group coordinator's __consumer_offsets) -------------------------------

    async def ensure_internal_topic(self, name: str, partitions: int, configs: dict[str, str]) -> None:
        """Create the topic `name` with `partitions` partitions and topic `configs` unless it exists.

        When it returns, this broker hosts the partitions it was assigned and leads them where elected (the
        embedded controller commits and publishes the records before returning; a coroutine so that a remote
        controller fits behind the same call). Raises KafkaError if the controller refuses.
        """
        if name in self.metadata.topics_by_name:
            return
        (result,) = await self.channel.create_topics([NewTopic(name, partitions, -1, {}, dict(configs))], False)
        if result.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            raise KafkaError(result.error_message or "", result.error_code)

    async def append_internal(self, topic: str, partition: int, batch: bytearray,
                              timeout_s: float = INTERNAL_APPEND_TIMEOUT_S) -> int:
        """Append one record batch to `topic`-`partition` as its leader and return its base offset, once the
        high watermark has passed it (acks=all semantics; immediate on one broker).

        The batch is stamped in place (offsets, leader epoch). Raises KafkaError (NOT_LEADER_OR_FOLLOWER,
        UNKNOWN_TOPIC_OR_PARTITION, CORRUPT_MESSAGE, a storage error, REQUEST_TIMED_OUT) if it cannot be
        appended and replicated.
        """
        hosted = self.get(topic, partition)
        if hosted is None:
            raise KafkaError(f"{topic}-{partition} is not hosted here", self.lookup_error(topic, partition))
        result = self.append(hosted, batch)
        if result.error != ErrorCode.NONE:
            raise KafkaError(result.message or "", result.error)
        if not await hosted.wait_for_high_watermark(result.last_offset, timeout_s):
            raise KafkaError(f"{topic}-{partition}: not replicated in time", ErrorCode.REQUEST_TIMED_OUT)
        return result.base_offset

    def read_internal(self, topic: str, partition: int, start_offset: int = 0
                      ) -> Iterator[tuple[int, bytes | None, bytes | None]]:
        """(offset, key, value) of every record from `start_offset` to the log end, decoded (decompressed).

        Reads in 1 MiB chunks, so loading a large partition does not hold it all in memory. Raises KafkaError
        when the partition is not hosted here.
        """
        hosted = self.get(topic, partition)
        if hosted is None:
            raise KafkaError(f"{topic}-{partition} is not hosted here", self.lookup_error(topic, partition))
        partition_log = hosted.log
        offset = max(start_offset, partition_log.log_start_offset)
        while offset < partition_log.log_end_offset:
            chunk = partition_log.read_bytes(offset, 1 << 20)
            if not chunk:
                return
            for position, header in iter_batches(chunk):
                for record in iter_records(chunk, position, header):
                    if record.offset >= start_offset:
                        yield record.offset, record.key, record.value
                offset = header.next_offset
