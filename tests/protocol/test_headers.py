"""Request/response headers and the per-API header version rules."""

from epoch_broker.protocol.headers import (
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
    peek_request,
)
from epoch_broker.protocol.messages import APIS


def test_flexible_request_header_keeps_client_id_as_a_classic_string() -> None:
    wire = encode_request_header(18, 3, 7, "me", 2)
    assert wire == b"\x00\x12\x00\x03\x00\x00\x00\x07\x00\x02me\x00"
    header, body_start = decode_request_header(wire, 2)
    assert (header.request_api_key, header.request_api_version, header.correlation_id, header.client_id) == (
        18, 3, 7, "me")
    assert body_start == len(wire)
    assert peek_request(wire) == (18, 3, 7)


def test_null_client_id_round_trips() -> None:
    header, _ = decode_request_header(encode_request_header(3, 1, 1, None, 1), 1)
    assert header.client_id is None


def test_api_versions_responses_always_use_header_v0() -> None:
    api_versions = APIS[18]
    assert [api_versions.response_header_version(v) for v in range(5)] == [0, 0, 0, 0, 0]
    assert api_versions.request_header_version(3) == 2
    assert api_versions.request_header_version(2) == 1


def test_flexible_versions_use_the_flexible_headers() -> None:
    fetch = APIS[1]
    assert fetch.request_header_version(11) == 1 and fetch.response_header_version(11) == 0
    assert fetch.request_header_version(12) == 2 and fetch.response_header_version(12) == 1


def test_response_header_v1_carries_an_empty_tag_section() -> None:
    assert encode_response_header(5, 0) == b"\x00\x00\x00\x05"
    assert encode_response_header(5, 1) == b"\x00\x00\x00\x05\x00"
    header, end = decode_response_header(encode_response_header(5, 1), 1)
    assert header.correlation_id == 5 and end == 5
