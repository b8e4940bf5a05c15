"""The controller's cluster logic: registration, heartbeats, fencing, AlterPartition, ElectLeaders.

Synchronous and in-process: a controller over a FileMetadataStore in tmp_path and a fake clock; "restarting" the
controller is a new one over the same directory.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from pathlib import Path
from typing import Any

import pytest

from epoch_broker.broker.config import BrokerConfig
from epoch_broker.broker.controller.cluster_control import RegistrationRefused
from epoch_broker.broker.controller.controller import Controller
from epoch_broker.broker.controller.replication_control import NewTopic, PartitionChangeResult
from epoch_broker.broker.controller.store.file import FileMetadataStore
from epoch_broker.broker.metadata.image import MetadataCache, PartitionState
from epoch_broker.broker.metadata.records import BrokerFenceRecord, PartitionChangeRecord, from_json, to_json
from epoch_broker.protocol.errors import ErrorCode

SESSION_MS = 9000


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Cluster:
    """A controller and the brokers registered with it (node id -> broker epoch)."""

    def __init__(self, directory: Path, clock: FakeClock, unclean: bool = False) -> None:
        self.directory = directory
        self.clock = clock
        self.config = dataclasses.replace(BrokerConfig(), node_id=1000, log_dirs=(str(directory),),
                                          broker_session_timeout_ms=SESSION_MS,
                                          unclean_leader_election_enable=unclean)
        self.controller = self.start_controller()
        self.epochs: dict[int, int] = {}

    def start_controller(self) -> Controller:
        controller = Controller(self.config, FileMetadataStore(str(self.directory)), self.clock)
        controller.start()
        return controller

    def restart_controller(self) -> None:
        self.controller.close()
        self.controller = self.start_controller()

    def register(self, node_id: int) -> int:
        """A broker process starting: a registered node's previous process died first (its connection closed)."""
        if node_id in self.epochs:
            self.controller.shorten_session(node_id, 0.0)
        self.epochs[node_id] = self.controller.register_broker(node_id, uuid.uuid4().bytes, "127.0.0.1",
                                                               9092 + node_id)
        return self.epochs[node_id]

    def heartbeat(self, node_id: int, **flags: bool) -> Any:
        """A heartbeat from a broker that has applied the whole metadata log."""
        return self.controller.heartbeat(node_id, self.epochs[node_id], self.controller.end_offset - 1, **flags)

    def create(self, name: str, replicas: list[int], configs: dict[str, str] | None = None) -> bytes:
        [result] = self.controller.create_topics([NewTopic(name, assignments={0: replicas}, configs=configs or {})])
        assert result.error_code == ErrorCode.NONE, result.error_message
        return result.topic_id

    def state(self, name: str) -> PartitionState:
        state = self.controller.image.partition(name, 0)
        assert state is not None
        return state

    def summary(self, name: str) -> tuple[int, int, int, tuple[int, ...]]:
        """(leader, leader epoch, partition epoch, ISR) of partition 0."""
        state = self.state(name)
        return state.leader, state.leader_epoch, state.partition_epoch, state.isr

    def expire(self, *alive: int) -> None:
        """Let a whole session pass in which only `alive` heartbeat, then run the liveness check."""
        self.clock.advance(SESSION_MS / 1000 / 2)
        for node_id in alive:
            self.heartbeat(node_id)
        self.clock.advance(SESSION_MS / 1000 / 2 + 0.1)
        for node_id in alive:
            self.heartbeat(node_id)
        self.controller.check_liveness()

    def alter(self, node_id: int, name: str, new_isr: tuple[int, ...], **overrides: int) -> PartitionChangeResult:
        state = self.state(name)
        fields = {"broker_epoch": self.epochs[node_id], "leader_epoch": state.leader_epoch,
                  "partition_epoch": state.partition_epoch, **overrides}
        return self.controller.alter_partition(node_id, fields["broker_epoch"], state.topic_id, 0,
                                               fields["leader_epoch"], fields["partition_epoch"], new_isr)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cluster(tmp_path: Path, clock: FakeClock) -> Cluster:
    cluster = Cluster(tmp_path, clock)
    for node_id in (0, 1, 2):
        cluster.register(node_id)
    return cluster


