"""protocol/connection.py, with plain bytes and no event loop: the per-connection request rules."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pytest
from epoch_broker.protocol.connection import ProtocolViolation, ServerConnection
from epoch_broker.protocol.headers import encode_request_header
from epoch_broker.protocol.messages import api_versions, metadata
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
