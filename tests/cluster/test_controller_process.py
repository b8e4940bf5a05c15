"""The controller process as a failure point, on real processes: its metadata survives a SIGKILL (the fsynced
metadata log), and a controller that was not running (SIGSTOP) does not punish brokers for the heartbeats it
could not read.
"""

from __future__ import annotations

import asyncio

from tests.cluster.support import Cluster, create_topic, produce, wait_state

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
    before = {key: (s.leader, s.leader_epoch, s.isr) for key, s in (await cluster.metadata()).items()}
    cluster.pause(CONTROLLER)
    await asyncio.sleep(2 * 1.5)  # twice the launcher's broker.session.timeout.ms
    cluster.resume(CONTROLLER)
    await asyncio.sleep(2 * 1.5)  # long enough for any fencing to show
    after = {key: (s.leader, s.leader_epoch, s.isr) for key, s in (await cluster.metadata()).items()}
    assert after == before
    assert sorted((await cluster.metadata_of(0)).brokers) == [0, 1, 2]
    assert "new session" in cluster.log_text(CONTROLLER)
    assert "fenced" not in cluster.log_text(CONTROLLER)
