"""Fixtures of the security suite: a test CA with a server and a client certificate, and one in-process broker
per module with every kind of listener.

The broker's listeners (names are Kafka's listener names; MTLS is an SSL listener that requires a client
certificate):

| listener       | protocol       | who may connect                                          |
|----------------|----------------|----------------------------------------------------------|
| PLAINTEXT      | PLAINTEXT      | anyone (the tests create their topics here)              |
| SSL            | SSL            | anyone trusting the test CA; no client certificate asked |
| SASL_PLAINTEXT | SASL_PLAINTEXT | users of JAAS, with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 |
| SASL_SSL       | SASL_SSL       | the same users, over TLS                                 |
| MTLS           | SSL            | clients presenting a certificate signed by the test CA   |
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme

from epoch_broker import testing

USERS = {"alice": "alice-secret", "admin": "admin-secret"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{user}="{password}"' for user, password in USERS.items()) + ";")
# the client certificate's subject, and the principal the broker makes of it (RFC 2253: last RDN first)
CLIENT_CN, CLIENT_OU, CLIENT_O = "writer", "security tests", "Epoch Broker"
CLIENT_PRINCIPAL = f"User:CN={CLIENT_CN},OU={CLIENT_OU},O={CLIENT_O}"


@dataclass(frozen=True)
class Pki:
    """PEM files of the test CA and what it signed."""

    ca: trustme.CA
    ca_pem: Path  # the CA certificate: what clients and the broker trust
    server_pem: Path  # the broker's key and certificate chain (for 127.0.0.1 and localhost)
    client_cert: Path  # the mTLS client's certificate (CN=writer)
    client_key: Path  # its private key
    foreign_ca_pem: Path  # a CA that signed nothing here: a client trusting only it must refuse the broker


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    tmp = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    pki = Pki(ca=ca, ca_pem=tmp / "ca.pem", server_pem=tmp / "server.pem", client_cert=tmp / "client.pem",
              client_key=tmp / "client.key", foreign_ca_pem=tmp / "foreign-ca.pem")
    ca.cert_pem.write_to_path(str(pki.ca_pem))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(pki.server_pem))
    client = ca.issue_cert("writer@example.com", common_name=CLIENT_CN, organization_unit_name=CLIENT_OU,
                           organization_name=CLIENT_O)
    client.cert_chain_pems[0].write_to_path(str(pki.client_cert))
    client.private_key_pem.write_to_path(str(pki.client_key))
    trustme.CA().cert_pem.write_to_path(str(pki.foreign_ca_pem))
    return pki


@pytest.fixture(scope="module")
def secured(pki: Pki) -> Iterator[testing.Broker]:
    """One in-process broker with the five listeners above, for the whole module."""
    config = {
        "listeners": ",".join(f"{name}://127.0.0.1:0" for name in
                              ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL", "MTLS")),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "SASL_SSL:SASL_SSL,MTLS:SSL",
        "ssl.keystore.location": str(pki.server_pem),
        "ssl.truststore.location": str(pki.ca_pem),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
    }
    with testing.broker(config=config) as broker:
        yield broker
