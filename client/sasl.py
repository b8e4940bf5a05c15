"""SASL mechanisms, client side, sans-IO: `initial()` is the first token to send, `evaluate(challenge)` takes the
server's token and returns the next one to send, or None once the exchange is complete.

Rules:
- PLAIN (RFC 4616): one token, NUL username NUL password (an empty authzid, as Kafka's Java client sends);
  the server's empty answer completes it.
- SCRAM-SHA-256/512 (RFC 5802, 7677) through scramp: client-first, then client-final for the server-first, then
  the server-final is checked: a server signature that does not match means the server does not know the
  password (or is not the server it claims to be), and the exchange fails with `SaslError`.
- Anything wrong in the server's tokens, or a call out of order, raises `SaslError`, never another exception.
- A refusal by the broker comes as SaslAuthenticate's error, not through here: these are only the tokens.

Skipped: OAUTHBEARER, GSSAPI, delegation tokens (the `tokenauth` extension). scramp applies SASLprep (RFC 4013)
to the username and password, where Kafka's Java client sends their UTF-8 bytes as they are; the two differ only
for passwords that NFKC changes.
"""

from __future__ import annotations

import base64
from typing import Protocol

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SaslError(Exception):
    """The exchange cannot go on: a malformed or wrong server token, or a call out of order."""


class ClientMechanism(Protocol):
    mechanism: str
    complete: bool

    def initial(self) -> bytes: ...

    def evaluate(self, challenge: bytes) -> bytes | None: ...


class PlainClient:
    mechanism = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        if not username or not password:
            raise ValueError("SASL/PLAIN needs a username and a password")
        if "\0" in username or "\0" in password:
            raise ValueError("a SASL/PLAIN username or password cannot contain NUL")
        self._username = username
        self._password = password
        self._sent = False
        self.complete = False

    def initial(self) -> bytes:
        if self._sent:
            raise SaslError("SASL/PLAIN: initial() called twice")
        self._sent = True
        return f"\0{self._username}\0{self._password}".encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        if not self._sent or self.complete:
            raise SaslError("SASL/PLAIN: a server token out of order")
        # The server's answer to PLAIN is empty; Kafka's client does not look at it either.
        self.complete = True
        return None


class ScramClient:
    def __init__(self, mechanism: str, username: str, password: str) -> None:
        if mechanism not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ValueError(f"unknown SCRAM mechanism {mechanism!r}")
        self.mechanism = mechanism
        import scramp  # on first use: it and what it imports cost every start-up ~20 ms otherwise

        self._scram_error: type[Exception] = scramp.ScramException
        try:
            self._scramp = scramp.ScramClient([mechanism], username, password)
        except scramp.ScramException as exc:  # an empty username, or one SASLprep refuses
            raise ValueError(f"unusable SCRAM username or password: {exc.args[0]}") from None
        self._stage = "initial"  # then server-first, server-final, done
        self.complete = False

    def initial(self) -> bytes:
        if self._stage != "initial":
            raise SaslError(f"{self.mechanism}: initial() called twice")
        self._stage = "server-first"
        first: str = self._scramp.get_client_first()  # scramp's messages are str (it has no type information)
        return first.encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        stage, self._stage = self._stage, "done"  # any failure ends the exchange
        try:
            message = challenge.decode("utf-8")
            if stage == "server-first":
                self._scramp.set_server_first(message)
                final: str = self._scramp.get_client_final()
                answer = final.encode()
                self._stage = "server-final"
                return answer
            if stage == "server-final":
                if message.startswith("e="):
                    raise SaslError(f"{self.mechanism}: the server refused the exchange: {message[2:]}")
                self._scramp.set_server_final(message)
                self.complete = True
                return None
        except UnicodeDecodeError:
            raise SaslError(f"{self.mechanism}: the server's {stage} message is not UTF-8") from None
        except self._scram_error as exc:
            if stage == "server-final" and _is_verifier(message):
                # Well formed, so scramp refused the signature itself.
                raise SaslError(f"{self.mechanism}: the server signature does not match: the server does not "
                                "know this password") from None
            raise SaslError(f"{self.mechanism}: bad server {stage} message: {exc}") from None
        raise SaslError(f"{self.mechanism}: a server token out of order (the exchange is {stage})")


def _is_verifier(message: str) -> bool:
    """Whether a server-final is a well-formed `v=<base64>` (whatever the signature in it)."""
    if not message.startswith("v=") or "," in message:
        return False
    try:
        return bool(base64.b64decode(message[2:], validate=True))
    except ValueError:
        return False


def new_client(mechanism: str, username: str, password: str) -> ClientMechanism:
    if mechanism == "PLAIN":
        return PlainClient(username, password)
    if mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        return ScramClient(mechanism, username, password)
    raise ValueError(f"unknown SASL mechanism {mechanism!r} (expected one of {', '.join(MECHANISMS)})")