def image_state(image: MetadataCache) -> dict[str, Any]:
    return {"cluster_id": image.cluster_id, "brokers": image.brokers, "fenced": image.fenced_brokers,
            "topics": image.topics_by_id, "next_producer_id": image.next_producer_id,
            "metadata_offset": image.metadata_offset}


# -- registration ---------------------------------------------------------------------------------------


def test_each_registration_gets_a_broker_epoch_higher_than_any_before(cluster: Cluster) -> None:
    first = dict(cluster.epochs)
    assert first[0] < first[1] < first[2]
    assert cluster.register(0) > first[2]
    assert cluster.controller.check_broker_epoch(0, first[0]) == ErrorCode.STALE_BROKER_EPOCH
    assert cluster.controller.check_broker_epoch(0, cluster.epochs[0]) == ErrorCode.NONE


def test_another_incarnation_is_refused_while_the_registered_ones_session_is_alive(cluster: Cluster) -> None:
    """A second process (or a forger) cannot take a live broker's node id: DUPLICATE_BROKER_REGISTRATION, nothing
    written. Once the first's connection closed, or its session expired, or under a new controller, it can."""
    end, epoch = cluster.controller.end_offset, cluster.epochs[1]
    with pytest.raises(RegistrationRefused) as refused:
        cluster.controller.register_broker(1, uuid.uuid4().bytes, "10.0.0.66", 6666)
    assert refused.value.error == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    assert cluster.controller.end_offset == end and cluster.controller.check_broker_epoch(1, epoch) == ErrorCode.NONE
    assert cluster.controller.image.brokers[1].port == 9093

    cluster.controller.shorten_session(1, 0.5)  # its process died: the connection closed
    assert cluster.controller.register_broker(1, uuid.uuid4().bytes, "127.0.0.1", 9093) > epoch
    cluster.expire(0, 1)  # broker 2 stays silent a whole session: fenced
    assert cluster.controller.register_broker(2, uuid.uuid4().bytes, "127.0.0.1", 9094) > epoch
    cluster.restart_controller()  # no session is open with a new controller until a broker heartbeats
    assert cluster.controller.register_broker(0, uuid.uuid4().bytes, "127.0.0.1", 9092) > epoch


def test_a_registration_retry_with_the_same_incarnation_gets_the_same_epoch_and_writes_nothing(
        tmp_path: Path, clock: FakeClock) -> None:
    cluster = Cluster(tmp_path, clock)
    incarnation = uuid.uuid4().bytes
    epoch = cluster.controller.register_broker(0, incarnation, "127.0.0.1", 9092)
    end = cluster.controller.end_offset
    assert cluster.controller.register_broker(0, incarnation, "127.0.0.1", 9092) == epoch
    assert cluster.controller.end_offset == end
    cluster.controller.shorten_session(0, 0.0)  # the process died; a new one registers
    assert cluster.controller.register_broker(0, uuid.uuid4().bytes, "127.0.0.1", 9092) == epoch + 1


def test_broker_epochs_keep_growing_across_a_controller_restart(cluster: Cluster) -> None:
    highest = max(cluster.epochs.values())
    cluster.restart_controller()
    assert cluster.controller.check_broker_epoch(2, highest) == ErrorCode.NONE
    assert cluster.register(0) == highest + 1


def test_a_returning_leader_gets_a_new_leader_epoch_and_partition_epoch(cluster: Cluster) -> None:
    cluster.create("led", [0, 1, 2])
    cluster.create("followed", [1, 0, 2])
    cluster.register(0)
    assert cluster.summary("led") == (0, 1, 1, (0, 1, 2))
    assert cluster.summary("followed") == (1, 0, 0, (1, 0, 2))


