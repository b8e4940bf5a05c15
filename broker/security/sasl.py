"""SASL mechanisms, broker side, sans-IO: the client's token in, the server's token out (Kafka's `PlainSaslServer`,
`ScramSaslServer`), and the credentials they check.

Rules:
- `evaluate(token)` returns the next server token or raises `AuthenticationFailed`, whose message is what the
  client is told (SaslAuthenticate's error_message, Kafka's own texts). A malformed token is an
  `AuthenticationFailed` too, never another exception. Once `complete`, `principal` is "User:<name>".
- No message tells an unknown user from a wrong password. SCRAM goes further: an unknown user is answered a
  server-first built from a decoy credential (its salt stable per user and per store, so probing twice shows
  nothing) and the exchange fails at the client-final, exactly where a wrong password fails.
- A second `evaluate` after success or failure raises `IllegalSaslState` (an `AuthenticationFailed`): the
  connection's gate (protocol/connection.py) should never let it happen.
- PLAIN (RFC 4616): token = authzid NUL authcid NUL password, UTF-8. The authzid is empty or equals the authcid,
  as Kafka requires. Passwords are compared in constant time.
- SCRAM-SHA-256/512 (RFC 5802, 7677) through scramp: no channel binding, an empty gs2 authzid (scramp's rule;
  Kafka's Java client, librdkafka and kafka-python send it empty), and no extensions: Kafka's `tokenauth=true`
  (delegation tokens) is refused.
- Credentials: iterations within Kafka's bounds, 4096..16384; any salt that is not empty, as Kafka takes a
  client's (scramp's own floor of 12 bytes, a policy for the salts it makes, is lowered to 1 so such a credential
  can log in).
- JAAS strings (`sasl.jaas.config`, Kafka's `JaasConfig`): exactly one login module, a control flag, `key=value`
  options with values quoted ("..." or '...', backslash escapes) or bare words, and a terminating `;`. The
  `user_<name>="<password>"` options of PlainLoginModule are the users PLAIN accepts; `username`/`password` are
  what this side logs in with (PlainLoginModule or ScramLoginModule).

Skipped: OAUTHBEARER, GSSAPI, delegation tokens, re-authentication (KIP-368), SASLprep differences: scramp
normalises SCRAM usernames and passwords (RFC 4013) where Kafka takes the UTF-8 bytes as they are, which
differs only for passwords that NFKC changes.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from types import ModuleType

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism bounds, the same for both hashes
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"

_HASHES = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
_PLAIN_FAILED = "Authentication failed: Invalid username or password"


def _scramp() -> ModuleType:
    """scramp, imported on first use: it and what it imports cost ~20 ms of every start-up otherwise."""
    import scramp
    import scramp.core

    # Kafka takes a salted credential with any salt (confluent-kafka-python's own suite sets b"salt"); scramp
    # would refuse one under 12 bytes at every login. Salts made here stay scramp's (16 bytes).
    scramp.core.Salt.MIN_LENGTH = 1

    return scramp


class AuthenticationFailed(Exception):
    """The exchange failed. The message is what the client is told; `reason` is for the broker's log only (it may
    say that the user is unknown, which the client must not learn)."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


class IllegalSaslState(AuthenticationFailed):
    """A token after the exchange already succeeded or failed (Kafka's ILLEGAL_SASL_STATE)."""


def _scram_failed(mechanism: str, reason: str) -> AuthenticationFailed:
    # Kafka's SaslServerAuthenticator answers every SaslException of a SCRAM exchange with this one text.
    return AuthenticationFailed(
        f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}",
        reason,
    )


def _check_mechanism(mechanism: str) -> None:
    if mechanism not in _HASHES:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r} (expected one of {', '.join(SCRAM_MECHANISMS)})")


def _check_iterations(mechanism: str, iterations: int) -> None:
    if isinstance(iterations, bool) or not isinstance(iterations, int):
        raise ValueError(f"iterations must be an integer, not {iterations!r}")
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(
            f"iterations {iterations} outside Kafka's bounds for {mechanism} ({MIN_ITERATIONS}..{MAX_ITERATIONS})"
        )


