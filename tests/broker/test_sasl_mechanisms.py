"""broker/security/sasl.py and client/sasl.py: the SASL exchanges as plain bytes, our server against our client and
against kafka-python's independent client, the credentials they check, and the JAAS strings that name them."""

from __future__ import annotations

import base64
import hashlib
import random
from collections.abc import Callable

import pytest
from kafka.admin import UserScramCredentialUpsertion
from kafka.net.sasl.plain import SaslMechanismPlain
from kafka.net.sasl.scram import SaslMechanismScram

from epoch_broker.broker.security.sasl import (
    MECHANISMS,
    SCRAM_MECHANISMS,
    AuthenticationFailed,
    CredentialStore,
    IllegalSaslState,
    PlainServer,
    ScramCredential,
    ScramServer,
    ServerMechanism,
    new_server,
    parse_jaas,
    parse_jaas_login,
    parse_jaas_users,
)
from epoch_broker.client.sasl import ClientMechanism, SaslError, ScramClient, new_client

PLAIN_FAILED = "Authentication failed: Invalid username or password"
SALT = b"0123456789abcdef"


def scram_failed(mechanism: str) -> str:
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"


@pytest.fixture(scope="module")
def store() -> CredentialStore:
    store = CredentialStore({"alice": "alice-secret"})
    for mechanism in SCRAM_MECHANISMS:
        store.set_scram("alice", ScramCredential.from_password(mechanism, "alice-secret"))
        store.set_scram("a,b=c", ScramCredential.from_password(mechanism, "odd-secret"))
    return store


def exchange(server: ServerMechanism, client: ClientMechanism) -> list[bytes]:
    """Run the exchange to its end; the tokens the server sent."""
    sent = []
    token: bytes | None = client.initial()
    while token is not None:
        sent.append(server.evaluate(token))
        token = client.evaluate(sent[-1])
    assert server.complete and client.complete
    return sent


def failure(server: ServerMechanism, client: ClientMechanism) -> tuple[int, AuthenticationFailed]:
    """Run the exchange until the server refuses; (the step it refused at, what it raised)."""
    token: bytes | None = client.initial()
    for step in range(1, 10):
        assert token is not None
        try:
            challenge = server.evaluate(token)
        except AuthenticationFailed as exc:
            assert not server.complete and server.principal == ""
            return step, exc
        token = client.evaluate(challenge)
    raise AssertionError("the server never refused")


def attributes(message: bytes) -> dict[str, str]:
    return dict(part.split("=", 1) for part in message.decode().split(","))


# --- PLAIN ----------------------------------------------------------------------------------------------------

def test_plain_logs_in_a_known_user_with_its_password(store: CredentialStore) -> None:
    server = new_server("PLAIN", store)
    assert exchange(server, new_client("PLAIN", "alice", "alice-secret")) == [b""]
    assert server.principal == "User:alice"


def test_plain_tells_a_wrong_password_and_an_unknown_user_the_same_thing(store: CredentialStore) -> None:
    step_wrong, wrong = failure(PlainServer(store), new_client("PLAIN", "alice", "nope"))
    step_unknown, unknown = failure(PlainServer(store), new_client("PLAIN", "mallory", "alice-secret"))
    assert (step_wrong, str(wrong)) == (step_unknown, str(unknown)) == (1, PLAIN_FAILED)
    assert (wrong.reason, unknown.reason) == ("wrong password", "unknown user")  # for the broker's log only


@pytest.mark.parametrize(("token", "message"), [
    (b"alice\0alice\0alice-secret", None),  # kafka-python sends the authcid as authzid: allowed
    (b"bob\0alice\0alice-secret", "Authentication failed: Client requested an authorization id that is different "
                                  "from username"),
    (b"\0\0alice-secret", "Authentication failed: username not specified"),
    (b"\0alice\0", "Authentication failed: password not specified"),
    (b"", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"\0alice", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"\0alice\0alice-secret\0", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"\0al\xffice\0alice-secret", "Invalid SASL/PLAIN response: not UTF-8"),
])
def test_plain_checks_the_authzid_and_the_shape_of_its_token(store: CredentialStore, token: bytes,
                                                              message: str | None) -> None:
    server = PlainServer(store)
    if message is None:
        assert server.evaluate(token) == b"" and server.principal == "User:alice"
    else:
        with pytest.raises(AuthenticationFailed) as caught:
            server.evaluate(token)
        assert str(caught.value) == message and not server.complete


