"""KIP-101 (leader epochs instead of the high watermark for truncation) on a real cluster: a controller and
broker processes (tests/cluster/support.py), faults through the brokers' fault hooks, signals and restarts.

What each test looks at is what a restarted broker finds on disk (its partition's segment files, its
`leader-epoch-checkpoint` and `replication-offset-checkpoint`), what the cluster answers (Metadata v12 leader
epochs, Fetch) and what a real client reads (confluent-kafka).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Message, Producer, TopicPartition

from epoch_broker.broker.app import MAINTENANCE_INTERVAL_S
from epoch_broker.broker.faults import HIGH_WATERMARK_HELD, POWER_LOSS
from epoch_broker.drill import launcher
from epoch_broker.drill.admin import PartitionState
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import fetch, metadata
from epoch_broker.storage.leader_epoch import FILE_NAME as EPOCH_CHECKPOINT
from epoch_broker.storage.log_manager import HIGH_WATERMARK_FILE
from tests.cluster.support import (
    METADATA_STORES,
    Cluster,
    DiskBatch,
    create_topic,
    disk_batches,
    parse_batches,
    partition_dir,
    partition_state,
    produce_offset,
    segment_bytes,
    wait_state,
)
from tests.helpers import not_yet, wait_for, wait_for_sync

pytestmark = pytest.mark.slow

A, B = 0, 1  # the leader and the follower of the two-replica topics
SESSION_TIMEOUT_S = 1.5  # the launcher's broker.session.timeout.ms
# A checkpoint written by the broker's periodic maintenance: wait for one full period and some slack.
CHECKPOINT_WAIT_S = 2 * MAINTENANCE_INTERVAL_S + 2


# --- helpers --------------------------------------------------------------------------------------------------

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


def consume_all(address: str, topic: str, count: int, timeout_s: float = 15.0) -> list[Message]:
    consumer = Consumer({"bootstrap.servers": address, "group.id": f"{topic}-reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    messages: list[Message] = []

    def read() -> object:
        message = consumer.poll(0.5)
        if message is not None:
            assert message.error() is None, message.error()
            messages.append(message)
        return len(messages) >= count or not_yet(f"{len(messages)} read")

    try:
        wait_for_sync(read, timeout_s, interval=0, what=f"{count} records of {topic}")
    finally:
        consumer.close()
    return messages


# --- scenario 1 -----------------------------------------------------------------------------------------------

# B's restart must not get it fenced out of the ISR (the controller fences a broker whose heartbeat connection
# closed after two heartbeat intervals, or at once if it probes the dead broker's listener): heartbeats every
# 1.5 s and no probe give a SIGKILLed broker 3 s to register again, as Kafka's session timeout does.
SCENARIO_1_HEARTBEAT_MS = 1500


@pytest.mark.parametrize("metadata_store", METADATA_STORES)
@pytest.mark.cluster(brokers=2, overrides={"broker.heartbeat.interval.ms": SCENARIO_1_HEARTBEAT_MS,
                                           "broker.session.timeout.ms": 4 * SCENARIO_1_HEARTBEAT_MS,
                                           "controller.listener.probe.enable": "false"})
async def test_a_restarted_follower_that_never_learnt_the_high_watermark_keeps_m2_and_serves_it_as_leader(
        cluster: Cluster) -> None:
    """KIP-101 scenario 1: a follower that restarts does not truncate to its high watermark; it asks the leader
    (OffsetsForLeaderEpoch) and, without an answer, keeps its log, so a committed m2 survives the leader's
    death and the follower's election."""
    topic = "kip101-scenario-1"
    await create_topic(cluster, topic, assignments=[[A, B]], wait=False)
    await wait_state(cluster, topic, lambda s: s.leader == A and s.isr == (A, B), what="leader A with ISR [A, B]",
                     timeout=15)
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
    assert [batch.values for batch in disk_batches(cluster, B, topic)] == [[b"m1"], [b"m2"]]
    cluster.restart(B)
    # Registered again in time: still in the ISR, so electable (a clean election) once A is gone.
    assert await partition_state(cluster, topic) == PartitionState(A, old_epoch, (A, B), (A, B))
    cluster.kill(A)  # SIGKILL of the stopped process

    state = await wait_state(cluster, topic, lambda s: s.leader == B, what="B elected once A is fenced",
                             timeout=4 * SCENARIO_1_HEARTBEAT_MS / 1000 + 10)
    assert state.leader_epoch > old_epoch and state.isr == (B,)
    # Old Kafka's follower would have cut its log to the high watermark (1) on restart and lost m2 for good.
    messages = consume_all(cluster.broker(B).address, topic, 2)
    assert [(m.offset(), m.value()) for m in messages] == [(0, b"m1"), (1, b"m2")]
    assert "truncating" not in cluster.log_text(B)


