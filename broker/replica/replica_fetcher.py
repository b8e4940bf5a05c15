"""Replica fetchers: the follower side of replication (KIP-101, KIP-279, KIP-320; docs/cluster.md).

Rules:
- One `ReplicaFetcher` per source broker (the leader of the partitions it copies), one connection each,
  reconnecting with backoff. `ReplicaFetchers.follow` hands a partition over when this broker becomes its
  follower for a new leader or leader epoch; `unfollow` takes it back (it leads, it has no leader, it was
  deleted). A fetcher left without partitions stops.
- Every hand-over truncates before fetching: OffsetForLeaderEpoch v4 for the follower's latest epoch, then
  Kafka's rule (`Partition.truncate_to_epoch_end`), asking again while it says so (KIP-279). No epoch of ours
  to ask about keeps the log: a follower never truncates to its high watermark (KIP-101 scenario 1).
- Fetch (v13+ by topic id; v12 by name from a leader claiming Kafka 2.8 or 3.0) from the log end with
  current_leader_epoch and last_fetched_epoch. A DivergingEpoch answer
  truncates by the same rule instead of appending; batches are appended as they came
  (`Partition.append_as_follower`: opaque bytes, the log takes their epochs from the headers).
- Errors: FENCED_LEADER_EPOCH and NOT_LEADER_OR_FOLLOWER park the partition until the metadata gives a new
  epoch (a new hand-over); OFFSET_OUT_OF_RANGE below the leader's log start restarts the log there; the rest
  (UNKNOWN_LEADER_EPOCH: the leader has not seen the epoch yet) retry after a backoff.
- An answer is applied only while the partition's fetch state is the one it was asked for: a hand-over in
  flight (a newer epoch) voids it, and the new state truncates again first.
- `fault.replication.paused`: the fetcher idles, checking the flag every 100 ms; a fetch answer that arrives
  once it is set is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from epoch_broker.broker.faults import BrokerFaults
from epoch_broker.broker.metadata.image import MetadataCache
from epoch_broker.broker.replica.partition import Partition
from epoch_broker.client.aio import PLAINTEXT, KafkaClient, Security
from epoch_broker.protocol.errors import ErrorCode, KafkaError
from epoch_broker.protocol.messages import fetch, offset_for_leader_epoch

log = logging.getLogger(__name__)

FETCH_MAX_WAIT_MS = 500  # short, so a parked or newly added partition is noticed soon
FETCH_MAX_BYTES = 10 << 20
PARTITION_MAX_BYTES = 1 << 20
REQUEST_TIMEOUT_S = 30.0  # a leader that stopped answering (SIGSTOP) costs a reconnect
RETRY_BACKOFF_S = 0.1
RECONNECT_BACKOFF_MAX_S = 2.0
PAUSE_CHECK_S = 0.1
MIN_FETCH_VERSION = 12  # last_fetched_epoch, for DivergingEpoch (KIP-320)
FIRST_TOPIC_ID_VERSION = 13  # before, topics by name (a leader claiming Kafka 2.8 or 3.0 serves up to v12)
FIRST_REPLICA_STATE_VERSION = 15  # replica_id moves into replica_state
_PARKING_ERRORS = frozenset({ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER})

PartitionKey = tuple[bytes, int]


@dataclass(eq=False, slots=True)
class FetchState:
    """One followed partition in one leader epoch."""

    partition: Partition
    leader_epoch: int
    truncating: bool = True
    parked: bool = False
    retry_at: float = 0.0
    # The last truncation answer (epoch, end offset) and our (log end, latest epoch) after it: the same answer
    # again with nothing changed means no progress, which is logged and backed off, never spun on.
    last_answer: tuple[int, int, int, int] | None = None
    stalled_backoff_s: float = 0.0


def _key(partition: Partition) -> PartitionKey:
    return partition.topic_id, partition.index


@dataclass(frozen=True, slots=True)
class InterBrokerLink:
    """How fetchers reach their sources: the inter-broker listener's name and this broker's login there (None,
    with why, when the config gives none: only a single-node process may start without one)."""

    listener: str = "PLAINTEXT"
    security: Security | None = PLAINTEXT
    problem: str = ""


class ReplicaFetcher:
    """Copies the partitions this broker follows on one source broker."""

    def __init__(self, source_id: int, node_id: int, metadata: MetadataCache, faults: BrokerFaults,
                 broker_epoch: Callable[[], int], link: InterBrokerLink) -> None:
        self.source_id = source_id
        self.link = link
        self._peer = str(source_id)  # how the network fault hooks name the source broker
        self.node_id = node_id
        self.metadata = metadata
        self.faults = faults
        self.broker_epoch = broker_epoch
        self.states: dict[PartitionKey, FetchState] = {}
        self._changed = asyncio.Event()
        self._stopped = False
        self._client: KafkaClient | None = None  # the connection to the leader, while there is one
        self.link_lost_at: float | None = None  # loop time the connection failed, until a fetch succeeds again
        self.loss_held = False  # a Metadata answer was held for this loss already (ReplicaManager.settle_leaders)
        self.task = asyncio.create_task(self._run(), name=f"replica-fetcher-{node_id}-from-{source_id}")

    def add(self, partition: Partition) -> None:
        self.states[_key(partition)] = FetchState(partition, partition.leader_epoch)
        self._changed.set()

    def remove(self, partition: Partition) -> None:
        self.states.pop(_key(partition), None)

    def stop(self) -> None:
        # Not the cancellation alone: Python 3.11's wait_for can swallow one that races with its inner result, and
        # the loop would then wait for work forever (a broker's clean stop hung until SIGKILL). The flag, a wake-up
        # for that wait, and the connection dropped (a long poll to a leader that is itself stopping) end it.
        self._stopped = True
        self._changed.set()
        self.task.cancel()
        if self._client is not None:
            self._client.abort()

    async def _run(self) -> None:
        backoff = RETRY_BACKOFF_S
        try:
            while not self._stopped:
                if self.faults.replication_paused:
                    await asyncio.sleep(PAUSE_CHECK_S)
                    continue
                if self.faults.cut_off(self._peer):  # fault.network.partition: the link is down
                    await self._disconnect()
                    await asyncio.sleep(PAUSE_CHECK_S)
                    continue
                if delay := self.faults.delay_s(self._peer):  # fault.network.delay: a slow link
                    await asyncio.sleep(delay)
                try:
                    if self._client is None:
                        self._client = await self._connect()
                    await self._truncate_all(self._client)
                    await self._fetch(self._client)
                    backoff = RETRY_BACKOFF_S
                    self.link_lost_at, self.loss_held = None, False
                except (OSError, ConnectionError, KafkaError, ValueError) as exc:  # TimeoutError is an OSError
                    if self._stopped:
                        break
                    if self.link_lost_at is None:
                        self.link_lost_at = asyncio.get_running_loop().time()
                    log.warning("replica fetcher %d<-%d: %s; reconnecting in %.1f s", self.node_id, self.source_id,
                                exc or type(exc).__name__, backoff)
                    await self._disconnect()
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, RECONNECT_BACKOFF_MAX_S)
        finally:
            await self._disconnect()

    async def _disconnect(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def _connect(self) -> KafkaClient:
        source = self.metadata.brokers.get(self.source_id)
        if source is None:
            raise ConnectionError(f"broker {self.source_id} is not registered")
        if self.link.security is None:
            raise ConnectionError(self.link.problem)
        host, port = source.endpoint(self.link.listener)
        client = KafkaClient(host, port, f"replica-fetcher-{self.node_id}", self.link.security)
        try:
            await client.open()
            await asyncio.wait_for(client.negotiate(), REQUEST_TIMEOUT_S)
            if client.version_for(fetch.API) < MIN_FETCH_VERSION:
                raise ValueError(f"broker {self.source_id} does not serve Fetch v{MIN_FETCH_VERSION}+")
        except BaseException:  # a stop (cancellation) while connecting too: no socket or read loop is left behind
            await client.close()
            raise
        return client

    def _ready(self, truncating: bool) -> list[FetchState]:
        now = asyncio.get_running_loop().time()
        return [s for s in self.states.values()
                if s.truncating == truncating and not s.parked and s.retry_at <= now]

    def _back_off(self, state: FetchState) -> None:
        state.retry_at = asyncio.get_running_loop().time() + RETRY_BACKOFF_S

    def _truncate(self, state: FetchState, epoch: int, end_offset: int, what: str) -> None:
        """Truncate by the leader's answer; the same answer twice with our log unchanged is no progress: logged,
        and the partition backs off (doubling up to RECONNECT_BACKOFF_MAX_S) instead of asking again at once."""
        partition = state.partition
        state.truncating = not partition.truncate_to_epoch_end(epoch, end_offset)
        seen = (epoch, end_offset, partition.log.log_end_offset, partition.log.latest_epoch)
        if seen != state.last_answer:
            state.last_answer, state.stalled_backoff_s = seen, 0.0
            return
        state.stalled_backoff_s = min(max(state.stalled_backoff_s * 2, RETRY_BACKOFF_S), RECONNECT_BACKOFF_MAX_S)
        log.warning("%s-%d: %s answered epoch %d ending at %d again with our log end %d and latest epoch %d "
                    "unchanged: no progress, retrying in %.1f s", partition.topic, partition.index, what, epoch,
                    end_offset, seen[2], seen[3], state.stalled_backoff_s)
        state.retry_at = asyncio.get_running_loop().time() + state.stalled_backoff_s

    def _on_error(self, state: FetchState, error: ErrorCode, what: str) -> None:
        partition = state.partition
        if error in _PARKING_ERRORS:
            log.info("%s-%d: %s answered %s in epoch %d: waiting for newer metadata", partition.topic,
                     partition.index, what, error.name, state.leader_epoch)
            state.parked = True
        else:
            log.debug("%s-%d: %s answered %s: retrying", partition.topic, partition.index, what, error.name)
            self._back_off(state)

    async def _truncate_all(self, client: KafkaClient) -> None:
        """OffsetForLeaderEpoch for every partition marked "truncate first", until none is."""
        while states := self._ready(truncating=True):
            asked: dict[tuple[str, int], FetchState] = {}
            topics: dict[str, Any] = {}
            for state in states:
                partition = state.partition
                epoch = partition.log.latest_epoch
                if epoch < 0:
                    state.truncating = False  # no epoch history: nothing to compare, keep the log
                    continue
                asked[(partition.topic, partition.index)] = state
                topics.setdefault(partition.topic, offset_for_leader_epoch.REQUEST.OffsetForLeaderTopic(
                    topic=partition.topic, partitions=[])).partitions.append(
                    offset_for_leader_epoch.REQUEST.OffsetForLeaderPartition(
                        partition=partition.index, current_leader_epoch=state.leader_epoch, leader_epoch=epoch))
            if not asked:
                continue
            request = offset_for_leader_epoch.REQUEST.cls(replica_id=self.node_id, topics=list(topics.values()))
            response = await asyncio.wait_for(client.request(
                offset_for_leader_epoch.API, client.version_for(offset_for_leader_epoch.API), request),
                REQUEST_TIMEOUT_S)
            for topic in response.topics:
                for answer in topic.partitions:
                    answered = asked.get((topic.topic, answer.partition))
                    if answered is None or self.states.get(_key(answered.partition)) is not answered:
                        continue  # handed over again meanwhile
                    if answer.error_code != ErrorCode.NONE:
                        self._on_error(answered, ErrorCode(answer.error_code), "OffsetForLeaderEpoch")
                    else:
                        self._truncate(answered, answer.leader_epoch, answer.end_offset, "OffsetForLeaderEpoch")

    async def _fetch(self, client: KafkaClient) -> None:
        if self.faults.replication_paused:
            return  # paused while truncating: a fetch now would tell the leader our log end all the same
        states = self._ready(truncating=False)
        if not states:
            await self._wait_for_work()
            return
        version = client.version_for(fetch.API)
        by_name = version < FIRST_TOPIC_ID_VERSION
        asked: dict[PartitionKey, tuple[FetchState, int]] = {}
        topics: dict[bytes, Any] = {}
        topic_ids: dict[str, bytes] = {}
        for state in states:
            partition_log = state.partition.log
            fetch_offset = partition_log.log_end_offset
            asked[_key(state.partition)] = (state, fetch_offset)
            topic_ids[state.partition.topic] = state.partition.topic_id
            named = {"topic": state.partition.topic} if by_name else {"topic_id": state.partition.topic_id}
            topics.setdefault(state.partition.topic_id, fetch.REQUEST.FetchTopic(
                partitions=[], **named)).partitions.append(fetch.REQUEST.FetchPartition(
                    partition=state.partition.index, current_leader_epoch=state.leader_epoch,
                    fetch_offset=fetch_offset, last_fetched_epoch=partition_log.latest_epoch,
                    log_start_offset=partition_log.log_start_offset, partition_max_bytes=PARTITION_MAX_BYTES))
        request = fetch.REQUEST.cls(max_wait_ms=FETCH_MAX_WAIT_MS, min_bytes=1, max_bytes=FETCH_MAX_BYTES,
                                    session_id=0, session_epoch=-1, topics=list(topics.values()),
                                    forgotten_topics_data=[])
        if version >= FIRST_REPLICA_STATE_VERSION:
            request.replica_state = fetch.REQUEST.ReplicaState(replica_id=self.node_id,
                                                               replica_epoch=self.broker_epoch())
        else:
            request.replica_id = self.node_id
        response = await asyncio.wait_for(client.request(fetch.API, version, request),
                                          REQUEST_TIMEOUT_S + FETCH_MAX_WAIT_MS / 1000)
        if self.faults.replication_paused:
            return  # paused during the long poll: the pause takes effect now, the answer is fetched again later
        if response.error_code != ErrorCode.NONE:
            for state, _ in asked.values():
                self._on_error(state, ErrorCode(response.error_code), "Fetch")
            return
        for topic in response.responses:
            topic_id = topic_ids.get(topic.topic, b"") if by_name else topic.topic_id
            for answer in topic.partitions:
                answered, fetch_offset = asked.get((topic_id, answer.partition_index), (None, -1))
                if answered is not None and self.states.get(_key(answered.partition)) is answered:
                    self._apply(answered, fetch_offset, answer)

    def _apply(self, state: FetchState, fetch_offset: int, answer: Any) -> None:
        """One partition's fetch answer: truncate, append or note the error."""
        partition = state.partition
        error = ErrorCode(answer.error_code)
        if error == ErrorCode.OFFSET_OUT_OF_RANGE and fetch_offset < answer.log_start_offset:
            partition.truncate_fully_and_start_at(answer.log_start_offset)
            return
        if error != ErrorCode.NONE:
            self._on_error(state, error, "Fetch")
            return
        diverging = answer.diverging_epoch
        if diverging.epoch >= 0 or diverging.end_offset >= 0:
            self._truncate(state, diverging.epoch, diverging.end_offset, "DivergingEpoch")
            return
        try:
            partition.append_as_follower(answer.records, answer.high_watermark, answer.log_start_offset)
        except KafkaError as exc:
            log.warning("%s-%d: cannot append from the leader at %d: %s", partition.topic, partition.index,
                        fetch_offset, exc)
            self._back_off(state)

    async def _wait_for_work(self) -> None:
        """Nothing to send: wait for a hand-over, or for the earliest backoff to end."""
        retries = [s.retry_at for s in self.states.values() if not s.parked]
        timeout = None if not retries else max(min(retries) - asyncio.get_running_loop().time(), 0)
        self._changed.clear()
        if self._stopped:  # stop()'s wake-up came before the clear
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)


