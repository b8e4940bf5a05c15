"""Real clients over the broker's TLS and SASL listeners: confluent-kafka 2.16 (librdkafka 2.16), kafka-python 3.0,
aiokafka 0.14, kafkajs 2.2 (Node, tests/interop/js/flow.js) and Debian's kcat 1.7.1 (librdkafka 2.0.2).

Each client writes N records to a topic of its own over one secured listener, then reads them back over the same
listener; the values must come back as written, in order. TLS clients verify the broker's certificate against
the test CA, host name included (the certificate names 127.0.0.1 and localhost). SASL users come from the
broker's JAAS config; SCRAM credentials are derived from the same passwords at start.

Besides the round trips: a client that does not trust the CA fails its handshake, a client certificate's
subject becomes its connection's principal, a SASL login's user becomes its connection's principal, and the
MTLS listener refuses a client without a certificate.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from aiokafka.errors import KafkaConnectionError
from aiokafka.helpers import create_ssl_context
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from epoch_broker import testing
from epoch_broker.protocol.connection import ANONYMOUS
from tests.helpers import not_yet, wait_for, wait_for_sync
from tests.interop.support import kcat_bin, run_flow
from tests.security.conftest import CLIENT_PRINCIPAL, USERS, Pki

pytestmark = pytest.mark.interop

N = 20  # records per round trip
USER = "alice"
TIMEOUT_S = 60.0  # the bound on every wait: generous, for a loaded 2-core machine


@dataclass(frozen=True)
class Case:
    """How a client reaches the broker: which listener, with which security.protocol, SASL mechanism and
    client certificate."""

    id: str
    listener: str
    protocol: str  # Kafka's security.protocol
    mechanism: str | None = None  # SASL mechanism (SASL_* protocols)
    client_cert: bool = False  # present the test client certificate (the MTLS listener requires one)

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")


SSL = Case("ssl", "SSL", "SSL")
SASL_PLAIN = Case("sasl_plaintext-plain", "SASL_PLAINTEXT", "SASL_PLAINTEXT", "PLAIN")
SASL_SCRAM_512 = Case("sasl_plaintext-scram-sha-512", "SASL_PLAINTEXT", "SASL_PLAINTEXT", "SCRAM-SHA-512")
SASL_SSL_SCRAM_256 = Case("sasl_ssl-scram-sha-256", "SASL_SSL", "SASL_SSL", "SCRAM-SHA-256")
SASL_SSL_PLAIN = Case("sasl_ssl-plain", "SASL_SSL", "SASL_SSL", "PLAIN")
MTLS = Case("mtls-client-certificate", "MTLS", "SSL", client_cert=True)
ALL_CASES = [SSL, SASL_PLAIN, SASL_SCRAM_512, SASL_SSL_SCRAM_256, SASL_SSL_PLAIN, MTLS]


def cases(*chosen: Case) -> Any:
    return pytest.mark.parametrize("case", chosen, ids=[c.id for c in chosen])


def new_topic(broker: testing.Broker, client: str, case: Case) -> str:
    return broker.create_topic(f"sec-{client}-{case.id}-{uuid.uuid4().hex[:8]}")


def values_for(topic: str) -> list[bytes]:
    return [f"record {i} of {topic}".encode() for i in range(N)]


# --- librdkafka: confluent-kafka and kcat ---------------------------------------------------------------------


def librdkafka_config(case: Case, pki: Pki) -> dict[str, str]:
    conf = {"security.protocol": case.protocol}
    if case.tls:
        conf |= {"ssl.ca.location": str(pki.ca_pem), "ssl.endpoint.identification.algorithm": "https"}
    if case.client_cert:
        conf |= {"ssl.certificate.location": str(pki.client_cert), "ssl.key.location": str(pki.client_key)}
    if case.mechanism:
        conf |= {"sasl.mechanisms": case.mechanism, "sasl.username": USER, "sasl.password": USERS[USER]}
    return conf


def confluent_round_trip(address: str, conf: dict[str, str], topic: str, values: list[bytes]) -> list[bytes]:
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": address, "error_cb": errors.append, **conf})
    try:
        delivered: list[Any] = []
        for value in values:
            producer.produce(topic, value, partition=0, on_delivery=lambda err, msg: delivered.append(err))
        assert producer.flush(TIMEOUT_S) == 0, f"records left unsent; client errors: {errors}"
        assert delivered == [None] * len(values), f"delivery reports: {delivered}; client errors: {errors}"
    finally:
        producer.close()
    consumer = Consumer({"bootstrap.servers": address, "group.id": f"{topic}-reader", "enable.auto.commit": False,
                         "error_cb": errors.append, **conf})
    try:
        consumer.assign([CkTopicPartition(topic, 0, OFFSET_BEGINNING)])
        got: list[bytes] = []

        def read() -> object:
            msg = consumer.poll(0.5)
            if msg is not None:
                if msg.error():
                    raise KafkaException(msg.error())
                got.append(msg.value())
            return len(got) >= len(values) or not_yet(f"{len(got)} read")

        wait_for_sync(read, TIMEOUT_S, interval=0, what=f"{len(values)} records of {topic}")
        return got
    finally:
        consumer.close()


def kcat(address: str, conf: dict[str, str], *args: str, stdin: bytes | None = None) -> str:
    settings = [a for key, value in conf.items() for a in ("-X", f"{key}={value}")]
    proc = subprocess.run([kcat_bin(), "-b", address, *settings, *args], input=stdin, capture_output=True,
                          timeout=TIMEOUT_S)
    assert proc.returncode == 0, f"kcat {' '.join(args)} exited {proc.returncode}: {proc.stderr.decode()[-2000:]}"
    return proc.stdout.decode()


def kcat_round_trip(address: str, conf: dict[str, str], topic: str, values: list[bytes]) -> list[bytes]:
    kcat(address, conf, "-P", "-t", topic, "-p", "0", stdin=b"".join(v + b"\n" for v in values))
    out = kcat(address, conf, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-c", str(len(values)), "-e", "-J")
    return [json.loads(line)["payload"].encode() for line in out.splitlines() if line.strip()]


# --- kafka-python and aiokafka ----------------------------------------------------------------------------------


def python_client_config(case: Case, pki: Pki, ssl_context: Any = None) -> dict[str, Any]:
    """kafka-python's and aiokafka's keyword arguments (aiokafka takes an SSLContext, kafka-python files)."""
    conf: dict[str, Any] = {"security_protocol": case.protocol}
    if case.tls and ssl_context is not None:
        conf["ssl_context"] = ssl_context
    elif case.tls:
        conf |= {"ssl_cafile": str(pki.ca_pem), "ssl_check_hostname": True}
        if case.client_cert:
            conf |= {"ssl_certfile": str(pki.client_cert), "ssl_keyfile": str(pki.client_key)}
    if case.mechanism:
        conf |= {"sasl_mechanism": case.mechanism, "sasl_plain_username": USER, "sasl_plain_password": USERS[USER]}
    return conf


def aiokafka_ssl_context(case: Case, pki: Pki) -> Any:
    if not case.tls:
        return None
    cert = {"certfile": pki.client_cert, "keyfile": pki.client_key} if case.client_cert else {}
    context = create_ssl_context(cafile=pki.ca_pem, **cert)
    assert context.check_hostname, "aiokafka's context must verify the broker's host name"
    return context


def kafka_python_round_trip(address: str, conf: dict[str, Any], topic: str, values: list[bytes]) -> list[bytes]:
    producer = KafkaProducer(bootstrap_servers=address, request_timeout_ms=30000, **conf)
    try:
        futures = [producer.send(topic, value=value, partition=0) for value in values]
        producer.flush(TIMEOUT_S)
        for future in futures:
            future.get(TIMEOUT_S)  # raises the produce error, if any
    finally:
        producer.close(TIMEOUT_S)
    consumer = KafkaConsumer(bootstrap_servers=address, group_id=None, enable_auto_commit=False, **conf)
    try:
        tp = KpTopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[bytes] = []

        def read() -> object:
            for msgs in consumer.poll(timeout_ms=500).values():
                got.extend(m.value for m in msgs)
            return len(got) >= len(values) or not_yet(f"{len(got)} read")

        wait_for_sync(read, TIMEOUT_S, interval=0, what=f"{len(values)} records of {topic}")
        return got
    finally:
        consumer.close()


async def aiokafka_round_trip(address: str, conf: dict[str, Any], topic: str, values: list[bytes]) -> list[bytes]:
    producer = AIOKafkaProducer(bootstrap_servers=address, request_timeout_ms=30000, **conf)
    try:
        await producer.start()
        futures = [await producer.send(topic, value=value, partition=0) for value in values]
        await producer.flush()
        for future in futures:
            await future  # raises the produce error, if any
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=address, enable_auto_commit=False, **conf)
    try:
        await consumer.start()
        tp = AioTopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        got: list[bytes] = []

        async def read() -> object:
            for msgs in (await consumer.getmany(timeout_ms=500)).values():
                got.extend(m.value for m in msgs)
            return len(got) >= len(values) or not_yet(f"{len(got)} read")

        await wait_for(read, TIMEOUT_S, interval=0, what=f"{len(values)} records of {topic}")
        return got
    finally:
        await consumer.stop()


# --- kafkajs -----------------------------------------------------------------------------------------------------


def kafkajs_security(case: Case, pki: Pki) -> dict[str, Any]:
    """flow.js's "ssl" and "sasl" keys (kafkajs spells mechanisms in lower case)."""
    out: dict[str, Any] = {}
    if case.tls:
        out["ssl"] = {"ca": str(pki.ca_pem)}
        if case.client_cert:
            out["ssl"] |= {"cert": str(pki.client_cert), "key": str(pki.client_key)}
    if case.mechanism:
        out["sasl"] = {"mechanism": case.mechanism.lower(), "username": USER, "password": USERS[USER]}
    return out


