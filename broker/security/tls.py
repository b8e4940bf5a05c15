"""TLS for a listener: the server context clients meet, the client context brokers use to reach each other
and the controller, and the principal a client certificate names.

Rules:
- Key material is PEM only (Kafka's `ssl.keystore.type=PEM`): a file (`ssl.keystore.location`, holding the
  certificate chain and the private key, the key encrypted with `ssl.key.password` or not) or the PEM text
  itself (`ssl.keystore.certificate.chain` and `ssl.keystore.key`). Trusted CAs likewise:
  `ssl.truststore.location` or `ssl.truststore.certificates`. Each key may be set per listener
  (`listener.name.<listener>.ssl.*`).
- `ssl.client.auth`: none (no certificate asked), requested (asked, verified if sent), required (refused
  without one). The verified certificate's subject, as an RFC 2253 name, is the principal: `User:CN=...`,
  as Kafka's default principal builder makes it.
- Outgoing links (replica fetchers, the controller channel) verify the server against the truststore and,
  with `ssl.endpoint.identification.algorithm=https` (the default), its host name; they present the keystore's
  certificate, so that mutual TLS between brokers works.
- A key file that cannot be read or a PEM that does not load is a start-up error naming the key and the
  file (StartupError: one line, exit status 2). PEM text is written to a private temporary file only long
  enough for OpenSSL to load it.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from epoch_broker.broker.config import BrokerConfig, StartupError

# Short names of RFC 2253 (what Java's X500Principal.getName() writes); others keep Python's long names.
_RFC2253_NAMES = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "countryName": "C",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
_RFC2253_SPECIAL = ',+"\\<>;'


def principal_of(certificate: dict[str, Any]) -> str:
    """`User:<subject>` for a verified peer certificate (as `SSLSocket.getpeercert()` decodes it): the subject's
    relative names in reverse order, as RFC 2253 and Kafka write them (`CN=alice,OU=eng,O=acme`)."""
    parts = []
    for rdn in reversed(certificate.get("subject", ())):
        parts.append("+".join(f"{_RFC2253_NAMES.get(name, name)}={_escape(value)}" for name, value in rdn))
    return "User:" + ",".join(parts)


def _escape(value: str) -> str:
    escaped = "".join(f"\\{c}" if c in _RFC2253_SPECIAL else c for c in value)
    if escaped.startswith((" ", "#")):
        escaped = "\\" + escaped
    return escaped[:-1] + "\\ " if escaped.endswith(" ") else escaped


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The context a TLS listener accepts connections with."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_keystore(context, config, listener, required=True)
    client_auth = config.listener_setting(listener, "ssl.client.auth")
    if client_auth != "none":
        if not _load_truststore(context, config, listener):
            raise StartupError(
                f"listener {listener}: ssl.client.auth={client_auth} needs a truststore to verify "
                "client certificates (ssl.truststore.location or ssl.truststore.certificates)"
            )
        context.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
    return context


def client_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The context this process connects to another's TLS listener with (the listener's name picks its keys)."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if not _load_truststore(context, config, listener):
        context.load_default_certs()
    context.check_hostname = config.listener_setting(listener, "ssl.endpoint.identification.algorithm") == "https"
    _load_keystore(context, config, listener, required=False)
    return context


def _load_keystore(context: ssl.SSLContext, config: BrokerConfig, listener: str, *, required: bool) -> None:
    location = config.listener_setting(listener, "ssl.keystore.location")
    password = config.listener_setting(listener, "ssl.key.password") or None
    chain = config.listener_setting(listener, "ssl.keystore.certificate.chain")
    if location:
        _check_readable("ssl.keystore.location", location)
        try:
            context.load_cert_chain(location, password=password)
        except (ssl.SSLError, OSError) as exc:
            raise StartupError(
                f"ssl.keystore.location {location}: not a PEM certificate chain with its private "
                f"key, or a wrong ssl.key.password ({exc})"
            ) from None
    elif chain:
        key = config.listener_setting(listener, "ssl.keystore.key")
        if not key:
            raise StartupError(
                f"listener {listener}: ssl.keystore.certificate.chain is set but ssl.keystore.key is not"
            )
        with _private_file(chain) as chain_file, _private_file(key) as key_file:
            try:
                context.load_cert_chain(chain_file, key_file, password=password)
            except ssl.SSLError as exc:
                raise StartupError(
                    f"ssl.keystore.certificate.chain / ssl.keystore.key of listener {listener}: "
                    f"not a PEM chain and its key, or a wrong ssl.key.password ({exc})"
                ) from None
    elif required:
        raise StartupError(f"listener {listener} uses TLS but has no certificate (ssl.keystore.location)")


def _load_truststore(context: ssl.SSLContext, config: BrokerConfig, listener: str) -> bool:
    location = config.listener_setting(listener, "ssl.truststore.location")
    certificates = config.listener_setting(listener, "ssl.truststore.certificates")
    try:
        if location:
            _check_readable("ssl.truststore.location", location)
            context.load_verify_locations(cafile=location)
        elif certificates:
            context.load_verify_locations(cadata=certificates)
        else:
            return False
    except ssl.SSLError as exc:
        where = location or f"ssl.truststore.certificates of listener {listener}"
        raise StartupError(f"truststore {where}: no PEM certificate loads ({exc})") from None
    return True


def _check_readable(key: str, path: str) -> None:
    if not os.access(path, os.R_OK) or not Path(path).is_file():
        raise StartupError(f"{key} {path}: not a readable file")


@contextmanager
def _private_file(text: str) -> Iterator[str]:
    """A file only this user can read, holding `text`, removed on exit (OpenSSL loads keys from files)."""
    with tempfile.TemporaryDirectory(prefix="epoch-broker-tls-") as directory:
        path = Path(directory) / "pem"
        path.touch(mode=0o600)
        path.write_text(text.replace("\\n", "\n"), encoding="ascii")
        yield str(path)
