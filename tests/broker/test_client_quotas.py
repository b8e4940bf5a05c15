"""Client quotas (KIP-546) over the wire: AlterClientQuotas and DescribeClientQuotas with raw requests (neither
confluent-kafka 2.16 nor kafka-python 3.0 has them), answered as Kafka's ClientQuotaControlManager and
ClientQuotasImage answer, and kept in the metadata log across a restart."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from epoch_broker import testing
from epoch_broker.client.aio import KafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import alter_client_quotas, describe_client_quotas

Entity = tuple[tuple[str, str | None], ...]
DEFAULT = None


async def alter(client: KafkaClient, entries: list[tuple[Entity, dict[str, float | None]]],
                validate_only: bool = False, version: int = 1) -> list[tuple[Entity, ErrorCode, str | None]]:
    """(entity, error, message) per answered entity; a value None removes the key."""
    messages = alter_client_quotas.REQUEST
    response = await client.request(alter_client_quotas.API, version, messages.cls(
        validate_only=validate_only, entries=[messages.EntryData(
            entity=[messages.EntityData(entity_type=t, entity_name=n) for t, n in entity],
            ops=[messages.OpData(key=k, value=v or 0.0, remove=v is None) for k, v in ops.items()])
            for entity, ops in entries]))
    return [(tuple((e.entity_type, e.entity_name) for e in r.entity), ErrorCode(r.error_code), r.error_message)
            for r in response.entries]


async def describe(client: KafkaClient, components: list[tuple[str, int, str | None]], strict: bool = False,
                   version: int = 1) -> Any:
    messages = describe_client_quotas.REQUEST
    return await client.request(describe_client_quotas.API, version, messages.cls(strict=strict, components=[
        messages.ComponentData(entity_type=t, match_type=m, match=match) for t, m, match in components]))


def entries(response: Any) -> dict[Entity, dict[str, float]]:
    assert response.error_code == ErrorCode.NONE, response
    return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)): {v.key: v.value
                                                                                  for v in entry.values}
            for entry in response.entries}


ALICE = (("user", "alice"),)
ALICE_P1 = (("client-id", "p1"), ("user", "alice"))
P1 = (("client-id", "p1"),)
DEFAULT_USER = (("user", DEFAULT),)
ALICE_ANY_CLIENT = (("client-id", DEFAULT), ("user", "alice"))
EXACT, DEFAULT_MATCH, SPECIFIED = (describe_client_quotas.MATCH_EXACT, describe_client_quotas.MATCH_DEFAULT,
                                   describe_client_quotas.MATCH_SPECIFIED)
ALL = {ALICE: {"producer_byte_rate": 1024.0, "request_percentage": 50.5},
       ALICE_P1: {"consumer_byte_rate": 2048.0},
       P1: {"producer_byte_rate": 4096.0, "controller_mutation_rate": 2.5},
       DEFAULT_USER: {"consumer_byte_rate": 512.0},
       ALICE_ANY_CLIENT: {"producer_byte_rate": 8.0}}


@pytest.fixture
async def quoted(tmp_path: Path) -> AsyncIterator[KafkaClient]:
    """A broker holding ALL, and a client of it."""
    async with testing.broker(data_dir=tmp_path) as started, await KafkaClient.connect(
            started.bootstrap_servers) as client:
        await client.negotiate()
        results = await alter(client, [(entity, dict(values)) for entity, values in ALL.items()])
        assert [error for _, error, _ in results] == [ErrorCode.NONE] * len(ALL)
        yield client


@pytest.mark.parametrize(("components", "strict", "expected"), [
    ([], False, list(ALL)),
    ([], True, []),
    ([("user", EXACT, "alice")], False, [ALICE, ALICE_P1, ALICE_ANY_CLIENT]),
    ([("user", EXACT, "alice")], True, [ALICE]),
    ([("user", DEFAULT_MATCH, None)], False, [DEFAULT_USER]),
    ([("user", SPECIFIED, None)], True, [ALICE, DEFAULT_USER]),
    ([("client-id", SPECIFIED, None)], False, [ALICE_P1, P1, ALICE_ANY_CLIENT]),
    ([("client-id", DEFAULT_MATCH, None), ("user", EXACT, "alice")], True, [ALICE_ANY_CLIENT]),
    ([("client-id", EXACT, "p1"), ("user", SPECIFIED, None)], True, [ALICE_P1]),
    ([("user", EXACT, "bob")], False, []),
], ids=["everything", "strict, no component: nothing", "alice in any entity", "alice alone",
        "the default user", "any user alone, the default too (KRaft's image)", "any client id",
        "alice's default client id", "p1 of any user", "no such user"])
async def test_describe_matches_as_kafka_s_image(quoted: KafkaClient, components: list[Any], strict: bool,
                                                  expected: list[Entity]) -> None:
    found = entries(await describe(quoted, components, strict))
    assert found == {entity: ALL[entity] for entity in expected}


@pytest.mark.parametrize(("components", "error"), [
    ([("group", EXACT, "g")], ErrorCode.UNSUPPORTED_VERSION),
    ([("", EXACT, "g")], ErrorCode.INVALID_REQUEST),
    ([("user", EXACT, None)], ErrorCode.INVALID_REQUEST),
    ([("user", DEFAULT_MATCH, "x")], ErrorCode.INVALID_REQUEST),
    ([("user", SPECIFIED, "x")], ErrorCode.INVALID_REQUEST),
    ([("user", 7, None)], ErrorCode.INVALID_REQUEST),
    ([("user", EXACT, "a"), ("user", EXACT, "b")], ErrorCode.INVALID_REQUEST),
    ([("ip", SPECIFIED, None), ("user", SPECIFIED, None)], ErrorCode.INVALID_REQUEST),
], ids=["unknown entity type", "empty type", "exact without a name", "default with a name",
        "specified with a name", "unknown match type", "a type twice", "ip with user"])
async def test_a_bad_filter_is_refused(quoted: KafkaClient, components: list[Any], error: ErrorCode) -> None:
    response = await describe(quoted, components, version=0)
    assert (response.error_code, response.entries) == (error, None)
    assert response.error_message


@pytest.mark.parametrize(("entity", "ops", "message"), [
    ((("group", "g"),), {"producer_byte_rate": 1.0}, "Unhandled client quota entity type: group"),
    ((), {"producer_byte_rate": 1.0}, "Invalid empty client quota entity"),
    ((("user", ""),), {"producer_byte_rate": 1.0}, "Empty user not supported"),
    ((("user", "a"), ("user", "b")), {"producer_byte_rate": 1.0}, "duplicate entity entry user"),
    ((("ip", "10.0.0.1"), ("user", "a")), {"connection_creation_rate": 1.0}, "IP entity should not be combined"),
    ((("ip", "not-an-ip"),), {"connection_creation_rate": 1.0}, "not-an-ip is not a valid IP"),
    (ALICE, {"fetch_byte_rate": 1.0}, "Invalid configuration key fetch_byte_rate"),
    (ALICE, {"connection_creation_rate": 1.0}, "Invalid configuration key connection_creation_rate"),
    (ALICE, {"producer_byte_rate": 0.0}, "Quota producer_byte_rate must be greater than 0"),
    (ALICE, {"producer_byte_rate": 1.5}, "producer_byte_rate cannot be a fractional value."),
], ids=["unknown type", "no type", "empty name", "a type twice", "ip with user", "ip not an address",
        "unknown key", "an ip key for a user", "zero", "fractional bytes"])
async def test_a_bad_alteration_is_refused_and_changes_nothing(quoted: KafkaClient, entity: Entity,
                                                               ops: dict[str, float], message: str) -> None:
    ((_, error, why),) = await alter(quoted, [(entity, dict(ops))], version=0)
    assert error == ErrorCode.INVALID_REQUEST
    assert why is not None and message in why
    assert entries(await describe(quoted, [])) == ALL


async def test_alterations_set_remove_and_validate_only(quoted: KafkaClient) -> None:
    bob = (("user", "bob"),)
    ip = (("ip", DEFAULT),)
    assert await alter(quoted, [(bob, {"producer_byte_rate": 100.0})], validate_only=True) == [
        (bob, ErrorCode.NONE, None)]
    assert bob not in entries(await describe(quoted, []))
    results = await alter(quoted, [(bob, {"producer_byte_rate": 100.0}), (ip, {"connection_creation_rate": 5.0}),
                                   (ALICE, {"producer_byte_rate": None, "request_percentage": None}),
                                   (P1, {"no_such_key": None, "producer_byte_rate": 10.0}),
                                   (ALICE_P1, {"consumer_byte_rate": 1.0}), (ALICE_P1, {"consumer_byte_rate": 2.0})])
    assert [(entity, error) for entity, error, _ in results] == [
        (bob, ErrorCode.NONE), (ip, ErrorCode.NONE), (ALICE, ErrorCode.NONE), (P1, ErrorCode.NONE),
        (ALICE_P1, ErrorCode.INVALID_REQUEST)]
    found = entries(await describe(quoted, []))
    assert ALICE not in found  # its last value removed: the entity is gone
    assert found[bob] == {"producer_byte_rate": 100.0}
    assert found[ip] == {"connection_creation_rate": 5.0}
    assert found[P1] == {"producer_byte_rate": 10.0, "controller_mutation_rate": 2.5}
    assert found[ALICE_P1] == ALL[ALICE_P1]  # named twice: unchanged


async def test_a_principal_without_alter_configs_is_refused(tmp_path: Path) -> None:
    config = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
    async with testing.broker(data_dir=tmp_path, config=config) as started, await KafkaClient.connect(
            started.bootstrap_servers) as client:
        await client.negotiate()
        assert [error for _, error, _ in await alter(client, [(ALICE, {"producer_byte_rate": 1.0})])] == [
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
        response = await describe(client, [])
        assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


async def test_quotas_survive_a_restart(tmp_path: Path) -> None:
    with testing.broker(data_dir=tmp_path) as started:
        async with await KafkaClient.connect(started.bootstrap_servers) as client:
            await client.negotiate()
            await alter(client, [(entity, dict(values)) for entity, values in ALL.items()])
        started.restart()
        async with await KafkaClient.connect(started.bootstrap_servers) as client:
            await client.negotiate()
            assert entries(await describe(client, [])) == ALL
