"""Request header v0-2 and response header v0-1, and the rule for which version a message uses.

Request header v2 (flexible requests) adds a tagged section; `client_id` stays a classic nullable string in
every version so that any broker can read the header of any ApiVersions request. ApiVersions responses
always use response header v0 (see `schema.Api.response_header_version`).
"""

from __future__ import annotations

import struct
from typing import Any

from epoch_broker.protocol.primitives import I32
from epoch_broker.protocol.schema import DecodeError, Field, Message

REQUEST_HEADER = Message(
    "RequestHeader",
    kind="header",
    versions="0-2",
    flexible="2+",
    fields=[
        Field("request_api_key", "int16", "0+"),
        Field("request_api_version", "int16", "0+"),
        Field("correlation_id", "int32", "0+"),
        Field("client_id", "string", "1+", nullable="1+", flexible="none"),
    ],
)

RESPONSE_HEADER = Message(
    "ResponseHeader",
    kind="header",
    versions="0-1",
    flexible="1+",
    fields=[Field("correlation_id", "int32", "0+")],
)

RequestHeader: Any = REQUEST_HEADER.cls
ResponseHeader: Any = RESPONSE_HEADER.cls

_PEEK = struct.Struct(">hhi")


def peek_request(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) from the first 8 bytes, before the header version is known."""
    if len(frame) < _PEEK.size:
        raise DecodeError("request shorter than the fixed part of its header")
    return _PEEK.unpack_from(frame, 0)


def decode_request_header(frame: bytes | bytearray | memoryview, header_version: int) -> tuple[Any, int]:
    """The request header and the position where the body starts."""
    return REQUEST_HEADER.decode_from(frame, header_version)



def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    """Hot path: the response header is 4 bytes (v0) or 4 bytes plus an empty tag section (v1)."""
    return I32.pack(correlation_id) if header_version == 0 else I32.pack(correlation_id) + b"\x00"


def encode_request_header(api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                          header_version: int) -> bytes:
    header = RequestHeader(request_api_key=api_key, request_api_version=api_version,
                           correlation_id=correlation_id, client_id=client_id)
    return REQUEST_HEADER.encode(header, header_version)


def decode_response_header(frame: bytes | bytearray | memoryview, header_version: int) -> tuple[Any, int]:
    return RESPONSE_HEADER.decode_from(frame, header_version)


__all__ = [
    "REQUEST_HEADER",
    "RESPONSE_HEADER",
    "RequestHeader",
    "ResponseHeader",
    "decode_request_header",
    "decode_response_header",
    "encode_request_header",
    "encode_response_header",
    "peek_request",
]
