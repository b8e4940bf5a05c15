"""The durable side of share-partitions (KIP-932), as a partition leader sees it (Kafka's `Persister` and the
share-partition's writes through it): the state lives at the share group's coordinator
(broker/groups/share_state.py) and is read and written with ReadShareGroupState / WriteShareGroupState.

Rules:
- The coordinator is the leader of the group's `__consumer_offsets` partition (the topic made if missing): this
  broker's own group coordinator is called directly, another broker over one kept connection (inter_broker.py,
  CLUSTER_ACTION on its side).
- Coordinator moves (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, a lost connection)
  are retried, the route found again each time, until REQUEST_TIMEOUT_S has passed; then the last error is the
  answer. FENCED_LEADER_EPOCH and FENCED_STATE_EPOCH are answers at once.
- `ShareWriter` writes one share-partition's whole snapshot, one write at a time: a change made while a write is
  in flight goes in the next one, which carries every change made until it starts. `flush()` returns once a
  write holding every change made before the call is replicated, or with the error that ended the writer: after
  an error the writer writes nothing more (the leader drops the share-partition and reads it again).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from epoch_broker.broker.groups.coordinator import OFFSETS_TOPIC, partition_for
from epoch_broker.broker.groups.records import ShareSnapshotKey
from epoch_broker.broker.groups.share_state import NOT_WRITTEN, ShareState, StateBatch
from epoch_broker.broker.replica.share_partition import SharePartition
from epoch_broker.broker.transactions.inter_broker import InterBrokerClients
from epoch_broker.client.aio import KafkaClient
from epoch_broker.protocol.errors import ErrorCode, KafkaError
from epoch_broker.protocol.messages import read_share_group_state, write_share_group_state

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 10.0
RETRY_BACKOFF_S = 0.1
RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NETWORK_EXCEPTION,
                       ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS,
                       ErrorCode.NOT_LEADER_OR_FOLLOWER})
T = TypeVar("T")


class SharePersister(Protocol):
    async def read(self, key: ShareSnapshotKey, leader_epoch: int) -> tuple[ErrorCode, ShareState]: ...

    async def write(self, key: ShareSnapshotKey, state: ShareState) -> ErrorCode: ...


class CoordinatorPersister:
    """Reads and writes share-partition state at the share group's coordinator."""

    def __init__(self, broker: Any) -> None:  # broker.app.Broker, typed loosely (import cycle)
        self.broker = broker
        self.clients = InterBrokerClients(broker, "share-state")

    async def read(self, key: ShareSnapshotKey, leader_epoch: int) -> tuple[ErrorCode, ShareState]:
        async def remote(client: KafkaClient) -> tuple[ErrorCode, ShareState]:
            q = read_share_group_state.REQUEST
            request = q.cls(group_id=key.group, topics=[q.ReadStateData(topic_id=key.topic_id, partitions=[
                q.PartitionData(partition=key.partition, leader_epoch=leader_epoch)])])
            answer = (await client.request(read_share_group_state.API, 0, request)).results[0].partitions[0]
            return ErrorCode(answer.error_code), ShareState(
                answer.state_epoch, leader_epoch, answer.start_offset,
                tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                      for b in answer.state_batches))

        return await self._route(key, lambda coordinator: coordinator.read_share_state(key, leader_epoch), remote,
                                 lambda error: (error, NOT_WRITTEN), lambda answer: answer[0])

    async def write(self, key: ShareSnapshotKey, state: ShareState) -> ErrorCode:
        async def remote(client: KafkaClient) -> ErrorCode:
            q = write_share_group_state.REQUEST
            request = q.cls(group_id=key.group, topics=[q.WriteStateData(topic_id=key.topic_id, partitions=[
                q.PartitionData(partition=key.partition, state_epoch=state.state_epoch,
                                leader_epoch=state.leader_epoch, start_offset=state.start_offset,
                                state_batches=[q.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                                            delivery_state=b.delivery_state,
                                                            delivery_count=b.delivery_count)
                                               for b in state.state_batches])])])
            answer = (await client.request(write_share_group_state.API, 0, request)).results[0].partitions[0]
            return ErrorCode(answer.error_code)

        return await self._route(key, lambda coordinator: coordinator.write_share_state(key, state), remote,
                                 lambda error: error, lambda error: error)

    async def _route(self, key: ShareSnapshotKey, local: Callable[[Any], Awaitable[T]],
                     remote: Callable[[KafkaClient], Awaitable[T]], failed: Callable[[ErrorCode], T],
                     error_of: Callable[[T], ErrorCode]) -> T:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + REQUEST_TIMEOUT_S
        while True:
            answer = await self._once(key, local, remote, failed, deadline - loop.time())
            if error_of(answer) not in RETRIABLE or loop.time() + RETRY_BACKOFF_S >= deadline:
                return answer
            await asyncio.sleep(RETRY_BACKOFF_S)  # the coordinator moves: the metadata says where, soon

    async def _once(self, key: ShareSnapshotKey, local: Callable[[Any], Awaitable[T]],
                    remote: Callable[[KafkaClient], Awaitable[T]], failed: Callable[[ErrorCode], T],
                    timeout_s: float) -> T:
        broker = self.broker
        if OFFSETS_TOPIC not in broker.metadata.topics_by_name and broker.group_coordinator is not None:
            try:  # made on first use, as by a group's first FindCoordinator (share fetches by hand come first)
                await broker.group_coordinator.ensure_offsets_topic()
            except KafkaError as exc:
                return failed(exc.code)
        state = broker.metadata.partition(OFFSETS_TOPIC, partition_for(key.group,
                                                                       broker.config.offsets_topic_num_partitions))
        if state is None or state.leader < 0:
            return failed(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if state.leader == broker.node_id:
            coordinator = broker.group_coordinator
            return failed(ErrorCode.COORDINATOR_NOT_AVAILABLE) if coordinator is None else await local(coordinator)
        try:
            client = await asyncio.wait_for(self.clients.get(state.leader), timeout_s)
            return await asyncio.wait_for(remote(client), timeout_s)
        except (OSError, TimeoutError) as exc:
            log.debug("share state request to broker %d failed: %s", state.leader, exc)
            self.clients.drop(state.leader)
            return failed(ErrorCode.NETWORK_EXCEPTION)

    async def close(self) -> None:
        await self.clients.close()


class ShareWriter:
    """Writes one share-partition's snapshot to its coordinator (see the module's rules)."""

    def __init__(self, persister: SharePersister, key: ShareSnapshotKey, leader_epoch: int,
                 share: SharePartition) -> None:
        self.persister = persister
        self.key = key
        self.leader_epoch = leader_epoch
        self.share = share
        self.error = ErrorCode.NONE  # what ended the writer
        self._waiting: list[asyncio.Future[ErrorCode]] = []
        self.task: asyncio.Task[None] | None = None

    async def flush(self) -> ErrorCode:
        if self.error != ErrorCode.NONE:
            return self.error
        future: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        self._waiting.append(future)
        if self.task is None:
            self.task = asyncio.create_task(self._run())
        return await asyncio.shield(future)  # a caller giving up does not stop the write the others wait for

    async def _run(self) -> None:
        try:
            while self._waiting and self.error == ErrorCode.NONE:
                waiting, self._waiting = self._waiting, []
                snapshot = self.share.snapshot()
                self.error = await self.persister.write(self.key, ShareState(
                    snapshot.state_epoch, self.leader_epoch, snapshot.start_offset,
                    snapshot.state_batches))
                for future in waiting:
                    future.set_result(self.error)
            if self.error != ErrorCode.NONE:
                log.info("share group %s on %s-%d: its state could not be written (%s); read again on next use",
                         self.key.group, self.key.topic_id.hex(), self.key.partition, self.error.name)
        except BaseException:
            self.error = ErrorCode.UNKNOWN_SERVER_ERROR
            raise
        finally:
            for future in self._waiting:
                future.set_result(self.error)
            self._waiting = []
            self.task = None