def _check_salt(salt: bytes) -> None:
    if not isinstance(salt, bytes) or not salt:
        raise ValueError("the salt must not be empty")


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the broker keeps of a SCRAM password (RFC 5802): never the password nor the salted password."""

    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    def __post_init__(self) -> None:
        _check_mechanism(self.mechanism)
        _check_iterations(self.mechanism, self.iterations)
        _check_salt(self.salt)
        size = _HASHES[self.mechanism]().digest_size
        if len(self.stored_key) != size or len(self.server_key) != size:
            raise ValueError(f"{self.mechanism} keys must be {size} bytes")

    def __repr__(self) -> str:
        return f"ScramCredential({self.mechanism}, iterations={self.iterations})"  # keys stay out of logs

    @classmethod
    def from_password(
        cls, mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
    ) -> ScramCredential:
        """A credential for `password`, with a fresh random salt unless one is given."""
        _check_mechanism(mechanism)
        _check_iterations(mechanism, iterations)
        if salt is not None:
            _check_salt(salt)
        scramp = _scramp()
        try:
            salt, stored_key, server_key, iterations = scramp.ScramMechanism(mechanism).make_auth_info(
                password, iteration_count=iterations, salt=salt
            )
        except scramp.ScramException as exc:  # a password SASLprep refuses (control characters, ...)
            raise ValueError(f"unusable password: {exc.args[0]}") from None
        return cls(mechanism, salt, iterations, stored_key, server_key)

    @classmethod
    def from_salted_password(
        cls, mechanism: str, salt: bytes, salted_password: bytes, iterations: int
    ) -> ScramCredential:
        """The credential of AlterUserScramCredentials (KIP-554), whose client sends the salt and the salted
        password Hi(password, salt, iterations); the keys are derived here as RFC 5802 says. scramp only derives
        them from a password, so these three lines are the caller's."""
        _check_mechanism(mechanism)
        _check_iterations(mechanism, iterations)
        _check_salt(salt)
        if not salted_password:
            raise ValueError("the salted password must not be empty")
        digest = _HASHES[mechanism]
        client_key = hmac.new(salted_password, b"Client Key", digest).digest()
        server_key = hmac.new(salted_password, b"Server Key", digest).digest()
        return cls(mechanism, salt, iterations, digest(client_key).digest(), server_key)