def kafkajs_round_trip(address: str, security: dict[str, Any], topic: str, values: list[bytes]) -> list[bytes]:
    now = int(time.time() * 1000)
    records = [{"key": None, "value": b64(v), "headers": [], "timestamp": now} for v in values]
    steps = [{"op": "produce", "topic": topic, "records": records},
             {"op": "consume", "topic": topic, "count": len(values), "group": f"{topic}-reader",
              "timeoutMs": int(TIMEOUT_S * 1000)}]
    _, consumed = run_flow({"brokers": [address], "steps": steps, **security}, TIMEOUT_S * 2 + 30)
    return [unb64(m["value"]) for m in consumed]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


# --- round trips -------------------------------------------------------------------------------------------------


@cases(*ALL_CASES)
def test_confluent_kafka_produces_and_consumes_over(secured: testing.Broker, pki: Pki, case: Case) -> None:
    topic = new_topic(secured, "ck", case)
    values = values_for(topic)
    got = confluent_round_trip(secured.address(case.listener), librdkafka_config(case, pki), topic, values)
    assert got == values


@cases(*ALL_CASES)
def test_kafka_python_produces_and_consumes_over(secured: testing.Broker, pki: Pki, case: Case) -> None:
    topic = new_topic(secured, "kp", case)
    values = values_for(topic)
    got = kafka_python_round_trip(secured.address(case.listener), python_client_config(case, pki), topic, values)
    assert got == values


