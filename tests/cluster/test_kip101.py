"""KIP-101 (leader epochs instead of the high watermark for truncation) on a real cluster: a controller and
broker processes (tests/cluster/support.py), faults through the brokers' fault hooks, signals and restarts.

What each test looks at is what a restarted broker finds on disk (its partition's segment files, its
`leader-epoch-checkpoint` and `replication-offset-checkpoint`), what the cluster answers (Metadata v12 leader
epochs, Fetch) and what a real client reads (confluent-kafka).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Message, Producer, TopicPartition

from broker import launcher
from broker.admin import PartitionState
from broker.app import MAINTENANCE_INTERVAL_S
from broker.faults import HIGH_WATERMARK_HELD, POWER_LOSS
from protocol.errors import ErrorCode
from protocol.messages import create_topics, fetch, metadata
from protocol.records import BatchHeader, iter_batches, iter_records
from storage.leader_epoch import FILE_NAME as EPOCH_CHECKPOINT
from storage.log_manager import HIGH_WATERMARK_FILE
from tests.broker.conftest import batch, produce_to
from tests.cluster.support import Cluster, wait_for

pytestmark = pytest.mark.slow

A, B = 0, 1  # the leader and the follower of the two-replica topics
SESSION_TIMEOUT_S = 1.5  # the launcher's broker.session.timeout.ms
# A checkpoint written by the broker's periodic maintenance: wait for one full period and some slack.
CHECKPOINT_WAIT_S = 2 * MAINTENANCE_INTERVAL_S + 2


# --- helpers --------------------------------------------------------------------------------------------------

async def create_topic(cluster: Cluster, name: str, replicas: list[int], **configs: str) -> None:
    request = create_topics.REQUEST.cls(timeout_ms=10000, topics=[create_topics.REQUEST.CreatableTopic(
        name=name, num_partitions=-1, replication_factor=-1,
        assignments=[create_topics.REQUEST.CreatableReplicaAssignment(partition_index=0, broker_ids=replicas)],
        configs=[create_topics.REQUEST.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])])
    async with cluster.client(replicas[0]) as client:
        answer = await client.request(create_topics.API, 7, request)
    assert answer.topics[0].error_code == ErrorCode.NONE, answer


async def partition_state(cluster: Cluster, topic: str) -> PartitionState | None:
    return (await cluster.metadata()).get((topic, 0))


async def wait_state(cluster: Cluster, topic: str, what: str, accept: Callable[[PartitionState], bool],
                     timeout: float = 15.0) -> PartitionState:
    async def check() -> PartitionState | None:
        state = await partition_state(cluster, topic)
        return state if state is not None and accept(state) else None
    return await wait_for(check, timeout=timeout, what=what)


async def produce(cluster: Cluster, node: int, topic: str, *values: bytes, acks: int = -1) -> int:
    """One batch of `values` to `node`; returns its base offset."""
    async with cluster.client(node) as client:
        answer = await produce_to(client, topic, batch(*values), acks=acks)
    assert answer.error_code == ErrorCode.NONE, answer
    return answer.base_offset


def partition_dir(cluster: Cluster, node: int, topic: str) -> Path:
    return Path(cluster.broker(node).data_dir) / f"{topic}-0"


def log_bytes(cluster: Cluster, node: int, topic: str) -> bytes:
    """The partition's segment files, in offset order: every byte a restart would find."""
    return b"".join(path.read_bytes() for path in sorted(partition_dir(cluster, node, topic).glob("*.log")))


def batches(data: bytes) -> list[tuple[BatchHeader, list[bytes | None]]]:
    return [(header, [r.value for r in iter_records(data, pos, header)]) for pos, header in iter_batches(data)]


def on_disk(cluster: Cluster, node: int, topic: str) -> list[tuple[int, int, list[bytes | None]]]:
    """(base offset, partition leader epoch, values) of every batch in the node's segment files."""
    return [(h.base_offset, h.partition_leader_epoch, values)
            for h, values in batches(log_bytes(cluster, node, topic))]


def epoch_checkpoint(cluster: Cluster, node: int, topic: str) -> str:
    return (partition_dir(cluster, node, topic) / EPOCH_CHECKPOINT).read_text()


def checkpointed_high_watermark(cluster: Cluster, node: int, topic: str) -> int | None:
    """The node's high watermark for partition 0 in its replication-offset-checkpoint, None if not written."""
    path = Path(cluster.broker(node).data_dir) / HIGH_WATERMARK_FILE
    if not path.exists():
        return None
    for line in path.read_text().splitlines()[2:]:
        name, partition, offset = line.split(" ")
        if name == topic and partition == "0":
            return int(offset)
    return None


def log_text(cluster: Cluster, node: int) -> str:
    return Path(cluster.broker(node).log).read_text(errors="replace")