# --- SCRAM ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mechanism", SCRAM_MECHANISMS)
def test_scram_logs_in_a_known_user_and_the_client_verifies_the_server(store: CredentialStore,
                                                                      mechanism: str) -> None:
    server = new_server(mechanism, store)
    client = new_client(mechanism, "alice", "alice-secret")
    server_first, server_final = exchange(server, client)
    assert attributes(server_first)["i"] == "4096" and server_final.startswith(b"v=")
    assert server.principal == "User:alice"


def test_a_credential_with_a_short_salt_logs_in_as_kafka_takes_any_salt() -> None:
    store = CredentialStore()
    store.set_scram("salty", ScramCredential.from_password("SCRAM-SHA-256", "pw", salt=b"salt"))
    server = new_server("SCRAM-SHA-256", store)
    exchange(server, new_client("SCRAM-SHA-256", "salty", "pw"))
    assert server.principal == "User:salty"


def test_scram_unescapes_a_username_with_commas_and_equals_signs(store: CredentialStore) -> None:
    server = new_server("SCRAM-SHA-256", store)
    exchange(server, new_client("SCRAM-SHA-256", "a,b=c", "odd-secret"))
    assert server.principal == "User:a,b=c"


@pytest.mark.parametrize("mechanism", SCRAM_MECHANISMS)
def test_scram_fails_an_unknown_user_where_and_as_it_fails_a_wrong_password(store: CredentialStore,
                                                                            mechanism: str) -> None:
    step_wrong, wrong = failure(ScramServer(store, mechanism), ScramClient(mechanism, "alice", "nope"))
    step_unknown, unknown = failure(ScramServer(store, mechanism), ScramClient(mechanism, "mallory", "nope"))
    assert (step_wrong, str(wrong)) == (step_unknown, str(unknown)) == (2, scram_failed(mechanism))
    assert unknown.reason == "unknown user"


@pytest.mark.parametrize("mechanism", SCRAM_MECHANISMS)
def test_an_unknown_users_server_first_looks_like_a_real_one_and_its_salt_never_changes(
        store: CredentialStore, mechanism: str) -> None:
    def server_first(user: str) -> dict[str, str]:
        return attributes(ScramServer(store, mechanism).evaluate(ScramClient(mechanism, user, "x").initial()))

    real, decoy, again = server_first("alice"), server_first("mallory"), server_first("mallory")
    assert decoy.keys() == real.keys() and decoy["i"] == real["i"]
    assert len(base64.b64decode(decoy["s"])) == len(base64.b64decode(real["s"]))
    assert decoy["s"] == again["s"] != server_first("trudy")["s"]
    assert decoy["r"] != again["r"]  # the nonce is fresh every time


def test_a_credential_of_the_other_scram_mechanism_does_not_log_in(store: CredentialStore) -> None:
    only_256 = CredentialStore()
    only_256.set_scram("bob", ScramCredential.from_password("SCRAM-SHA-256", "pw"))
    step, exc = failure(ScramServer(only_256, "SCRAM-SHA-512"), ScramClient("SCRAM-SHA-512", "bob", "pw"))
    assert (step, exc.reason) == (2, "unknown user")


