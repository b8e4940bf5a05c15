"""The consumer protocol's decisions (broker/groups/consumer_protocol.py), socket-free: heartbeats in, records and
answers out, and the records replayed into a fresh group give the same group (what the next coordinator loads)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from epoch_broker.broker.groups import records
from epoch_broker.broker.groups.consumer_group import (
    ConsumerGroup,
    ConsumerGroupRecord,
    ConsumerGroupState,
    decode_record,
    encode_record,
)
from epoch_broker.broker.groups.consumer_protocol import (
    ConsumerGroupConfig,
    ConsumerGroupProtocol,
    HeartbeatRequest,
    HeartbeatResult,
)
from epoch_broker.broker.regex import compile_regex
from epoch_broker.protocol.errors import ErrorCode, KafkaError
from tests.helpers import not_yet, wait_for

ORDERS = uuid.UUID(int=1).bytes
PAYMENTS = uuid.UUID(int=2).bytes


@dataclass
class Topic:
    topic_id: bytes
    partitions: dict[int, Any]


@dataclass
class Harness:
    topics: dict[str, Topic] = field(default_factory=lambda: {
        "orders": Topic(ORDERS, dict.fromkeys(range(6))), "payments": Topic(PAYMENTS, dict.fromkeys(range(2)))})
    written: list[ConsumerGroupRecord] = field(default_factory=list)
    group: ConsumerGroup = field(default_factory=lambda: ConsumerGroup("g", 0))

    session_timeout_ms: int = 60_000
    rebalance_timeout_ms: int = 30_000

    def __post_init__(self) -> None:
        self.protocol = ConsumerGroupProtocol(ConsumerGroupConfig(session_timeout_ms=self.session_timeout_ms),
                                              lambda: self.topics, lambda: 0,
                                              lambda group, decided: self.written.extend(decided))

    def emit(self, record: ConsumerGroupRecord) -> None:
        self.group.replay(record, 0)
        self.written.append(record)

    def heartbeat(self, member_id: str, epoch: int, owned: Mapping[bytes, frozenset[int]] | None = None,
                  topics: list[str] | None = None, regex: str | None = None, instance_id: str | None = None,
                  assignor: str | None = None) -> HeartbeatResult:
        joining = epoch == 0
        request = HeartbeatRequest(
            group_id="g", member_id=member_id, member_epoch=epoch, instance_id=instance_id, rack_id=None,
            rebalance_timeout_ms=self.rebalance_timeout_ms if joining else -1,
            subscribed_topic_names=(topics if topics is not None else ([] if regex else ["orders"])) if joining
            else topics, subscribed_topic_regex=regex, server_assignor=assignor,
            owned=({} if joining else owned))
        self.protocol.validate(request)
        return self.protocol.heartbeat(self.group, request, self.emit)


@pytest.fixture
def harness() -> Iterator[Harness]:
    loop = asyncio.new_event_loop()  # the protocol arms its timers on the running loop
    asyncio.set_event_loop(loop)
    h = Harness()
    loop.run_until_complete(asyncio.sleep(0))
    yield h
    for member in h.group.members.values():
        member.cancel_timers()
    loop.close()
    asyncio.set_event_loop(None)


def run(coro_fn: Any) -> Any:
    return asyncio.get_event_loop().run_until_complete(coro_fn())


class Client:
    """A consumer as librdkafka behaves: it owns what the coordinator last assigned, and revokes at once."""

    def __init__(self, harness: Harness, member_id: str, **join: Any) -> None:
        self.h, self.member_id, self.epoch = harness, member_id, 0
        self.owned: dict[bytes, frozenset[int]] = {}
        self.answer(harness.heartbeat(member_id, 0, **join))

    def answer(self, result: HeartbeatResult) -> None:
        self.epoch = result.member_epoch
        if result.assignment is not None:
            self.owned = dict(result.assignment)

    def beat(self) -> None:
        self.answer(self.h.heartbeat(self.member_id, self.epoch, owned=self.owned))


def settle(clients: list[Client], rounds: int = 10) -> None:
    """Heartbeat every client in turn; after each beat no partition is owned by two clients."""
    for _ in range(rounds):
        for client in clients:
            client.beat()
            held = [(t, p) for c in clients for t, ps in c.owned.items() for p in ps]
            assert len(held) == len(set(held)), "a partition is owned by two members"


def partitions(client: Client) -> int:
    return sum(len(p) for p in client.owned.values())


def test_members_joining_one_by_one_end_with_two_partitions_each_and_never_share_one(harness: Harness) -> None:
    async def scenario() -> None:
        a = Client(harness, "a")
        assert harness.group.group_epoch == 1 and partitions(a) == 6
        b = Client(harness, "b")
        settle([a, b])
        c = Client(harness, "c")
        settle([a, b, c])
        assert [partitions(x) for x in (a, b, c)] == [2, 2, 2]
        assert harness.group.state is ConsumerGroupState.STABLE
        assert {x.epoch for x in (a, b, c)} == {harness.group.group_epoch} == {3}
    run(scenario)


def test_the_written_records_replayed_into_a_new_group_give_the_same_group(harness: Harness) -> None:
    async def scenario() -> None:
        clients = [Client(harness, m) for m in "abc"]
        settle(clients)
        clients[1].h.heartbeat("b", clients[1].epoch, owned=clients[1].owned)
        harness.heartbeat("c", -1)  # leaves: tombstones
        settle(clients[:2])
    run(scenario)
    loaded = ConsumerGroup("g", 0)
    for record in harness.written:
        key, value = encode_record(record)
        decoded = records.decode_key(key)
        assert not isinstance(decoded, records.OffsetKey | records.GroupKey)
        loaded.replay(decode_record(decoded, value), 0)
    group = harness.group
    assert (loaded.group_epoch, loaded.assignment_epoch) == (group.group_epoch, group.assignment_epoch)
    assert loaded.target_assignment == group.target_assignment
    assert loaded.subscription_metadata == group.subscription_metadata
    assert {m: (x.subscription, x.assignment) for m, x in loaded.members.items()} == \
        {m: (x.subscription, x.assignment) for m, x in group.members.items()}
    assert loaded.partition_epochs.as_dict() == group.partition_epochs.as_dict()
    for member in loaded.members.values():
        member.cancel_timers()


def test_a_member_told_to_revoke_keeps_its_epoch_until_it_stops_listing_the_partitions(harness: Harness) -> None:
    async def scenario() -> None:
        a = Client(harness, "a")
        b = Client(harness, "b")  # gets nothing yet: a still owns all six
        assert partitions(b) == 0 and b.epoch == 2
        before = a.epoch
        result = harness.heartbeat("a", a.epoch, owned=a.owned)  # told to revoke 3, still at its epoch
        assert result.member_epoch == before and result.assignment is not None
        assert sum(len(p) for p in result.assignment.values()) == 3
        assert harness.heartbeat("b", b.epoch, owned={}).assignment is None  # a has not revoked yet
        a.answer(result)
        a.beat()  # stops listing them: now at epoch 2
        assert a.epoch == 2
        b.beat()
        assert partitions(b) == 3
    run(scenario)


@pytest.mark.parametrize("received, error", [(5, ErrorCode.FENCED_MEMBER_EPOCH), (0, None)])
def test_an_epoch_the_coordinator_did_not_give_is_fenced(harness: Harness, received: int,
                                                         error: ErrorCode | None) -> None:
    async def scenario() -> None:
        a = Client(harness, "a")
        if error is None:  # epoch 0 under the same id: a rejoin, started afresh
            assert harness.heartbeat("a", received).member_epoch == a.epoch
            return
        with pytest.raises(KafkaError) as e:
            harness.heartbeat("a", received, owned=a.owned)
        assert e.value.code is error
    run(scenario)


def test_an_unknown_assignor_and_an_unknown_member_get_kafkas_errors(harness: Harness) -> None:
    async def scenario() -> None:
        with pytest.raises(KafkaError) as e:
            harness.heartbeat("a", 0, assignor="sticky")
        assert e.value.code is ErrorCode.UNSUPPORTED_ASSIGNOR
        with pytest.raises(KafkaError) as e:
            harness.heartbeat("ghost", 3, owned={})
        assert e.value.code is ErrorCode.UNKNOWN_MEMBER_ID
    run(scenario)


def test_a_static_member_leaving_for_now_keeps_its_partitions_and_its_next_instance_takes_them(
        harness: Harness) -> None:
    async def scenario() -> None:
        a = Client(harness, "a", instance_id="i-a")
        b = Client(harness, "b")
        settle([a, b])
        kept = dict(a.owned)
        with pytest.raises(KafkaError) as e:  # a second live instance
            harness.heartbeat("a2", 0, instance_id="i-a")
        assert e.value.code is ErrorCode.UNRELEASED_INSTANCE_ID
        assert harness.heartbeat("a", -2, instance_id="i-a").member_epoch == -2
        b.beat()
        assert partitions(b) == 3  # nothing of a's moved to b
        epoch = harness.group.group_epoch
        a2 = Client(harness, "a2", instance_id="i-a")
        assert a2.owned == kept and harness.group.group_epoch == epoch  # no rebalance
        assert "a" not in harness.group.members
    run(scenario)


def test_commits_need_the_current_member_epoch_and_offset_commit_v9(harness: Harness) -> None:
    async def scenario() -> None:
        a = Client(harness, "a")
        group = harness.group
        assert group.validate_offset_commit("a", None, a.epoch, 9) is ErrorCode.NONE
        assert group.validate_offset_commit("a", None, a.epoch - 1, 9) is ErrorCode.STALE_MEMBER_EPOCH
        assert group.validate_offset_commit("a", None, a.epoch, 8) is ErrorCode.UNSUPPORTED_VERSION
        assert group.validate_offset_commit("x", None, 1, 9) is ErrorCode.UNKNOWN_MEMBER_ID
        assert group.validate_offset_commit("", None, -1, 9) is ErrorCode.UNKNOWN_MEMBER_ID  # not empty
    run(scenario)


def test_a_regex_subscription_matches_whole_names_and_picks_up_new_topics(harness: Harness) -> None:
    async def scenario() -> None:
        a = Client(harness, "a", regex="orders|pay.*")
        assert set(a.owned) == {ORDERS, PAYMENTS}
        harness.topics["payments-eu"] = Topic(uuid.UUID(int=3).bytes, {0: None})
        harness.topics["old-orders"] = Topic(uuid.UUID(int=4).bytes, {0: None})  # "orders" must match it all
        harness.protocol.on_topics_changed([harness.group])
        a.beat()
        assert set(a.owned) == {ORDERS, PAYMENTS, uuid.UUID(int=3).bytes}
    run(scenario)


@pytest.mark.parametrize("pattern", ["(?=orders)o.*", "(a)\\1", "a++", "(?P<x>a)(?P=x)", "("])
def test_a_regex_re2_would_refuse_is_invalid_regular_expression(pattern: str) -> None:
    with pytest.raises(KafkaError) as e:
        compile_regex(pattern)
    assert e.value.code is ErrorCode.INVALID_REGULAR_EXPRESSION


@pytest.mark.parametrize("pattern", [r"orders\(?=x", r"a\+\+", "orders-[0-9]+", "^orders$"])
def test_escaped_and_plain_regex_constructs_are_accepted(pattern: str) -> None:
    compile_regex(pattern)


def test_a_member_silent_for_its_session_is_removed_and_the_group_epoch_moves(harness: Harness) -> None:
    harness.protocol.config = ConsumerGroupConfig(session_timeout_ms=50)

    async def scenario() -> None:
        Client(harness, "a")
        b = Client(harness, "b")

        def a_removed() -> object:
            b.beat()  # b keeps heartbeating, a says nothing
            return (set(harness.group.members) == {"b"} and partitions(b) == 6) or not_yet(
                f"members {sorted(harness.group.members)}, b owns {partitions(b)} partitions")

        await wait_for(a_removed, timeout=5, interval=0.02, what="a removed and its partitions with b")
        assert harness.group.group_epoch == 3
    run(scenario)


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_removed(harness: Harness) -> None:
    harness.rebalance_timeout_ms = 50

    async def scenario() -> None:
        a = Client(harness, "a")
        b = Client(harness, "b")
        harness.heartbeat("a", a.epoch, owned=a.owned)  # told to revoke 3; it keeps listing them, then goes quiet
        await wait_for(lambda: "a" not in harness.group.members, timeout=5, interval=0.01,
                       what="a removed for not revoking")
        b.beat()
        assert partitions(b) == 6
    run(scenario)