class ReplicaFetchers:
    """Every fetcher of this broker, by source broker."""

    def __init__(self, node_id: int, metadata: MetadataCache, faults: BrokerFaults,
                 broker_epoch: Callable[[], int], link: InterBrokerLink) -> None:
        self.node_id = node_id
        self.link = link
        self.metadata = metadata
        self.faults = faults
        self.broker_epoch = broker_epoch
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._sources: dict[PartitionKey, int] = {}
        self._stopping: set[asyncio.Task[None]] = set()

    def follow(self, partition: Partition) -> None:
        """Fetch `partition` from its current leader, truncating first (a new leader or leader epoch)."""
        source = partition.leader_id
        if self._sources.get(_key(partition)) != source:
            self.unfollow(partition)
        fetcher = self.fetchers.get(source)
        if fetcher is None:
            fetcher = self.fetchers[source] = ReplicaFetcher(source, self.node_id, self.metadata, self.faults,
                                                             self.broker_epoch, self.link)
        fetcher.add(partition)
        self._sources[_key(partition)] = source

    def recently_lost(self, window_s: float) -> set[int]:
        """The leaders this broker replicates from whose connection failed less than `window_s` ago, has not served
        a fetch since, and held no Metadata answer yet."""
        now = asyncio.get_running_loop().time()
        return {source for source, fetcher in self.fetchers.items() if fetcher.link_lost_at is not None
                and not fetcher.loss_held and now - fetcher.link_lost_at < window_s}

    def held_for(self, sources: set[int]) -> None:
        """A Metadata answer waited for these leaders' fencing: none waits again before their link works again."""
        for source in sources:
            if (fetcher := self.fetchers.get(source)) is not None:
                fetcher.loss_held = True

    def unfollow(self, partition: Partition) -> None:
        source = self._sources.pop(_key(partition), None)
        if source is None:
            return
        fetcher = self.fetchers[source]
        fetcher.remove(partition)
        if not fetcher.states:
            del self.fetchers[source]
            fetcher.stop()
            self._stopping.add(fetcher.task)
            fetcher.task.add_done_callback(self._stopping.discard)

    async def shutdown(self) -> None:
        tasks = [f.task for f in self.fetchers.values()] + list(self._stopping)
        for fetcher in self.fetchers.values():
            fetcher.stop()
        self.fetchers.clear()
        self._sources.clear()
        await asyncio.gather(*tasks, return_exceptions=True)
