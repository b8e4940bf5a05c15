"""protocol/connection.py, with plain bytes and no event loop: the per-connection request rules."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pytest

from epoch_broker.protocol.connection import AuthState, NotAuthenticated, ProtocolViolation, ServerConnection
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.headers import encode_request_header
from epoch_broker.protocol.messages import api_versions, metadata, sasl_authenticate, sasl_handshake
from epoch_broker.protocol.schema import Api
from epoch_broker.protocol.versions import VersionRange


@dataclass
class Served:
    api: Api
    versions: VersionRange


CONNECTION = ServerConnection({3: Served(metadata.API, VersionRange(1, 9)),
                               18: Served(api_versions.API, VersionRange(0, 3))})


def request_frame(api: Api, version: int, body: object, correlation_id: int = 7) -> bytearray:
    header = encode_request_header(api.key, version, correlation_id, "c", api.request_header_version(version))
    return bytearray(header + api.request.encode(body, version))


def test_a_served_request_is_decoded_with_its_header() -> None:
    served, request = CONNECTION.receive_request(request_frame(metadata.API, 9, metadata.REQUEST.cls(topics=[])))
    assert served.api is metadata.API
    assert (request.api_version, request.correlation_id, request.client_id) == (9, 7, "c")
    assert request.body.topics == [] and request.response_version == 9


@pytest.mark.parametrize(("frame", "reason"), [
    (bytearray(b"\x00\x03\x00"), "shorter than the fixed part"),
    (bytearray(struct.pack(">hhi", 999, 0, 1)), "unknown API key 999"),
    (bytearray(struct.pack(">hhi", 3, 0, 1)), "Metadata v0 is not supported"),
    (bytearray(struct.pack(">hhi", 3, 9, 1)) + b"\xff", "malformed Metadata v9"),
])
def test_requests_that_allow_no_answer_close_the_connection(frame: bytearray, reason: str) -> None:
    with pytest.raises(ProtocolViolation, match=reason):
        CONNECTION.receive_request(frame)


def test_an_unsupported_api_versions_is_answered_in_v0() -> None:
    frame = bytearray(struct.pack(">hhi", 18, 99, 5)) + b"\x00\x00"  # KIP-511: a newer client's ApiVersions
    _, request = CONNECTION.receive_request(frame)
    assert request.unsupported and request.response_version == 0
    response = api_versions.RESPONSE.cls(error_code=35, api_keys=[], throttle_time_ms=0)
    parts = CONNECTION.encode_response(request, response)
    encoded = b"".join(parts)
    assert struct.unpack_from(">ii", encoded) == (len(encoded) - 4, 5)


# -- the SASL gate ---------------------------------------------------------------------------------------------

class OneStep:
    """A mechanism that accepts the token b"ok" in one step as User:alice, and fails on anything else."""

    def __init__(self) -> None:
        self.complete = False
        self.principal = ""

    def evaluate(self, token: bytes) -> bytes:
        if token != b"ok":
            raise ValueError("bad token")
        self.complete, self.principal = True, "User:alice"
        return b"welcome"


def sasl_connection() -> ServerConnection:
    return ServerConnection({3: Served(metadata.API, VersionRange(1, 9)),
                             17: Served(sasl_handshake.API, VersionRange(0, 1)),
                             18: Served(api_versions.API, VersionRange(0, 3)),
                             36: Served(sasl_authenticate.API, VersionRange(0, 2))}, sasl={"PLAIN": OneStep})


def test_before_authentication_only_api_versions_and_the_handshake_are_taken() -> None:
    connection = sasl_connection()
    _, request = connection.receive_request(request_frame(api_versions.API, 3, api_versions.REQUEST.cls()))
    assert request.api is api_versions.API and connection.auth_state is AuthState.HANDSHAKE
    with pytest.raises(NotAuthenticated, match="Metadata before SASL authentication completed"):
        connection.receive_request(request_frame(metadata.API, 9, metadata.REQUEST.cls(topics=[])))
    assert connection.close_after_response and connection.auth_state is AuthState.FAILED


def test_an_unknown_mechanism_is_refused_and_ends_the_connection() -> None:
    connection = sasl_connection()
    assert connection.handshake("GSSAPI", 1) is ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert connection.mechanisms == ["PLAIN"] and connection.close_after_response


def test_after_a_v1_handshake_only_sasl_authenticate_is_taken_and_success_sets_the_principal() -> None:
    connection = sasl_connection()
    assert connection.handshake("PLAIN", 1) is ErrorCode.NONE
    with pytest.raises(NotAuthenticated):
        sasl_connection_after_handshake().receive_request(request_frame(api_versions.API, 3,
                                                                        api_versions.REQUEST.cls()))
    _, request = connection.receive_request(request_frame(sasl_authenticate.API, 2,
                                                          sasl_authenticate.REQUEST.cls(auth_bytes=b"ok")))
    assert connection.authenticate(request.body.auth_bytes) == b"welcome"
    assert connection.auth_state is AuthState.AUTHENTICATED and connection.principal == "User:alice"
    _, request = connection.receive_request(request_frame(metadata.API, 9, metadata.REQUEST.cls(topics=[])))
    assert request.api is metadata.API


def sasl_connection_after_handshake() -> ServerConnection:
    connection = sasl_connection()
    connection.handshake("PLAIN", 1)
    return connection


def test_after_a_v0_handshake_tokens_are_raw_frames_and_answered_raw() -> None:
    connection = sasl_connection()
    assert connection.handshake("PLAIN", 0) is ErrorCode.NONE
    _, request = connection.receive_request(bytearray(b"ok"))  # no header: the frame is the token
    assert request.raw_token and request.body.auth_bytes == b"ok"
    answer = connection.authenticate(request.body.auth_bytes)
    parts = connection.encode_response(request, sasl_authenticate.RESPONSE.cls(auth_bytes=answer))
    assert b"".join(parts) == struct.pack(">i", 7) + b"welcome"
    assert not connection.raw_tokens  # authenticated: framed requests again
    _, request = connection.receive_request(request_frame(metadata.API, 9, metadata.REQUEST.cls(topics=[])))
    assert request.api is metadata.API


def test_a_listener_without_sasl_starts_authenticated_and_refuses_a_handshake() -> None:
    connection = ServerConnection({3: Served(metadata.API, VersionRange(1, 9))}, principal="User:CN=writer")
    assert connection.auth_state is AuthState.AUTHENTICATED and connection.principal == "User:CN=writer"
    assert connection.handshake("PLAIN", 1) is ErrorCode.ILLEGAL_SASL_STATE