def consume_all(address: str, topic: str, count: int, timeout_s: float = 15.0) -> list[Message]:
    consumer = Consumer({"bootstrap.servers": address, "group.id": f"{topic}-reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    messages: list[Message] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(messages) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            messages.append(message)
    finally:
        consumer.close()
    return messages


# --- scenario 1 -----------------------------------------------------------------------------------------------

# B's restart must not get it fenced out of the ISR (the controller fences a broker whose heartbeat connection
# closed after two heartbeat intervals): heartbeats every 1.5 s give a SIGKILLed broker 3 s to register again.
SCENARIO_1_HEARTBEAT_MS = 1500


@pytest.mark.cluster(brokers=2, overrides={"broker.heartbeat.interval.ms": SCENARIO_1_HEARTBEAT_MS,
                                           "broker.session.timeout.ms": 4 * SCENARIO_1_HEARTBEAT_MS})
async def test_a_restarted_follower_that_never_learnt_the_high_watermark_keeps_m2_and_serves_it_as_leader(
        cluster: Cluster) -> None:
    """KIP-101 scenario 1: a follower that restarts does not truncate to its high watermark; it asks the leader
    (OffsetsForLeaderEpoch) and, without an answer, keeps its log, so a committed m2 survives the leader's
    death and the follower's election."""
    topic = "kip101-scenario-1"
    await create_topic(cluster, topic, [A, B])
    await wait_state(cluster, topic, "leader A with ISR [A, B]", lambda s: s.leader == A and s.isr == (A, B))
    old_epoch = (await partition_state(cluster, topic)).leader_epoch

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0})
    delivered: list[tuple[int, object]] = []

    def send(value: bytes) -> None:
        producer.produce(topic, value=value, partition=0,
                         on_delivery=lambda err, msg: delivered.append((msg.offset(), err)))
        assert producer.flush(15) == 0

    send(b"m1")
    assert await cluster.set_fault(A, HIGH_WATERMARK_HELD, "true") == "applied"
    send(b"m2")  # acks=all: answered once B had fetched m2, so committed
    assert delivered == [(0, None), (1, None)]

    # B holds m2 but only ever learnt the high watermark 1 (the hold): it restarts with HW 1 on disk.
    await wait_for(lambda: checkpointed_high_watermark(cluster, B, topic) == 1, timeout=CHECKPOINT_WAIT_S,
                   what="B's replication-offset-checkpoint at 1")
    cluster.pause(A)  # from here on B can never re-fetch m2 from A: what it keeps is what it kept
    cluster.kill(B)
    assert checkpointed_high_watermark(cluster, B, topic) == 1
    assert [values for _, _, values in on_disk(cluster, B, topic)] == [[b"m1"], [b"m2"]]
    cluster.restart(B)
    # Registered again in time: still in the ISR, so electable (a clean election) once A is gone.
    assert await partition_state(cluster, topic) == PartitionState(A, old_epoch, (A, B), (A, B))
    cluster.kill(A)  # SIGKILL of the stopped process

    state = await wait_state(cluster, topic, "B elected once A is fenced", lambda s: s.leader == B,
                             timeout=4 * SCENARIO_1_HEARTBEAT_MS / 1000 + 10)
    assert state.leader_epoch > old_epoch and state.isr == (B,)
    # Old Kafka's follower would have cut its log to the high watermark (1) on restart and lost m2 for good.
    messages = consume_all(cluster.broker(B).address, topic, 2)
    assert [(m.offset(), m.value()) for m in messages] == [(0, b"m1"), (1, b"m2")]
    assert "truncating" not in log_text(cluster, B)


# --- scenario 2 -----------------------------------------------------------------------------------------------