def test_a_single_broker_restart_bumps_the_leader_epoch_once(tmp_path: Path, clock: FakeClock) -> None:
    cluster = Cluster(tmp_path, clock)
    cluster.register(0)
    cluster.create("t", [0])
    cluster.restart_controller()
    cluster.register(0)
    assert cluster.summary("t") == (0, 1, 1, (0,))


# -- fencing ---------------------------------------------------------------------------------------------


def test_brokers_that_heartbeat_within_the_session_stay_unfenced(cluster: Cluster) -> None:
    cluster.create("t", [0, 1, 2])
    cluster.expire(0, 1, 2)
    assert cluster.controller.image.fenced_brokers == set()
    assert cluster.summary("t") == (0, 0, 0, (0, 1, 2))


def test_a_leader_that_misses_heartbeats_is_fenced_and_the_next_isr_member_leads_in_a_new_epoch(
        cluster: Cluster) -> None:
    cluster.create("t", [0, 1, 2])
    cluster.expire(1, 2)
    assert cluster.controller.image.fenced_brokers == {0}
    assert cluster.summary("t") == (1, 1, 1, (1, 2))
    fence = [r for r in cluster.controller.records if isinstance(r, BrokerFenceRecord)]
    assert fence == [BrokerFenceRecord(0, cluster.epochs[0], True)]


def close_connections_of_0_and_1_and_bring_1_back(cluster: Cluster, grace_s: float, back_after_s: float) -> None:
    """Topic t led by 0 (replicas 0, 1, 2); the heartbeat connections of 0 and 1 close, and 1 heartbeats again on a
    new one `back_after_s` later (which restores its whole session)."""
    cluster.create("t", [0, 1, 2])
    for node in (0, 1, 2):
        cluster.heartbeat(node)
    cluster.controller.shorten_session(0, grace_s=grace_s)
    cluster.controller.shorten_session(1, grace_s=grace_s)
    cluster.clock.advance(back_after_s)
    cluster.heartbeat(1)