@pytest.mark.parametrize("extension", ["tokenauth=true", "x=y"])
def test_scram_refuses_extensions_in_the_client_first_such_as_delegation_tokens(store: CredentialStore,
                                                                                extension: str) -> None:
    server = ScramServer(store, "SCRAM-SHA-256")
    with pytest.raises(AuthenticationFailed) as caught:
        server.evaluate(f"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL,{extension}".encode())
    assert ("delegation tokens" in str(caught.value)) == extension.startswith("tokenauth")
    with pytest.raises(IllegalSaslState):  # and the exchange is over
        server.evaluate(b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL,p=AAAA")


@pytest.mark.parametrize("client_first", [
    b"n,a=alice,n=alice,r=abcdefgh",  # an authzid: scramp takes none
    b"p=tls-unique,,n=alice,r=abcdefgh",  # channel binding: not offered
    b"n,,r=abcdefgh,n=alice",  # attributes out of order
    b"n,,n=,r=abcdefgh",
    b"n,,n=al=5Dice,r=abcdefgh",  # a bad escape
])
def test_scram_refuses_what_it_does_not_support_in_the_client_first(store: CredentialStore,
                                                                   client_first: bytes) -> None:
    with pytest.raises(AuthenticationFailed, match="invalid credentials"):
        ScramServer(store, "SCRAM-SHA-512").evaluate(client_first)


def test_a_mechanism_takes_no_token_after_success_or_failure(store: CredentialStore) -> None:
    for mechanism in MECHANISMS:
        done = new_server(mechanism, store)
        exchange(done, new_client(mechanism, "alice", "alice-secret"))
        failed = new_server(mechanism, store)
        failure(failed, new_client(mechanism, "alice", "wrong"))
        for server in (done, failed):
            with pytest.raises(IllegalSaslState):
                server.evaluate(b"\0alice\0alice-secret")


# --- malformed tokens: only AuthenticationFailed, whatever the bytes ------------------------------------------

def _garbage(rng: random.Random, valid: bytes) -> bytes:
    """Random bytes, or the valid token cut, bit-flipped or spliced with random bytes."""
    choice = rng.randrange(4)
    if choice == 0:
        return rng.randbytes(rng.randrange(64))
    cut = rng.randrange(len(valid))  # never the whole token: that would be valid
    if choice == 1:
        return valid[:cut]
    if choice == 2:
        flipped = bytearray(valid)
        flipped[rng.randrange(len(valid))] ^= 1 << rng.randrange(8)
        return bytes(flipped)
    return valid[:cut] + rng.choice([b",", b"=", b"\0", b"\xff", b",e=x", b",p=", rng.randbytes(4)]) + valid[cut:]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_malformed_tokens_at_every_step_raise_authentication_failed_and_nothing_else(
        store: CredentialStore, mechanism: str) -> None:
    rng = random.Random(f"sasl-fuzz-{mechanism}")
    client = new_client(mechanism, "alice", "alice-secret")
    first = client.initial()
    finals = [client.evaluate(new_server(mechanism, store).evaluate(first))] if mechanism != "PLAIN" else []
    for _ in range(150):
        server = new_server(mechanism, store)
        with pytest.raises(AuthenticationFailed):
            server.evaluate(_garbage(rng, first))
            # A mutation can stay valid (a flipped nonce bit); then garbage as the client-final must fail.
            server.evaluate(_garbage(rng, finals[0]) if finals and finals[0] else rng.randbytes(16))
        assert not server.complete


def test_our_scram_client_raises_sasl_error_for_any_malformed_server_token(store: CredentialStore) -> None:
    rng = random.Random("sasl-client-fuzz")
    server = ScramServer(store, "SCRAM-SHA-256")
    good = ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
    server_first = server.evaluate(good.initial())
    server_final = server.evaluate(good.evaluate(server_first) or b"")
    for _ in range(150):
        client = ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
        client.initial()
        with pytest.raises(SaslError):
            client.evaluate(_garbage(rng, server_first))
            client.evaluate(_garbage(rng, server_final))  # a different nonce: the signature cannot match
        assert not client.complete


# --- our client's checks of the server ------------------------------------------------------------------------

def _to_server_final(store: CredentialStore, client: ScramClient) -> bytes:
    server = ScramServer(store, client.mechanism)
    final = server.evaluate(client.evaluate(server.evaluate(client.initial())) or b"")
    assert server.complete
    return final


@pytest.mark.parametrize(("tamper", "message"), [
    (lambda final: b"v=" + base64.b64encode(bytes(len(base64.b64decode(final[2:])))), "signature does not match"),
    (lambda final: b"e=invalid-proof", "refused the exchange: invalid-proof"),
    (lambda final: final + b",x", "bad server server-final"),
])
def test_our_scram_client_refuses_a_server_final_it_cannot_verify(store: CredentialStore,
                                                                  tamper: Callable[[bytes], bytes],
                                                                  message: str) -> None:
    client = ScramClient("SCRAM-SHA-512", "alice", "alice-secret")
    final = _to_server_final(store, client)
    with pytest.raises(SaslError, match=message):
        client.evaluate(tamper(final))
    assert not client.complete


def test_our_scram_client_refuses_a_server_first_that_does_not_extend_its_nonce(store: CredentialStore) -> None:
    client = ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
    client.initial()
    with pytest.raises(SaslError, match="nonce"):
        client.evaluate(b"r=someoneelses,s=" + base64.b64encode(SALT) + b",i=4096")


def test_clients_refuse_calls_out_of_order() -> None:
    for mechanism in MECHANISMS:
        client = new_client(mechanism, "alice", "alice-secret")
        with pytest.raises(SaslError):
            client.evaluate(b"")
        with pytest.raises(ValueError):
            new_client("GSSAPI", "alice", "alice-secret")


# --- kafka-python's client against our server -----------------------------------------------------------------

def kafka_python(mechanism: str, username: str, password: str) -> SaslMechanismPlain | SaslMechanismScram:
    config = {"sasl_mechanism": mechanism, "sasl_plain_username": username, "sasl_plain_password": password}
    return SaslMechanismPlain(**config) if mechanism == "PLAIN" else SaslMechanismScram(**config)


def drive(server: ServerMechanism, client: SaslMechanismPlain | SaslMechanismScram) -> None:
    while not client.is_done():
        client.receive(server.evaluate(client.auth_bytes()))
    assert client.is_authenticated()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_pythons_client_logs_in_to_our_server(store: CredentialStore, mechanism: str) -> None:
    server = new_server(mechanism, store)
    drive(server, kafka_python(mechanism, "alice", "alice-secret"))  # kafka-python checks our signature too
    assert server.complete and server.principal == "User:alice"


@pytest.mark.parametrize("mechanism", SCRAM_MECHANISMS)
def test_kafka_pythons_client_with_a_wrong_password_is_refused_like_ours(store: CredentialStore,
                                                                         mechanism: str) -> None:
    with pytest.raises(AuthenticationFailed, match="invalid credentials"):
        drive(new_server(mechanism, store), kafka_python(mechanism, "alice", "nope"))


@pytest.mark.parametrize("mechanism", SCRAM_MECHANISMS)
def test_a_credential_set_by_kafka_pythons_admin_client_logs_in_its_user(mechanism: str) -> None:
    """KIP-554: the admin client salts the password itself; the broker only sees salt and salted password."""
    upsertion = UserScramCredentialUpsertion("carol", mechanism, "carol-secret", iterations=8192)
    store = CredentialStore()
    store.set_scram("carol", ScramCredential.from_salted_password(
        mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations))
    drive(new_server(mechanism, store), kafka_python(mechanism, "carol", "carol-secret"))
    exchange(new_server(mechanism, store), new_client(mechanism, "carol", "carol-secret"))


# --- credentials ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mechanism", SCRAM_MECHANISMS)
def test_a_credential_from_the_salted_password_equals_the_one_from_the_password(mechanism: str) -> None:
    salted = hashlib.pbkdf2_hmac(mechanism.removeprefix("SCRAM-").replace("-", "").lower(), b"pw", SALT, 4096)
    assert (ScramCredential.from_salted_password(mechanism, SALT, salted, 4096)
            == ScramCredential.from_password(mechanism, "pw", salt=SALT))


@pytest.mark.parametrize("make", [
    lambda iterations: ScramCredential.from_password("SCRAM-SHA-512", "pw", iterations),
    lambda iterations: ScramCredential.from_salted_password("SCRAM-SHA-512", SALT, b"x" * 64, iterations),
])
@pytest.mark.parametrize(("iterations", "allowed"), [(4095, False), (4096, True), (16384, True), (16385, False),
                                                     (0, False), (True, False)])
def test_iterations_must_be_within_kafkas_bounds(make: Callable[[int], ScramCredential], iterations: int,
                                                 allowed: bool) -> None:
    if allowed:
        assert make(iterations).iterations == iterations
    else:
        with pytest.raises(ValueError) as caught:
            make(iterations)
        assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: ScramCredential.from_password("SCRAM-SHA-1", "pw"), "unknown SCRAM mechanism"),
    (lambda: ScramCredential.from_password("SCRAM-SHA-256", "pw", salt=b""), "salt must not be empty"),
    (lambda: ScramCredential.from_salted_password("SCRAM-SHA-256", b"", b"x", 4096), "salt must not be empty"),
    (lambda: ScramCredential.from_salted_password("SCRAM-SHA-256", SALT, b"", 4096), "must not be empty"),
    (lambda: ScramCredential.from_password("SCRAM-SHA-256", "p\x07w"), "unusable password"),
    (lambda: ScramCredential("SCRAM-SHA-256", SALT, 4096, b"k" * 64, b"k" * 64), "must be 32 bytes"),
    (lambda: new_server("GSSAPI", CredentialStore()), "unknown SASL mechanism"),
])
def test_unusable_credentials_and_mechanisms_raise_value_error(make: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_the_store_sets_gets_and_removes_credentials_and_never_prints_keys() -> None:
    store = CredentialStore()
    credential = ScramCredential.from_password("SCRAM-SHA-256", "pw", salt=SALT)
    store.set_password("alice", "pw")
    store.set_scram("alice", credential)
    assert (store.password("alice"), store.scram("alice", "SCRAM-SHA-256")) == ("pw", credential)
    assert store.scram_credentials("alice") == {"SCRAM-SHA-256": credential} and store.scram_credentials("x") == {}
    assert store.remove_password("alice") and not store.remove_password("alice") and store.password("alice") is None
    assert store.remove_scram("alice", "SCRAM-SHA-256") and store.scram("alice", "SCRAM-SHA-256") is None
    assert repr(credential) == "ScramCredential(SCRAM-SHA-256, iterations=4096)"


# --- JAAS -----------------------------------------------------------------------------------------------------

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


@pytest.mark.parametrize(("jaas", "users"), [
    (f'{PLAIN} required username="admin" password="admin-secret" user_admin="admin-secret" '
     'user_alice="alice-secret";', {"admin": "admin-secret", "alice": "alice-secret"}),
    (f'\n  {PLAIN}  REQUIRED\n\tuser_bob = "b ob;=pw" ;\n', {"bob": "b ob;=pw"}),
    (f"""{PLAIN} required user_carol='it\\'s' user_dave="say \\"hi\\"\\\\";""", {"carol": "it's",
                                                                                "dave": 'say "hi"\\'}),
    (f"{PLAIN} required user_eve=secret;", {"eve": "secret"}),
    (f'{PLAIN} required user_svc-1.app="x";', {"svc-1.app": "x"}),
    (f'{PLAIN} optional username="a" password="b";', {}),
])
def test_jaas_user_options_are_the_users_plain_accepts(jaas: str, users: dict[str, str]) -> None:
    assert parse_jaas_users(jaas) == users


@pytest.mark.parametrize(("jaas", "message"), [
    ("", "does not contain any login modules"),
    ("   \n", "does not contain any login modules"),
    (f'{PLAIN} required user_a="x"', "not terminated by semi-colon"),
    (f"{PLAIN};", "control flag not specified"),
    (f'{PLAIN} mandatory user_a="x";', "Invalid login module control flag"),
    (f"{PLAIN} required user_a=;", "Value not specified for key 'user_a'"),
    (f'{PLAIN} required user_a "x";', "Value not specified for key 'user_a'"),
    (f'{PLAIN} required "x";', "where an option name was expected"),
    (f'{PLAIN} required user_a="x;', "unterminated quoted value"),
    (f'{PLAIN} required user_a="x"; {PLAIN} required;', "more than one login module"),
    (f'{PLAIN} required user_a="x" user_a="y";', "given twice"),
    (f'{PLAIN} required user_="x";', "without a user name"),
    (f'{PLAIN} required {{user_a="x"}};', "unexpected character"),
    (f'{SCRAM} required user_a="x";', "user_<name> options are read from"),
    ('"quoted" required;', "must start with a login module"),
])
def test_malformed_jaas_raises_value_error_with_one_line(jaas: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        parse_jaas_users(jaas)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("jaas", "login"), [
    (f'{PLAIN} required username="admin" password="admin-secret" user_admin="admin-secret";',
     ("admin", "admin-secret")),
    (f"{SCRAM} required username='alice' password='alice secret';", ("alice", "alice secret")),
])
def test_jaas_username_and_password_are_the_login(jaas: str, login: tuple[str, str]) -> None:
    assert parse_jaas_login(jaas) == login


@pytest.mark.parametrize(("jaas", "message"), [
    (f'{SCRAM} required username="alice";', "no password option"),
    (f"{PLAIN} required;", "no username or password option"),
    ('com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;', "unsupported login module"),
])
def test_a_jaas_login_needs_a_supported_module_a_username_and_a_password(jaas: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_jaas_login(jaas)


def test_jaas_keeps_the_module_and_its_control_flag() -> None:
    entry = parse_jaas(f'{SCRAM} Sufficient username="a" password="b";')
    assert (entry.login_module, entry.control_flag, entry.options) == (SCRAM, "sufficient",
                                                                       {"username": "a", "password": "b"})