# --- scenario 2 -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("metadata_store", METADATA_STORES)
@pytest.mark.cluster(brokers=2)
async def test_after_both_replicas_crash_the_follower_truncates_exactly_the_orphaned_records_by_leader_epoch(
        cluster: Cluster) -> None:
    """KIP-101 scenario 2: the leader comes back alone without its unflushed tail, is re-elected in a new epoch
    and writes new records at the same offsets; the returning follower truncates exactly its orphaned records
    (to the start offset of the leader's next epoch, below its own high watermark) and both logs and both
    leader-epoch checkpoints end identical."""
    topic = "kip101-scenario-2"
    # flush.messages=3: a batch of three records is fsynced (recovery point 3), the next batch of two is not.
    await create_topic(cluster, topic, assignments=[[A, B]],
                       configs={"flush.messages": "3", "min.insync.replicas": "1"}, wait=False)
    await wait_state(cluster, topic, lambda s: s.leader == A and s.isr == (A, B), what="leader A with ISR [A, B]",
                     timeout=15)
    old_epoch = (await partition_state(cluster, topic)).leader_epoch

    assert await produce_offset(cluster, A, topic, b"m0", b"m1", b"m2") == 0
    assert await produce_offset(cluster, A, topic, b"m3", b"m4") == 3  # acks=all: B has them too
    await wait_for(lambda: checkpointed_high_watermark(cluster, B, topic) == 5, timeout=CHECKPOINT_WAIT_S,
                   what="B's replication-offset-checkpoint at 5")

    cluster.kill(B)
    await wait_state(cluster, topic, lambda s: s.isr == (A,), what="B fenced out of the ISR",
                     timeout=SESSION_TIMEOUT_S + 10)
    assert await cluster.set_fault(A, POWER_LOSS, "1") == "connection closed"
    assert launcher.wait_exit(cluster.broker(A), 10)
    assert disk_batches(cluster, A, topic) == [DiskBatch(0, 2, old_epoch, [b"m0", b"m1", b"m2"])]  # tail gone
    assert disk_batches(cluster, B, topic) == [DiskBatch(0, 2, old_epoch, [b"m0", b"m1", b"m2"]),
                                               DiskBatch(3, 4, old_epoch, [b"m3", b"m4"])]
    assert checkpointed_high_watermark(cluster, B, topic) == 5

    cluster.restart(A)  # the last ISR member comes back: elected in a new epoch
    state = await wait_state(cluster, topic, lambda s: s.leader == A and s.leader_epoch > old_epoch,
                             what="A leader again", timeout=15)
    new_epoch = state.leader_epoch
    assert await produce_offset(cluster, A, topic, b"n3", b"n4") == 3  # the same offsets as B's orphans, a new epoch

    cluster.restart(B)
    await wait_state(cluster, topic, lambda s: s.isr == (A, B), what="B back in the ISR", timeout=15)
    await wait_for(lambda: segment_bytes(cluster, B, topic) == segment_bytes(cluster, A, topic),
                   what="identical logs")

    expected = [DiskBatch(0, 2, old_epoch, [b"m0", b"m1", b"m2"]), DiskBatch(3, 4, new_epoch, [b"n3", b"n4"])]
    assert disk_batches(cluster, A, topic) == disk_batches(cluster, B, topic) == expected
    assert epoch_checkpoint(cluster, A, topic) == epoch_checkpoint(cluster, B, topic) == \
        f"0\n2\n{old_epoch} 0\n{new_epoch} 3\n"
    # Epoch `old_epoch` ends at 3 on the leader: B cut 5 -> 3 although its high watermark was 5 (old Kafka
    # kept everything up to its high watermark, and both logs would have held different records at 3 and 4).
    truncations = re.findall(rf"{topic}-0: truncating from (\d+) to (\d+) \(leader epoch (\d+) ends at (\d+)\)",
                             cluster.log_text(B))
    assert truncations == [("5", "3", str(old_epoch), "3")]