class CredentialStore:
    """Who may log in: PLAIN passwords (user -> password) and SCRAM credentials ((user, mechanism) -> credential).

    `secret` seeds the decoy salts of unknown SCRAM users; a random one per store unless given (give the same
    one to every broker of a cluster so that a user's decoy salt does not change from broker to broker)."""

    def __init__(self, passwords: Mapping[str, str] | None = None, secret: bytes | None = None) -> None:
        self._passwords: dict[str, str] = dict(passwords or {})
        self._scram: dict[tuple[str, str], ScramCredential] = {}
        self._secret = secret if secret is not None else secrets.token_bytes(32)

    def clear(self) -> None:
        """Forget every password and credential (the decoy secret stays)."""
        self._passwords.clear()
        self._scram.clear()

    def set_password(self, user: str, password: str) -> None:
        self._passwords[user] = password

    def remove_password(self, user: str) -> bool:
        """Whether there was one."""
        return self._passwords.pop(user, None) is not None

    def password(self, user: str) -> str | None:
        return self._passwords.get(user)

    def set_scram(self, user: str, credential: ScramCredential) -> None:
        self._scram[(user, credential.mechanism)] = credential

    def remove_scram(self, user: str, mechanism: str) -> bool:
        """Whether there was one."""
        return self._scram.pop((user, mechanism), None) is not None

    def scram(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._scram.get((user, mechanism))

    def scram_users(self) -> list[str]:
        """Every user with a SCRAM credential, sorted (DescribeUserScramCredentials of all users)."""
        return sorted({name for name, _ in self._scram})

    def scram_credentials(self, user: str) -> dict[str, ScramCredential]:
        """The user's SCRAM credentials by mechanism (DescribeUserScramCredentials)."""
        return {mechanism: cred for (name, mechanism), cred in self._scram.items() if name == user}

    def decoy_scram(self, user: str, mechanism: str) -> ScramCredential:
        """A made-up credential for a user without one: its salt is the same on every attempt (a salt that
        changed would tell the user apart), its keys are random, so no proof can ever match them."""
        _check_mechanism(mechanism)
        salt = hmac.new(self._secret, f"{mechanism}\0{user}".encode(), hashlib.sha256).digest()
        size = _HASHES[mechanism]().digest_size
        return ScramCredential(
            mechanism, salt, DEFAULT_ITERATIONS, secrets.token_bytes(size), secrets.token_bytes(size)
        )


class ServerMechanism(Protocol):
    """One SASL exchange, server side (protocol/connection.py's `SaslMechanism`)."""

    mechanism: str
    complete: bool
    principal: str  # "User:<name>"; empty until complete

    def evaluate(self, token: bytes) -> bytes: ...


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, store: CredentialStore) -> None:
        self._store = store
        self._done = False
        self.complete = False
        self.principal = ""

    def evaluate(self, token: bytes) -> bytes:
        if self._done:
            raise IllegalSaslState("SASL/PLAIN takes one token; the exchange is over")
        self._done = True  # one token, success or not
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        try:
            authzid, username, password = (part.decode("utf-8") for part in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not username:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        if authzid and authzid != username:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        expected = self._store.password(username)
        # Compared even for an unknown user (against the given password itself), so timing shows nothing.
        matches = hmac.compare_digest((password if expected is None else expected).encode(), password.encode())
        if expected is None or not matches:
            raise AuthenticationFailed(_PLAIN_FAILED, "unknown user" if expected is None else "wrong password")
        self.complete = True
        self.principal = f"User:{username}"
        return b""


class ScramServer:
    """client-first -> server-first, client-final -> server-final, scramp's ScramServer doing the checks."""

    def __init__(self, store: CredentialStore, mechanism: str) -> None:
        _check_mechanism(mechanism)
        self.mechanism = mechanism
        self._store = store
        scramp = _scramp()
        self._scram_error: type[Exception] = scramp.ScramException
        self._scramp = scramp.ScramMechanism(mechanism).make_server(self._lookup)
        self._stage = "client-first"  # then client-final, then done
        self._username = ""
        self._known = False
        self.complete = False
        self.principal = ""

    def _lookup(self, username: str) -> tuple[bytes, bytes, bytes, int]:
        # scramp's auth_fn, called from set_client_first with the unescaped, SASLprepped username. Returning
        # None would make scramp fail at once (an unknown user told apart); a decoy runs the exchange to its end.
        self._username = username
        credential = self._store.scram(username, self.mechanism)
        self._known = credential is not None
        if credential is None:
            credential = self._store.decoy_scram(username, self.mechanism)
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def evaluate(self, token: bytes) -> bytes:
        stage, self._stage = self._stage, "done"  # any failure ends the exchange
        if stage == "done":
            raise IllegalSaslState(f"SASL/{self.mechanism}: the exchange is over")
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise _scram_failed(self.mechanism, "a SCRAM message not in UTF-8") from None
        if stage == "client-first":
            answer = self._client_first(message)
            self._stage = "client-final"
            return answer
        return self._client_final(message)

    def _client_first(self, message: str) -> bytes:
        # client-first = gs2-header client-first-bare; the bare part is n=...,r=...[,extensions]. scramp lets
        # unknown one-letter attributes through, so extensions are looked for here, and all of them refused.
        # (Attributes out of that order are scramp's to refuse.)
        for attribute in message.split(",")[4:]:
            name, equals, _ = attribute.partition("=")
            if not (equals and name.isalnum()):
                continue  # not an extension, just malformed: scramp says so below
            if name == "tokenauth":
                raise AuthenticationFailed(
                    "Authentication failed: delegation tokens (SCRAM extension tokenauth) are not supported",
                    "tokenauth extension",
                )
            raise _scram_failed(self.mechanism, f"SCRAM extension {name!r} is not supported")
        try:
            self._scramp.set_client_first(message)
            return self._scramp.get_server_first().encode()
        except self._scram_error as exc:
            raise _scram_failed(self.mechanism, f"client-first: {exc}") from None

    def _client_final(self, message: str) -> bytes:
        try:
            self._scramp.set_client_final(message)
            answer = self._scramp.get_server_final()
        except self._scram_error as exc:
            reason = "unknown user" if not self._known else f"client-final: {exc}"
            raise _scram_failed(self.mechanism, reason) from None
        if not self._known:  # cannot happen (the decoy's keys are random), but never let a decoy in
            raise _scram_failed(self.mechanism, "unknown user")
        self.complete = True
        self.principal = f"User:{self._username}"
        return answer.encode()


def new_server(mechanism: str, store: CredentialStore) -> ServerMechanism:
    """A fresh exchange of `mechanism` (one per SaslHandshake)."""
    if mechanism == "PLAIN":
        return PlainServer(store)
    if mechanism in SCRAM_MECHANISMS:
        return ScramServer(store, mechanism)
    raise ValueError(f"unknown SASL mechanism {mechanism!r} (expected one of {', '.join(MECHANISMS)})")


# --- JAAS configuration strings -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JaasEntry:
    """One login module of a `sasl.jaas.config` string."""

    login_module: str
    control_flag: str  # required, requisite, sufficient or optional
    options: dict[str, str]


_CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}  # Java's StreamTokenizer; others stand for self
_WORD = re.compile(r"[A-Za-z0-9_.$-]+")