@cases(*ALL_CASES)
async def test_aiokafka_produces_and_consumes_over(secured: testing.Broker, pki: Pki, case: Case) -> None:
    topic = new_topic(secured, "aio", case)
    values = values_for(topic)
    conf = python_client_config(case, pki, aiokafka_ssl_context(case, pki))
    got = await aiokafka_round_trip(secured.address(case.listener), conf, topic, values)
    assert got == values


@cases(*ALL_CASES)
def test_kafkajs_produces_and_consumes_over(secured: testing.Broker, pki: Pki, case: Case) -> None:
    topic = new_topic(secured, "kjs", case)
    values = values_for(topic)
    got = kafkajs_round_trip(secured.address(case.listener), kafkajs_security(case, pki), topic, values)
    assert got == values


KCAT_SCRAM_CASES = [c for c in ALL_CASES if "SCRAM" in (c.mechanism or "")]


@cases(*[c for c in ALL_CASES if c not in KCAT_SCRAM_CASES])
def test_kcat_produces_and_consumes_over(secured: testing.Broker, pki: Pki, case: Case) -> None:
    topic = new_topic(secured, "kcat", case)
    values = values_for(topic)
    got = kcat_round_trip(secured.address(case.listener), librdkafka_config(case, pki), topic, values)
    assert got == values


@cases(*KCAT_SCRAM_CASES)
def test_kcat_scram_is_refused_as_librdkafka_2_0_repeats_its_nonce(secured: testing.Broker, pki: Pki,
                                                                   case: Case) -> None:
    """librdkafka before 2.6.1 (Debian kcat's 2.0.2) sends r=<client nonce><server-first nonce> in the SCRAM
    client-final (confluentinc/librdkafka#4895). RFC 5802 wants the server-first nonce exactly, as Kafka 4's
    ScramSaslServer checks: the login fails as with a wrong password, and kcat says so. (Kafka 3.8.1-3.9 let
    these clients in; docs/security.md tells kcat users to log in with PLAIN.)"""
    with pytest.raises(AssertionError, match=r"(?i)authentication|invalid credentials"):
        kcat(secured.address(case.listener), librdkafka_config(case, pki), "-L")


# --- refusals and principals -------------------------------------------------------------------------------------


@contextmanager
def confluent_producer(address: str, conf: dict[str, str]) -> Iterator[tuple[Producer, list[KafkaError]]]:
    """A producer and the errors its error_cb reported; closed on exit."""
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": address, "error_cb": errors.append, **conf})
    try:
        yield producer, errors
    finally:
        producer.close()