@pytest.mark.cluster(brokers=2)
async def test_after_both_replicas_crash_the_follower_truncates_exactly_the_orphaned_records_by_leader_epoch(
        cluster: Cluster) -> None:
    """KIP-101 scenario 2: the leader comes back alone without its unflushed tail, is re-elected in a new epoch
    and writes new records at the same offsets; the returning follower truncates exactly its orphaned records
    (to the start offset of the leader's next epoch, below its own high watermark) and both logs and both
    leader-epoch checkpoints end identical."""
    topic = "kip101-scenario-2"
    # flush.messages=3: a batch of three records is fsynced (recovery point 3), the next batch of two is not.
    await create_topic(cluster, topic, [A, B], **{"flush.messages": "3", "min.insync.replicas": "1"})
    await wait_state(cluster, topic, "leader A with ISR [A, B]", lambda s: s.leader == A and s.isr == (A, B))
    old_epoch = (await partition_state(cluster, topic)).leader_epoch

    assert await produce(cluster, A, topic, b"m0", b"m1", b"m2") == 0
    assert await produce(cluster, A, topic, b"m3", b"m4") == 3  # acks=all: B has them too
    await wait_for(lambda: checkpointed_high_watermark(cluster, B, topic) == 5, timeout=CHECKPOINT_WAIT_S,
                   what="B's replication-offset-checkpoint at 5")

    cluster.kill(B)
    await wait_state(cluster, topic, "B fenced out of the ISR", lambda s: s.isr == (A,),
                     timeout=SESSION_TIMEOUT_S + 10)
    assert await cluster.set_fault(A, POWER_LOSS, "1") == "connection closed"
    assert launcher.wait_exit(cluster.broker(A), 10)
    assert on_disk(cluster, A, topic) == [(0, old_epoch, [b"m0", b"m1", b"m2"])]  # the unflushed tail is gone
    assert on_disk(cluster, B, topic) == [(0, old_epoch, [b"m0", b"m1", b"m2"]), (3, old_epoch, [b"m3", b"m4"])]
    assert checkpointed_high_watermark(cluster, B, topic) == 5

    cluster.restart(A)  # the last ISR member comes back: elected in a new epoch
    state = await wait_state(cluster, topic, "A leader again", lambda s: s.leader == A and s.leader_epoch > old_epoch)
    new_epoch = state.leader_epoch
    assert await produce(cluster, A, topic, b"n3", b"n4") == 3  # the same offsets as B's orphans, a new epoch

    cluster.restart(B)
    await wait_state(cluster, topic, "B back in the ISR", lambda s: s.isr == (A, B))
    await wait_for(lambda: log_bytes(cluster, B, topic) == log_bytes(cluster, A, topic), what="identical logs")

    expected = [(0, old_epoch, [b"m0", b"m1", b"m2"]), (3, new_epoch, [b"n3", b"n4"])]
    assert on_disk(cluster, A, topic) == on_disk(cluster, B, topic) == expected
    assert epoch_checkpoint(cluster, A, topic) == epoch_checkpoint(cluster, B, topic) == \
        f"0\n2\n{old_epoch} 0\n{new_epoch} 3\n"
    # Epoch `old_epoch` ends at 3 on the leader: B cut 5 -> 3 although its high watermark was 5 (old Kafka
    # kept everything up to its high watermark, and both logs would have held different records at 3 and 4).
    truncations = re.findall(rf"{topic}-0: truncating from (\d+) to (\d+) \(leader epoch (\d+) ends at (\d+)\)",
                             log_text(cluster, B))
    assert truncations == [("5", "3", str(old_epoch), "3")]


# --- returning leader -----------------------------------------------------------------------------------------

@pytest.mark.cluster(brokers=2, overrides={"broker.session.timeout.ms": 10000})
async def test_a_leader_restarted_without_an_election_starts_a_new_epoch_at_its_log_end(cluster: Cluster) -> None:
    """KIP-101 "Extending LeaderEpoch to include Returning Leaders": a broker that registers again while it
    leads a partition gets a new leader epoch from the controller, records (new epoch, its log end) in its
    leader-epoch-checkpoint and stamps the new epoch on the batches it writes from then on."""
    topic = "kip101-returning-leader"
    x = 1
    await create_topic(cluster, topic, [x])
    before = await wait_state(cluster, topic, "leader X", lambda s: s.leader == x)
    for values in ([b"a"], [b"b", b"c"], [b"d"]):
        await produce(cluster, x, topic, *values, acks=1)
    log_end = 4

    cluster.restart(x, hard=True)  # SIGKILL and start again, well within the session: no election happens
    after = await wait_state(cluster, topic, "a new leader epoch", lambda s: s.leader_epoch != before.leader_epoch)
    assert (after.leader, after.isr) == (x, (x,))
    assert after.leader_epoch == before.leader_epoch + 1  # one bump, from the registration
    async with cluster.client(x) as client:
        response = await client.request(metadata.API, 12, metadata.REQUEST.cls(
            topics=[metadata.REQUEST.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False))
    assert response.topics[0].partitions[0].leader_epoch == after.leader_epoch
    assert epoch_checkpoint(cluster, x, topic) == f"0\n2\n{before.leader_epoch} 0\n{after.leader_epoch} {log_end}\n"

    assert await produce(cluster, x, topic, b"e", acks=1) == log_end
    async with cluster.client(x) as client:
        response = await client.request(fetch.API, 12, fetch.REQUEST.cls(
            max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, session_id=0, session_epoch=-1, forgotten_topics_data=[],
            topics=[fetch.REQUEST.FetchTopic(topic=topic, partitions=[fetch.REQUEST.FetchPartition(
                partition=0, current_leader_epoch=after.leader_epoch, fetch_offset=0, partition_max_bytes=1 << 20)])]))
    answer = response.responses[0].partitions[0]
    assert answer.error_code == ErrorCode.NONE and answer.high_watermark == log_end + 1
    assert [(h.base_offset, h.partition_leader_epoch, values) for h, values in batches(bytes(answer.records))] == [
        (0, before.leader_epoch, [b"a"]), (1, before.leader_epoch, [b"b", b"c"]), (3, before.leader_epoch, [b"d"]),
        (log_end, after.leader_epoch, [b"e"])]
