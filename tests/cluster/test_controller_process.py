"""The controller process as a failure point, on real processes: its metadata survives a SIGKILL (the fsynced
metadata log), and a controller that was not running (SIGSTOP) does not punish brokers for the heartbeats it
could not read.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from epoch_broker.broker.config import BROKER_USER, CLUSTER_SECRET_ENV
from epoch_broker.client.aio import PLAINTEXT, KafkaClient, Security
from epoch_broker.drill import launcher
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import broker_registration
from tests.cluster.support import Cluster, create_topic, partition_state, produce, wait_for, wait_state
from tests.helpers import free_port, holds, not_yet

CONTROLLER = 1000  # the launcher's controller node id


async def test_a_sigkilled_controller_restarts_from_its_metadata_log_and_the_cluster_carries_on(
        cluster: Cluster) -> None:
    """The controller's metadata is durable (its fsynced metadata log): after a SIGKILL and a restart it has
    every topic, leader and epoch it had, brokers keep their sessions (no election happens), and it serves new
    changes; brokers kept serving clients while it was down."""
    await create_topic(cluster, "before", partitions=3)
    before = {key: (s.leader, s.leader_epoch, s.isr) for key, s in (await cluster.metadata()).items()
              if key[0] == "before"}
    cluster.kill(CONTROLLER)
    answer = await produce(cluster, before[("before", 0)][0], "before", b"while the controller is down")
    assert answer.error_code == 0, answer
    cluster.restart(CONTROLLER, hard=True)

    await create_topic(cluster, "after", partitions=3)  # a new change, through a broker, to the new process
    assert await asyncio.to_thread(cluster.elect, "before", 1, leader=2) == "elected"
    after = await wait_state(cluster, "before", lambda s: s.leader == 2, partition=1, what="broker 2 leading")
    assert after.leader_epoch == before[("before", 1)][1] + 1  # epochs went on from where they were
    unchanged = {key: (s.leader, s.leader_epoch, s.isr) for key, s in (await cluster.metadata()).items()
                 if key[0] == "before" and key[1] != 1}
    assert unchanged == {key: value for key, value in before.items() if key[1] != 1}  # nobody was fenced



async def test_a_paused_controller_fences_nobody_when_it_runs_again(cluster: Cluster) -> None:
    """The brokers' heartbeats waited unread while the controller was stopped for longer than a session: when it
    runs again every broker gets a new session, so no broker is fenced and no leadership moves."""
    await create_topic(cluster, "steady", partitions=3)
    async def states() -> dict[tuple[str, int], tuple[int, int, tuple[int, ...]]]:
        return {key: (s.leader, s.leader_epoch, s.isr) for key, s in (await cluster.metadata()).items()}

    before = await states()
    cluster.pause(CONTROLLER)
    # The pause is the scenario: the controller must miss more than a session's heartbeats (twice the launcher's
    # broker.session.timeout.ms), and a stopped process shows nothing to wait for.
    await asyncio.sleep(2 * 1.5)
    cluster.resume(CONTROLLER)
    await wait_for(lambda: "every broker gets a new session" in cluster.log_text(CONTROLLER),
                   what="the resumed controller renewing every broker's session")

    async def nobody_fenced() -> object:
        after = await states()
        return (after == before and "fenced" not in cluster.log_text(CONTROLLER)) or not_yet(after)

    # a session (1.5 s) without heartbeats would fence a broker: twice that long, nothing moves
    await holds(nobody_fenced, 2 * 1.5, interval=0.2, what="the partitions' leaders, epochs and ISRs as before")
    assert sorted((await cluster.metadata_of(0)).brokers) == [0, 1, 2]


async def test_a_forged_registration_cannot_take_a_live_brokers_place_or_an_impossible_node_id(
        cluster: Cluster) -> None:
    """The attack of issue 14: a client on the controller's client port registers as live broker 1 (another
    incarnation, its own listener) -> CLUSTER_AUTHORIZATION_FAILED: only the cluster's brokers (logged in with
    its secret) may register. Even one that knows the secret cannot take a live broker's place
    (DUPLICATE_BROKER_REGISTRATION) nor register an id outside 0..2^31-1 or the controller's own
    (INVALID_REQUEST). Nothing is written: broker 1 keeps running, its address stays."""
    request = broker_registration.REQUEST
    real = (await cluster.metadata_of(0)).brokers[1]
    controller = cluster.broker(CONTROLLER)
    insider = Security(sasl_mechanism="SCRAM-SHA-512", username=BROKER_USER, password=cluster.file.secret)

    async def register(node_id: int, address: str, security: Security = PLAINTEXT) -> int:
        forged = request.cls(broker_id=node_id, cluster_id="", incarnation_id=uuid.uuid4().bytes, rack=None,
                             listeners=[request.Listener(name="PLAINTEXT", host="10.6.6.6", port=6666,
                                                         security_protocol=0)])
        async with await KafkaClient.connect(address, security=security) as client:
            return (await client.request(broker_registration.API, 0, forged)).error_code

    for node_id in (1, -1, 1000):
        assert await register(node_id, controller.address) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    internal = f"{controller.host}:{controller.port + 1}"  # its CONTROLLER listener, where brokers log in
    assert await register(1, internal, insider) == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    for impossible in (-1, -(2**31), 1000):
        assert await register(impossible, internal, insider) == ErrorCode.INVALID_REQUEST
    assert (await cluster.metadata_of(0)).brokers[1] == real  # no registration record: its epoch stands too
    assert launcher.is_running(cluster.broker(1))


def test_a_second_process_with_a_live_brokers_node_id_gives_up_with_one_line(cluster: Cluster, tmp_path: Path) -> None:
    """A broker started by mistake as node 1 while node 1 runs: refused (DUPLICATE_BROKER_REGISTRATION) until
    two sessions have passed, then it exits with status 2 and one line; the real broker 1 is untouched."""
    argv = list(cluster.broker(1).argv)
    overrides = {"listeners": f"PLAINTEXT://127.0.0.1:{free_port()},INTERNAL://127.0.0.1:0",
                 "log.dirs": str(tmp_path / "second")}
    for index, arg in enumerate(argv):
        key = arg.partition("=")[0]
        if argv[index - 1] == "--override" and key in overrides:
            argv[index] = f"{key}={overrides[key]}"
    second = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path,
                            env={**os.environ, CLUSTER_SECRET_ENV: cluster.file.secret})
    assert second.returncode == 2, second.stderr[-2000:]
    last = second.stderr.strip().splitlines()[-1]
    assert "DUPLICATE_BROKER_REGISTRATION" in last and "another process running as node 1" in last
    assert launcher.is_running(cluster.broker(1))


@pytest.mark.cluster(brokers=2, overrides={"broker.session.timeout.ms": 30000, "broker.heartbeat.interval.ms": 10000})
async def test_a_sigkilled_leader_is_fenced_at_once_because_its_listener_refuses_connections(cluster: Cluster
                                                                                             ) -> None:
    """Its heartbeat connection closed and nothing listens where it registered: the controller fences it without
    waiting for the disconnect grace (here 20 s, never reached), so clients' first leader query finds the new
    leader (librdkafka's comes 15-50 ms after its own connection broke)."""
    topic = "killed-leader"
    await create_topic(cluster, topic, assignments=[[0, 1]])
    await wait_state(cluster, topic, lambda s: s.leader == 0 and s.isr == (0, 1), what="leader 0, ISR [0, 1]",
                     node=1, timeout=30)
    cluster.kill(0)
    await wait_state(cluster, topic, lambda s: s.leader == 1, what="leader 1", node=1, timeout=15)
    fenced = [line for line in cluster.log_text(CONTROLLER).splitlines() if "fencing broker 0 " in line]
    assert len(fenced) == 1 and "refuses connections" in fenced[0], fenced


@pytest.mark.cluster(brokers=2, overrides={"broker.session.timeout.ms": 30000, "broker.heartbeat.interval.ms": 10000,
                                           "controller.listener.probe.enable": "false"})
async def test_a_metadata_answer_naming_a_leader_whose_link_just_broke_is_held_once_and_stays_true(
        cluster: Cluster) -> None:
    """The follower's replication link to the leader breaks (SIGKILL); with no probe and a 20 s grace the controller
    keeps the leader: the follower's next Metadata answer waits its hold (in case the controller fences it), then
    names the leader it has, as the controller does; the answer after it is not held again."""
    topic = "held-metadata"
    await create_topic(cluster, topic, assignments=[[0, 1]])
    await wait_state(cluster, topic, lambda s: s.leader == 0 and s.isr == (0, 1), what="leader 0, ISR [0, 1]",
                     node=1, timeout=30)
    cluster.kill(0)
    await wait_for(lambda: "replica fetcher 1<-0" in cluster.log_text(1), timeout=15, what="the follower's link broken")
    for _ in range(2):
        assert (await partition_state(cluster, topic, node=1)).leader == 0
    held = [line for line in cluster.log_text(1).splitlines() if "Metadata answer held" in line]
    assert len(held) == 1 and "leader(s) [0] broke moments ago; still unfenced: [0]" in held[0], held