def _jaas_tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) with kind "word", "quoted" or the punctuation itself ("=", ";")."""
    tokens: list[tuple[str, str]] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char.isspace():
            i += 1
        elif char in "=;":
            tokens.append((char, char))
            i += 1
        elif char in "\"'":
            value, i = [], i + 1
            while i < len(text) and text[i] != char:
                if text[i] == "\\" and i + 1 < len(text):
                    i += 1
                    value.append(_ESCAPES.get(text[i], text[i]))
                else:
                    value.append(text[i])
                i += 1
            if i == len(text):
                raise ValueError("JAAS config has an unterminated quoted value")
            tokens.append(("quoted", "".join(value)))
            i += 1
        elif (word := _WORD.match(text, i)) is not None:
            tokens.append(("word", word.group()))
            i = word.end()
        else:
            raise ValueError(f"JAAS config has an unexpected character {char!r} at position {i}")
    return tokens


def parse_jaas(jaas: str) -> JaasEntry:
    """The one login module of a `sasl.jaas.config` string; ValueError (one line) if it is malformed."""
    tokens = _jaas_tokens(jaas)
    if not tokens:
        raise ValueError("JAAS config does not contain any login modules")
    kind, module = tokens[0]
    if kind != "word":
        raise ValueError("JAAS config must start with a login module class name")
    if len(tokens) < 2 or tokens[1][0] != "word":
        raise ValueError("Login module control flag not specified in JAAS config")
    flag = tokens[1][1].lower()
    if flag not in _CONTROL_FLAGS:
        raise ValueError(f"Invalid login module control flag {tokens[1][1]!r} in JAAS config")
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i][0] != ";":
        kind, key = tokens[i]
        if kind != "word":
            raise ValueError(f"JAAS config has a value {key!r} where an option name was expected")
        if i + 2 >= len(tokens) or tokens[i + 1][0] != "=" or tokens[i + 2][0] not in ("word", "quoted"):
            raise ValueError(f"Value not specified for key '{key}' in JAAS config")
        if key in options:
            raise ValueError(f"Option '{key}' given twice in JAAS config")
        options[key] = tokens[i + 2][1]
        i += 3
    if i == len(tokens):
        raise ValueError("JAAS config entry not terminated by semi-colon")
    if i + 1 < len(tokens):
        raise ValueError("JAAS config property contains more than one login module, should be 1 module")
    return JaasEntry(module, flag, options)


def parse_jaas_users(jaas: str) -> dict[str, str]:
    """The users PLAIN accepts: the `user_<name>="<password>"` options of a PlainLoginModule entry."""
    entry = parse_jaas(jaas)
    if entry.login_module != PLAIN_LOGIN_MODULE:
        raise ValueError(f"user_<name> options are read from {PLAIN_LOGIN_MODULE}, not {entry.login_module}")
    users = {key.removeprefix("user_"): value for key, value in entry.options.items() if key.startswith("user_")}
    if "" in users:
        raise ValueError("JAAS config has a user_ option without a user name")
    return users


def parse_jaas_login(jaas: str) -> tuple[str, str]:
    """(username, password) of a PlainLoginModule or ScramLoginModule entry: what this side logs in with."""
    entry = parse_jaas(jaas)
    if entry.login_module not in (PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE):
        raise ValueError(
            f"unsupported login module {entry.login_module} (expected {PLAIN_LOGIN_MODULE} or {SCRAM_LOGIN_MODULE})"
        )
    missing = [key for key in ("username", "password") if key not in entry.options]
    if missing:
        raise ValueError(f"JAAS config has no {' or '.join(missing)} option")
    return entry.options["username"], entry.options["password"]