# --- returning leader -----------------------------------------------------------------------------------------

# No election may happen while the leader restarts: neither its session (20 s) nor the grace a closed heartbeat
# connection gets (two heartbeat intervals: 15 s) can end during a restart, however loaded the machine, and the
# controller does not probe the dead broker's listener (which would fence it at once).
@pytest.mark.parametrize("metadata_store", METADATA_STORES)
@pytest.mark.cluster(brokers=2, overrides={"broker.session.timeout.ms": 20000, "broker.heartbeat.interval.ms": 7500,
                                           "controller.listener.probe.enable": "false"})
async def test_a_leader_restarted_without_an_election_starts_a_new_epoch_at_its_log_end(cluster: Cluster) -> None:
    """KIP-101 "Extending LeaderEpoch to include Returning Leaders": a broker that registers again while it
    leads a partition gets a new leader epoch from the controller, records (new epoch, its log end) in its
    leader-epoch-checkpoint and stamps the new epoch on the batches it writes from then on."""
    topic = "kip101-returning-leader"
    x = 1
    await create_topic(cluster, topic, assignments=[[x]], wait=False)
    before = await wait_state(cluster, topic, lambda s: s.leader == x, what="leader X", timeout=15)
    for values in ([b"a"], [b"b", b"c"], [b"d"]):
        await produce_offset(cluster, x, topic, *values, acks=1)
    log_end = 4

    cluster.restart(x, hard=True)  # SIGKILL and start again, well within the session: no election happens
    after = await wait_state(cluster, topic, lambda s: s.leader_epoch != before.leader_epoch,
                             what="a new leader epoch", timeout=30)
    assert "fencing broker" not in cluster.log_text(cluster.file.controller.node_id)
    assert (after.leader, after.isr) == (x, (x,))
    assert after.leader_epoch == before.leader_epoch + 1  # one bump, from the registration
    async with cluster.client(x) as client:
        response = await client.request(metadata.API, 12, metadata.REQUEST.cls(
            topics=[metadata.REQUEST.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False))
    assert response.topics[0].partitions[0].leader_epoch == after.leader_epoch
    assert epoch_checkpoint(cluster, x, topic) == f"0\n2\n{before.leader_epoch} 0\n{after.leader_epoch} {log_end}\n"

    assert await produce_offset(cluster, x, topic, b"e", acks=1) == log_end
    async with cluster.client(x) as client:
        response = await client.request(fetch.API, 12, fetch.REQUEST.cls(
            max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, session_id=0, session_epoch=-1, forgotten_topics_data=[],
            topics=[fetch.REQUEST.FetchTopic(topic=topic, partitions=[fetch.REQUEST.FetchPartition(
                partition=0, current_leader_epoch=after.leader_epoch, fetch_offset=0, partition_max_bytes=1 << 20)])]))
    answer = response.responses[0].partitions[0]
    assert answer.error_code == ErrorCode.NONE and answer.high_watermark == log_end + 1
    assert parse_batches(bytes(answer.records)) == [
        DiskBatch(0, 0, before.leader_epoch, [b"a"]), DiskBatch(1, 2, before.leader_epoch, [b"b", b"c"]),
        DiskBatch(3, 3, before.leader_epoch, [b"d"]), DiskBatch(log_end, log_end, after.leader_epoch, [b"e"])]
