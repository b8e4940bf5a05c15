"""What a client without the right credentials meets, byte for byte (our own client, so each answer is seen
exactly), and SCRAM users made with AlterUserScramCredentials (KIP-554) by a real admin client.

Each refusal ends the connection after its answer, and nothing the refused client asked for happened.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from epoch_broker import testing
from epoch_broker.client.aio import AuthenticationFailed, ConnectionClosed, KafkaClient, Security
from epoch_broker.client.connection import ClientConnection
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.framing import frame_size_prefix
from epoch_broker.protocol.messages import create_topics, metadata, sasl_handshake
from tests.helpers import not_yet, wait_for
from tests.security.conftest import USERS

SASL = "SASL_PLAINTEXT"


def login(mechanism: str, user: str, password: str) -> Security:
    return Security(sasl_mechanism=mechanism, username=user, password=password)


async def connection_closed(client: KafkaClient) -> None:
    """The broker closes the connection after its answer: a later request finds it closed (the close may reach
    us a moment after the answer)."""
    async def closed() -> object:
        try:
            answer = await client.request(metadata.API, 12, metadata.REQUEST.cls(topics=[]))
        except ConnectionClosed:
            return True
        return not_yet(f"still answered: {answer}")

    await wait_for(closed, what="the connection closed by the broker")


def topic_exists(broker: testing.Broker, name: str) -> bool:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    return name in admin.list_topics(timeout=10).topics


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("mallory", "alice-secret")])
async def test_a_wrong_password_and_an_unknown_user_get_the_same_refusal(secured: testing.Broker, mechanism: str,
                                                                       user: str, password: str) -> None:
    with pytest.raises(AuthenticationFailed, match="SASL_AUTHENTICATION_FAILED: Authentication failed") as refused:
        await KafkaClient.connect(secured.address(SASL), security=login(mechanism, user, password))
    # nothing tells an unknown user from a wrong password
    assert ("Invalid username or password" in str(refused.value)) == (mechanism == "PLAIN")


async def test_an_unknown_mechanism_is_answered_with_the_enabled_ones_and_the_connection_closed(
        secured: testing.Broker) -> None:
    async with await KafkaClient.connect(secured.address(SASL)) as client:
        answer = await client.request(sasl_handshake.API, 1, sasl_handshake.REQUEST.cls(mechanism="GSSAPI"))
        assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert answer.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        await connection_closed(client)


async def test_a_request_before_authentication_is_refused_and_does_nothing(secured: testing.Broker) -> None:
    name = f"sneaky-{uuid.uuid4().hex[:8]}"
    request = create_topics.REQUEST.cls(timeout_ms=5000, topics=[create_topics.REQUEST.CreatableTopic(
        name=name, num_partitions=1, replication_factor=1)])
    async with await KafkaClient.connect(secured.address(SASL)) as client:
        answer = await client.request(create_topics.API, 7, request)
        assert [t.error_code for t in answer.topics] == [ErrorCode.ILLEGAL_SASL_STATE]
        await connection_closed(client)
    assert not await asyncio.to_thread(topic_exists, secured, name)


async def test_sasl_handshake_v0_takes_raw_tokens_and_a_bad_one_closes_the_connection(
        secured: testing.Broker) -> None:
    """Clients of before KIP-152 send SaslHandshake v0, then the bare tokens; a wrong one gets no answer."""
    for password, accepted in ((USERS["alice"], True), ("wrong", False)):
        host, _, port = secured.address(SASL).rpartition(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            _, handshake = ClientConnection("old-client").send_request(
                sasl_handshake.API, 0, sasl_handshake.REQUEST.cls(mechanism="PLAIN"))
            writer.write(handshake)
            size = int.from_bytes(await reader.readexactly(4), "big")
            await reader.readexactly(size)
            token = f"\0alice\0{password}".encode()
            writer.write(frame_size_prefix(len(token)) + token)
            answer = await asyncio.wait_for(reader.read(4), 10)
            # PLAIN's answer is an empty token (a size of 0); a refusal closes the connection (EOF)
            assert answer == (b"\0\0\0\0" if accepted else b"")
        finally:
            writer.close()


def test_a_scram_user_made_with_alter_user_scram_credentials_logs_in_and_is_gone_once_deleted(
        secured: testing.Broker) -> None:
    admin = AdminClient({"bootstrap.servers": secured.bootstrap_servers})
    upsertion = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                             b"carol-secret")
    assert {user: f.result(30) for user, f in admin.alter_user_scram_credentials([upsertion]).items()} == {
        "carol": None}
    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(30)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 8192)]
    sasl = {"security.protocol": SASL, "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "carol"}
    assert delivered(secured, {**sasl, "sasl.password": "carol-secret"}, timeout_ms=30000)
    assert not delivered(secured, {**sasl, "sasl.password": "not-carol"})

    deletion = UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)
    assert {user: f.result(30) for user, f in admin.alter_user_scram_credentials([deletion]).items()} == {
        "carol": None}
    assert not delivered(secured, {**sasl, "sasl.password": "carol-secret"})


def delivered(broker: testing.Broker, settings: dict[str, str], timeout_ms: int = 3000) -> bool:
    """Whether a producer with these settings gets one record acknowledged within the timeout (False: refused
    at login, which librdkafka retries until the record times out)."""
    topic = broker.create_topic(f"scram-{uuid.uuid4().hex[:8]}")
    acked: list[bool] = []
    producer = Producer({"bootstrap.servers": broker.address(SASL), "message.timeout.ms": timeout_ms, **settings})
    producer.produce(topic, b"hello", on_delivery=lambda error, _m: acked.append(error is None))
    producer.flush(timeout_ms / 1000 + 5)
    return acked == [True]