def test_a_closed_connection_fences_the_leader_after_the_grace_unless_it_heartbeats_again(
        cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    close_connections_of_0_and_1_and_bring_1_back(cluster, grace_s=0.4, back_after_s=0.3)
    cluster.clock.advance(0.2)
    with caplog.at_level(logging.INFO, logger="epoch_broker.broker.controller.controller"):
        cluster.controller.check_liveness()
    assert cluster.controller.image.fenced_brokers == {0}
    assert cluster.summary("t") == (1, 1, 1, (1, 2))
    # the log names the cause and the real delays, not the session timeout it did not wait for
    assert ("fencing broker 0 (its heartbeat connection closed 500 ms ago and it did not come back within the "
            "400 ms grace; last heartbeat 500 ms ago)") in caplog.text


def test_a_broker_whose_listener_refuses_connections_is_fenced_at_once_unless_it_came_back(
        cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    close_connections_of_0_and_1_and_bring_1_back(cluster, grace_s=10, back_after_s=0.003)  # 1 before its probe
    with caplog.at_level(logging.INFO, logger="epoch_broker.broker.controller.controller"):
        cluster.controller.fence_gone(0, "127.0.0.1:9100")
        cluster.controller.fence_gone(1, "127.0.0.1:9101")
    assert cluster.controller.image.fenced_brokers == {0}
    assert cluster.summary("t") == (1, 1, 1, (1, 2))
    assert ("fencing broker 0 (its heartbeat connection closed 3 ms ago and its listener 127.0.0.1:9100 refuses "
            "connections)") in caplog.text


def test_a_fenced_follower_leaves_the_isr_with_only_a_partition_epoch_bump(cluster: Cluster) -> None:
    cluster.create("t", [0, 1, 2])
    cluster.expire(0, 2)
    assert cluster.summary("t") == (0, 0, 1, (0, 2))


def test_the_new_leader_is_the_first_replica_in_assignment_order_still_in_the_isr(cluster: Cluster) -> None:
    cluster.create("t", [0, 1, 2])
    cluster.expire(0, 2)  # 1 leaves the ISR
    cluster.expire(2)
    assert cluster.summary("t") == (2, 1, 2, (2,))


def test_fencing_the_last_isr_member_leaves_no_leader_until_it_registers_again(cluster: Cluster) -> None:
    cluster.create("t", [0, 1])
    cluster.expire(0, 2)  # 1 leaves the ISR
    cluster.expire(1, 2)  # 0, the last ISR member: 1 is live but not in sync
    assert cluster.summary("t") == (-1, 1, 2, (0,))
    cluster.register(1)  # a replica out of the ISR is not elected
    assert cluster.summary("t") == (-1, 1, 2, (0,))
    cluster.register(0)
    assert cluster.summary("t") == (0, 2, 3, (0,))


@pytest.mark.parametrize(("broker_default", "topic_config", "elected"), [
    (False, "true", True),
    (True, "false", False),
    (True, None, True),
    (False, None, False),
])
def test_unclean_election_on_fencing_follows_the_topic_config_over_the_broker_default(
        tmp_path: Path, clock: FakeClock, broker_default: bool, topic_config: str | None, elected: bool) -> None:
    cluster = Cluster(tmp_path, clock, unclean=broker_default)
    for node_id in (0, 1, 2):
        cluster.register(node_id)
    configs = {} if topic_config is None else {"unclean.leader.election.enable": topic_config}
    cluster.create("t", [0, 1], configs)
    cluster.expire(0, 2)  # 1 leaves the ISR
    cluster.expire(1, 2)  # the last ISR member, 0, is fenced
    assert cluster.summary("t") == ((1, 1, 2, (1,)) if elected else (-1, 1, 2, (0,)))


def test_a_replica_registering_for_a_leaderless_partition_is_elected_only_with_unclean_allowed(
        cluster: Cluster) -> None:
    cluster.create("clean", [0, 1])
    cluster.create("unclean", [0, 1], {"unclean.leader.election.enable": "true"})
    cluster.expire(0, 2)  # 1 leaves both ISRs
    cluster.expire(2)  # 0 is fenced too: nobody live to elect
    assert cluster.summary("unclean")[0] == cluster.summary("clean")[0] == -1
    cluster.register(1)
    assert cluster.summary("clean") == (-1, 1, 2, (0,))
    assert cluster.summary("unclean") == (1, 2, 3, (1,))


# -- heartbeats ------------------------------------------------------------------------------------------


def test_a_fenced_broker_is_unfenced_by_a_caught_up_heartbeat_and_takes_back_leaderless_partitions(
        cluster: Cluster) -> None:
    cluster.create("t", [0])
    cluster.expire(1, 2)
    assert cluster.summary("t") == (-1, 1, 1, (0,))
    result = cluster.heartbeat(0)
    assert (result.error, result.is_caught_up, result.is_fenced) == (ErrorCode.NONE, True, False)
    assert 0 not in cluster.controller.image.fenced_brokers
    assert cluster.summary("t") == (0, 2, 2, (0,))


def test_a_fenced_broker_stays_fenced_while_behind_on_metadata_or_asking_to_stay_fenced(cluster: Cluster) -> None:
    cluster.expire(1, 2)
    behind = cluster.controller.heartbeat(0, cluster.epochs[0], cluster.controller.end_offset - 2)
    assert (behind.is_caught_up, behind.is_fenced) == (False, True)
    wanting = cluster.heartbeat(0, want_fence=True)
    assert (wanting.is_caught_up, wanting.is_fenced) == (True, True)
    assert cluster.controller.image.fenced_brokers == {0}


def test_an_unfenced_broker_behind_on_metadata_stays_unfenced(cluster: Cluster) -> None:
    result = cluster.controller.heartbeat(0, cluster.epochs[0], -1)
    assert (result.error, result.is_caught_up, result.is_fenced) == (ErrorCode.NONE, False, False)


def test_want_shut_down_fences_the_broker_at_once_and_moves_its_leadership(cluster: Cluster) -> None:
    cluster.create("t", [0, 1, 2])
    result = cluster.heartbeat(0, want_shut_down=True)
    assert (result.should_shut_down, result.is_fenced) == (True, True)
    assert cluster.summary("t") == (1, 1, 1, (1, 2))
    end = cluster.controller.end_offset
    assert cluster.heartbeat(0, want_shut_down=True).should_shut_down
    assert cluster.controller.end_offset == end  # already fenced: nothing more to write


def test_a_heartbeat_with_a_stale_or_unknown_broker_epoch_is_refused_and_does_not_count(cluster: Cluster) -> None:
    old = cluster.epochs[0]
    cluster.register(0)
    stale = cluster.controller.heartbeat(0, old, cluster.controller.end_offset - 1)
    assert (stale.error, stale.is_fenced) == (ErrorCode.STALE_BROKER_EPOCH, True)
    unknown = cluster.controller.heartbeat(7, 1, cluster.controller.end_offset - 1)
    assert unknown.error == ErrorCode.BROKER_ID_NOT_REGISTERED
    end = cluster.controller.end_offset
    cluster.controller.heartbeat(0, old, end - 1, want_shut_down=True)
    assert cluster.controller.end_offset == end and cluster.controller.image.fenced_brokers == set()
    cluster.clock.advance(SESSION_MS / 1000 / 2)
    cluster.controller.heartbeat(0, old, end - 1)
    cluster.clock.advance(SESSION_MS / 1000 / 2 + 0.1)
    cluster.controller.check_liveness()
    assert 0 in cluster.controller.image.fenced_brokers  # the stale heartbeat kept nothing alive


# -- AlterPartition ----------------------------------------------------------------------------------------


def test_alter_partition_checks_its_errors_in_order(cluster: Cluster) -> None:
    topic_id = cluster.create("t", [0, 1, 2])
    stale = cluster.epochs[0] - 1
    assert cluster.alter(0, "t", (0, 1), broker_epoch=stale, leader_epoch=9).error == ErrorCode.STALE_BROKER_EPOCH
    assert cluster.controller.alter_partition(0, cluster.epochs[0], topic_id, 5, 0, 0, (0, 1)).error == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert cluster.controller.alter_partition(0, cluster.epochs[0], uuid.uuid4().bytes, 0, 0, 0, (0, 1)).error == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert cluster.alter(1, "t", (0, 1), leader_epoch=9).error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert cluster.alter(0, "t", (0, 1), leader_epoch=9, partition_epoch=9).error == ErrorCode.FENCED_LEADER_EPOCH
    assert cluster.alter(0, "t", (5,), partition_epoch=9).error == ErrorCode.INVALID_UPDATE_VERSION
    for bad_isr in ((1, 2), (0, 5), (0, 0, 1)):
        assert cluster.alter(0, "t", bad_isr).error == ErrorCode.INVALID_REQUEST
    assert cluster.summary("t") == (0, 0, 0, (0, 1, 2))


def test_alter_partition_commits_an_isr_change_with_only_a_partition_epoch_bump(cluster: Cluster) -> None:
    cluster.create("t", [0, 1, 2])
    assert cluster.alter(0, "t", (0, 2)) == PartitionChangeResult(ErrorCode.NONE, 0, 0, 1, (0, 2))
    assert cluster.controller.records[-1] == PartitionChangeRecord(cluster.state("t").topic_id, 0, 0, 0, 1, (0, 2))
    assert cluster.alter(0, "t", (0, 1, 2)) == PartitionChangeResult(ErrorCode.NONE, 0, 0, 2, (0, 1, 2))


def test_alter_partition_with_the_current_isr_answers_the_state_and_writes_nothing(cluster: Cluster) -> None:
    cluster.create("t", [0, 1, 2])
    end = cluster.controller.end_offset
    assert cluster.alter(0, "t", (0, 2, 1)) == PartitionChangeResult(ErrorCode.NONE, 0, 0, 0, (0, 1, 2))
    assert cluster.controller.end_offset == end


def test_alter_partition_refuses_to_add_back_a_fenced_broker(cluster: Cluster) -> None:
    cluster.create("t", [0, 1, 2])
    cluster.expire(0, 2)  # 1 is fenced and leaves the ISR
    assert cluster.alter(0, "t", (0, 1, 2)).error == ErrorCode.INELIGIBLE_REPLICA
    assert cluster.summary("t") == (0, 0, 1, (0, 2))


# -- ElectLeaders ------------------------------------------------------------------------------------------


def test_clean_elections_rotate_through_the_live_isr_members(cluster: Cluster) -> None:
    cluster.create("t", [0, 1, 2])
    leaders = []
    for _ in range(4):
        assert cluster.controller.elect_leaders([("t", 0)], False, -1) == [("t", 0, ErrorCode.NONE, None)]
        leaders.append(cluster.state("t").leader)
    assert leaders == [1, 2, 0, 1]
    assert cluster.summary("t") == (1, 4, 4, (0, 1, 2))


def test_a_clean_election_with_only_the_leader_eligible_is_not_needed(cluster: Cluster) -> None:
    cluster.create("t", [0, 1, 2])
    cluster.expire(0)  # 1 and 2 leave the ISR
    [(_, _, error, _)] = cluster.controller.elect_leaders([("t", 0)], False, -1)
    assert error == ErrorCode.ELECTION_NOT_NEEDED
    assert cluster.summary("t") == (0, 0, 2, (0,))


def test_a_clean_election_to_a_target_must_name_a_live_isr_member(cluster: Cluster) -> None:
    cluster.create("t", [0, 1, 2])
    cluster.alter(0, "t", (0, 1))
    [(_, _, error, _)] = cluster.controller.elect_leaders([("t", 0)], False, 2)  # live, not in the ISR
    assert error == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    [(_, _, error, _)] = cluster.controller.elect_leaders([("t", 0)], False, 0)
    assert error == ErrorCode.ELECTION_NOT_NEEDED
    assert cluster.controller.elect_leaders([("t", 0)], False, 1) == [("t", 0, ErrorCode.NONE, None)]
    assert cluster.summary("t") == (1, 1, 2, (0, 1))


def test_an_unclean_election_makes_the_target_the_only_isr_member(cluster: Cluster) -> None:
    cluster.create("t", [0, 1, 2])
    cluster.expire(0, 2)  # 1 is fenced: out of the ISR and not live
    cluster.alter(0, "t", (0,))
    [(_, _, error, _)] = cluster.controller.elect_leaders([("t", 0)], True, 1)
    assert error == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert cluster.controller.elect_leaders([("t", 0)], True, 2) == [("t", 0, ErrorCode.NONE, None)]
    assert cluster.summary("t") == (2, 1, 3, (2,))


def test_an_unclean_election_of_a_leaderless_partition_picks_the_first_live_replica(cluster: Cluster) -> None:
    cluster.create("t", [0, 1, 2])
    cluster.expire(0)  # 1 and 2 leave the ISR
    cluster.expire(1, 2)  # 0 is fenced: leaderless
    assert cluster.summary("t")[0] == -1
    assert cluster.controller.elect_leaders(None, True, -1) == [("t", 0, ErrorCode.NONE, None)]
    assert cluster.summary("t") == (1, 2, 4, (1,))


def test_elect_leaders_answers_each_partition_once_and_reports_unknown_ones(cluster: Cluster) -> None:
    cluster.create("t", [0, 1, 2])
    results = cluster.controller.elect_leaders([("t", 0), ("t", 0), ("t", 3), ("nope", 0)], False, -1)
    assert [(name, index, error) for name, index, error, _ in results] == [
        ("t", 0, ErrorCode.NONE), ("t", 3, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert cluster.summary("t") == (1, 1, 1, (0, 1, 2))


# -- topics and restarts -----------------------------------------------------------------------------------


def test_new_topics_are_placed_only_on_unfenced_brokers(cluster: Cluster) -> None:
    cluster.expire(0, 2)
    [result] = cluster.controller.create_topics([NewTopic("t", num_partitions=4, replication_factor=2)])
    assert result.error_code == ErrorCode.NONE
    topic = cluster.controller.image.topics_by_name["t"]
    assert all(set(p.replicas) == {0, 2} for p in topic.partitions.values())
    [too_big] = cluster.controller.create_topics([NewTopic("u", num_partitions=1, replication_factor=3)])
    assert too_big.error_code == ErrorCode.INVALID_REPLICATION_FACTOR


@pytest.mark.parametrize("validate_only", [False, True])
def test_partition_counts_past_the_limits_are_refused_before_anything_is_allocated(
        cluster: Cluster, validate_only: bool) -> None:
    end = cluster.controller.end_offset
    huge, fits, over = cluster.controller.create_topics(
        [NewTopic("huge", num_partitions=2**31 - 1, replication_factor=1),  # answered at once, nothing allocated
         NewTopic("a", num_partitions=4_000, replication_factor=1),
         NewTopic("b", num_partitions=6_001, replication_factor=1)], validate_only)  # 10001 in the request
    assert huge.error_code == ErrorCode.POLICY_VIOLATION and "10000" in huge.error_message
    assert fits.error_code == ErrorCode.NONE
    assert over.error_code == ErrorCode.POLICY_VIOLATION and "10001 in one request" in over.error_message
    if not validate_only:
        error, message = cluster.controller.create_partitions("a", 2**31 - 1, None, False)
        assert error == ErrorCode.POLICY_VIOLATION and "per request" in (message or "")
    assert "huge" not in cluster.controller.image.topics_by_name
    assert (cluster.controller.end_offset == end) == validate_only


def test_the_cluster_wide_partition_limit_counts_what_exists(tmp_path: Path, clock: FakeClock) -> None:
    limited = Cluster(tmp_path, clock)
    limited.config = dataclasses.replace(limited.config, cluster_max_partitions=10)
    limited.controller.close()
    limited.controller = limited.start_controller()
    limited.register(0)
    [first] = limited.controller.create_topics([NewTopic("t", num_partitions=8, replication_factor=1)])
    [second] = limited.controller.create_topics([NewTopic("u", num_partitions=3, replication_factor=1)])
    assert first.error_code == ErrorCode.NONE
    assert second.error_code == ErrorCode.POLICY_VIOLATION and "cluster.max.partitions is 10" in second.error_message
    assert limited.controller.create_partitions("t", 10, None, False) == (ErrorCode.NONE, None)
    assert limited.controller.create_partitions("t", 11, None, False)[0] == ErrorCode.POLICY_VIOLATION


def test_a_restarted_controller_replays_to_the_same_image(cluster: Cluster) -> None:
    cluster.create("t", [0, 1, 2])
    cluster.create("u", [2, 1], {"unclean.leader.election.enable": "true"})
    cluster.expire(0, 2)
    cluster.alter(2, "u", (2,))
    cluster.controller.elect_leaders(None, False, -1)
    cluster.controller.allocate_producer_ids(0)
    before = image_state(cluster.controller.image)
    assert all(from_json(to_json(r)) == r for r in cluster.controller.records)
    cluster.restart_controller()
    assert image_state(cluster.controller.image) == before


def test_a_restarted_controller_gives_every_broker_a_full_session(cluster: Cluster) -> None:
    cluster.create("t", [0, 1, 2])
    cluster.clock.advance(SESSION_MS)  # far past any session, heard from nobody
    cluster.restart_controller()
    cluster.clock.advance(SESSION_MS / 1000 - 0.1)
    cluster.controller.check_liveness()
    assert cluster.controller.image.fenced_brokers == set()
    cluster.clock.advance(0.2)
    cluster.controller.check_liveness()
    assert cluster.controller.image.fenced_brokers == {0, 1, 2}
    assert cluster.summary("t") == (-1, 3, 3, (2,))  # each fencing moved the leadership on, the last kept the ISR


# -- reassignments (KIP-455) and unregistration -----------------------------------------------------------------

def reassignment(cluster: Cluster, name: str) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    state = cluster.state(name)
    return state.replicas, state.adding_replicas, state.removing_replicas


def test_a_reassignment_adds_first_then_removes_once_the_new_replica_is_in_the_isr(cluster: Cluster) -> None:
    cluster.register(3)
    cluster.create("t", [0, 1, 2])
    [(_, _, error, _)] = cluster.controller.alter_partition_reassignments([("t", 0, (0, 1, 3))])
    assert error == ErrorCode.NONE
    assert reassignment(cluster, "t") == ((0, 1, 3, 2), (3,), (2,))
    assert cluster.summary("t") == (0, 1, 1, (0, 1, 2))  # same leader and ISR, a new leader epoch
    assert cluster.controller.list_partition_reassignments(None) == [("t", 0, (0, 1, 3, 2), (3,), (2,))]
    assert cluster.alter(0, "t", (0, 1, 2, 3)).error == ErrorCode.NONE  # the new replica caught up
    assert reassignment(cluster, "t") == ((0, 1, 3), (), ())
    assert cluster.summary("t") == (0, 2, 3, (0, 1, 3))  # the leaving replica is out of the ISR too
    assert cluster.controller.list_partition_reassignments(None) == []


def test_a_reassignment_away_from_the_leader_moves_leadership_within_the_target(cluster: Cluster) -> None:
    cluster.create("t", [0, 1, 2])
    cluster.controller.alter_partition_reassignments([("t", 0, (1, 2))])  # the target is in the ISR already
    assert reassignment(cluster, "t") == ((1, 2), (), ())
    assert cluster.summary("t") == (1, 2, 2, (1, 2))


def test_a_cancelled_reassignment_goes_back_to_the_replicas_before_it(cluster: Cluster) -> None:
    cluster.register(3)
    cluster.create("t", [0, 1, 2])
    cluster.controller.alter_partition_reassignments([("t", 0, (0, 1, 3))])
    cluster.controller.alter_partition_reassignments([("t", 0, None)])
    assert reassignment(cluster, "t") == ((0, 1, 2), (), ())
    [(_, _, error, _)] = cluster.controller.alter_partition_reassignments([("t", 0, None)])
    assert error == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


def test_reassignments_to_unknown_brokers_or_partitions_are_refused(cluster: Cluster) -> None:
    cluster.create("t", [0, 1, 2])
    results = cluster.controller.alter_partition_reassignments([("t", 0, (0, 9)), ("t", 0, (0, 0)), ("u", 0, (0,))])
    assert [error for _, _, error, _ in results] == [ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                                     ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                                     ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert reassignment(cluster, "t") == ((0, 1, 2), (), ())


def test_a_reassignment_in_progress_survives_a_controller_restart(cluster: Cluster) -> None:
    cluster.register(3)
    cluster.create("t", [0, 1, 2])
    cluster.controller.alter_partition_reassignments([("t", 0, (0, 1, 3))])
    cluster.restart_controller()
    assert reassignment(cluster, "t") == ((0, 1, 3, 2), (3,), (2,))


def test_only_a_stopped_broker_can_be_unregistered(cluster: Cluster) -> None:
    assert cluster.controller.unregister_broker(2)[0] == ErrorCode.INVALID_REQUEST
    assert cluster.controller.unregister_broker(7)[0] == ErrorCode.BROKER_ID_NOT_REGISTERED
    cluster.expire(0, 1)
    assert cluster.controller.unregister_broker(2) == (ErrorCode.NONE, None)
    assert 2 not in cluster.controller.image.brokers
    cluster.expire(0, 1)  # the liveness check forgets it too
    cluster.restart_controller()
    assert 2 not in cluster.controller.image.brokers