def first_error(producer: Producer, errors: list[KafkaError]) -> KafkaError:
    """Serve the producer's callbacks until its error_cb reports something; that error."""

    def reported() -> KafkaError | None:
        producer.poll(0.1)
        return errors[0] if errors else None

    return testing.wait_until(reported, "an error reported by the client", TIMEOUT_S)


def connections_on(broker: testing.Broker, listener: str) -> list[Any]:
    """The broker's open connections on one listener (the set lives on the broker's thread: copy it)."""
    return [c for c in list(broker.server.server.connections) if c.listener.name == listener]


def new_connections(broker: testing.Broker, listener: str, before: list[Any]) -> list[Any]:
    """Connections opened since `before` (which holds the older ones, so their ids cannot be reused)."""
    older = {id(c) for c in before}
    return [c for c in connections_on(broker, listener) if id(c) not in older]


def principals_of_new_connections(broker: testing.Broker, listener: str, before: list[Any]) -> set[str]:
    """The principals of the connections opened since `before`, once every one of them has left ANONYMOUS
    (a SASL connection is counted from its TCP accept and named at its SaslAuthenticate)."""

    def named() -> set[str] | None:
        principals = {c.protocol.principal for c in new_connections(broker, listener, before)}
        return principals if principals and ANONYMOUS not in principals else None

    return testing.wait_until(named, f"the client's connections on {listener} authenticated", TIMEOUT_S)


def test_a_client_that_does_not_trust_the_ca_fails_its_tls_handshake(secured: testing.Broker, pki: Pki) -> None:
    # no ssl.ca.location: librdkafka verifies against the system's CAs, which never signed the test CA's cert
    with confluent_producer(secured.address("SSL"), {"security.protocol": "SSL"}) as (producer, errors):
        error = first_error(producer, errors)
        assert error.code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN), error
        assert "certificate verify failed" in error.str(), error.str()
        with pytest.raises(KafkaException):
            producer.list_topics(timeout=1)


async def test_a_client_trusting_another_ca_refuses_the_broker_certificate(secured: testing.Broker,
                                                                            pki: Pki) -> None:
    context = create_ssl_context(cafile=pki.foreign_ca_pem)
    producer = AIOKafkaProducer(bootstrap_servers=secured.address("SSL"), security_protocol="SSL",
                                ssl_context=context, request_timeout_ms=10000)
    try:
        with pytest.raises(KafkaConnectionError):
            await producer.start()
    finally:
        await producer.stop()


def test_a_client_certificate_becomes_the_principal_of_its_mtls_connection(secured: testing.Broker,
                                                                           pki: Pki) -> None:
    before = connections_on(secured, "MTLS")
    with confluent_producer(secured.address("MTLS"), librdkafka_config(MTLS, pki)) as (producer, errors):
        producer.list_topics(timeout=TIMEOUT_S)  # connected, its certificate verified
        assert principals_of_new_connections(secured, "MTLS", before) == {CLIENT_PRINCIPAL}, errors


def test_a_sasl_login_becomes_the_principal_of_its_connection(secured: testing.Broker, pki: Pki) -> None:
    before = connections_on(secured, "SASL_SSL")
    with confluent_producer(secured.address("SASL_SSL"), librdkafka_config(SASL_SSL_SCRAM_256, pki)) as (
            producer, errors):
        producer.list_topics(timeout=TIMEOUT_S)  # connected and logged in
        assert principals_of_new_connections(secured, "SASL_SSL", before) == {f"User:{USER}"}, errors


def test_a_client_without_a_certificate_is_refused_on_the_mtls_listener(secured: testing.Broker,
                                                                        pki: Pki) -> None:
    before = connections_on(secured, "MTLS")
    with confluent_producer(secured.address("MTLS"), librdkafka_config(SSL, pki)) as (producer, errors):
        error = first_error(producer, errors)
        assert error.code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN), error
        with pytest.raises(KafkaException):
            producer.list_topics(timeout=1)
    assert new_connections(secured, "MTLS", before) == []



@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_wrong_password_is_refused(secured: testing.Broker, pki: Pki, mechanism: str) -> None:
    conf = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": mechanism, "sasl.username": USER,
            "sasl.password": "not-" + USERS[USER]}
    before = connections_on(secured, "SASL_PLAINTEXT")
    with confluent_producer(secured.address("SASL_PLAINTEXT"), conf) as (producer, errors):
        error = first_error(producer, errors)
        assert error.code() == KafkaError._AUTHENTICATION, error
        with pytest.raises(KafkaException):
            producer.list_topics(timeout=1)
    still_open = new_connections(secured, "SASL_PLAINTEXT", before)
    assert all(c.protocol.principal != f"User:{USER}" for c in still_open)
