"""Malformed bodies for every declared (API, version): decoding either succeeds or raises DecodeError.

Never another exception, never a hang. Seeds are the valid encodings of test_roundtrip's samples; every
prefix of each seed is tried (truncation), then hypothesis flips bits, overwrites and deletes bytes in
the seeds, and feeds purely random bodies. A hypothesis deadline catches slow paths (a decode loop that
trusted a huge length would blow it); the whole file runs in well under a minute.
"""

from __future__ import annotations

import contextlib
import itertools
import struct
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epoch_broker.protocol.messages import APIS, fetch, metadata, produce
from epoch_broker.protocol.schema import DecodeError, Message
from tests.protocol.test_roundtrip import sample

SEEDS: list[tuple[Message, int, bytes]] = []
for _key, _api in sorted(APIS.items()):
    for _message in (_api.request, _api.response):
        for _version in range(_message.versions.low, _message.versions.high + 1):
            _obj = sample(_message, _message.fields, _message.cls, _version, "values", itertools.count(1))
            SEEDS.append((_message, _version, _message.encode(_obj, _version)))
MUTABLE = [seed for seed in SEEDS if seed[2]]  # v0 ApiVersions and ListGroups requests have empty bodies

FUZZ = settings(
    max_examples=3000,
    deadline=timedelta(milliseconds=200),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,  # same examples on every run: CI failures reproduce locally
)


def decode_or_decode_error(message: Message, version: int, body: bytes) -> None:
    with contextlib.suppress(DecodeError):
        message.decode(body, version)


@pytest.mark.parametrize(("message", "version", "body"), SEEDS, ids=[f"{m.name}-v{v}" for m, v, _ in SEEDS])
def test_every_truncation_raises_decode_error(message: Message, version: int, body: bytes) -> None:
    for end in range(len(body)):
        try:
            message.decode(body[:end], version)
        except DecodeError:
            continue
        # A prefix can only decode if the rest of the body was trailing optional bytes, which no seed has.
        pytest.fail(f"{message.name} v{version}: a {end}-byte prefix of {len(body)} bytes decoded")


@FUZZ
@given(seed=st.sampled_from(MUTABLE), flips=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 7)),
                                                  min_size=1, max_size=4))
def test_bit_flips_decode_or_raise_decode_error(seed: tuple[Message, int, bytes], flips: list[tuple[int, int]]) -> None:
    message, version, body = seed
    data = bytearray(body)
    for position, bit in flips:
        data[position % len(data)] ^= 1 << bit
    decode_or_decode_error(message, version, bytes(data))


@FUZZ
@given(seed=st.sampled_from(MUTABLE), data=st.data())
def test_overwritten_and_deleted_bytes_decode_or_raise_decode_error(
    seed: tuple[Message, int, bytes], data: st.DataObject
) -> None:
    message, version, body = seed
    start = data.draw(st.integers(0, len(body) - 1))
    stop = data.draw(st.integers(start, len(body)))
    patch = data.draw(st.binary(max_size=8))  # often 0xff.. or 0x7f..: huge lengths and counts
    decode_or_decode_error(message, version, body[:start] + patch + body[stop:])


@FUZZ
@given(api_key=st.sampled_from(sorted(APIS)), kind=st.sampled_from(["request", "response"]),
       data=st.data(), body=st.binary(max_size=512))
def test_random_bodies_decode_or_raise_decode_error(api_key: int, kind: str, data: st.DataObject,
                                                    body: bytes) -> None:
    api = APIS[api_key]
    message = api.request if kind == "request" else api.response
    version = data.draw(st.integers(message.versions.low, message.versions.high))
    decode_or_decode_error(message, version, body)


@pytest.mark.parametrize(
    ("message", "version", "body"),
    [
        # Metadata v1 request: topics array claiming 2**31-1 elements in a 4-byte body.
        pytest.param(metadata.REQUEST, 1, struct.pack(">i", 0x7FFFFFFF), id="classic-array-count"),
        # Metadata v9 request: compact count as a 5-byte varint of 2**32-1.
        pytest.param(metadata.REQUEST, 9, b"\xff\xff\xff\xff\x0f", id="compact-array-count"),
        # Produce v3 request: records claiming 2 GiB.
        pytest.param(produce.REQUEST, 3, struct.pack(">hhi", -1, 1, 1000) + struct.pack(">i", 1)
                     + struct.pack(">h", 1) + b"t" + struct.pack(">i", 1) + struct.pack(">ii", 0, 0x7FFFFFFF),
                     id="records-length"),
        # Fetch v12 request: a tag section claiming 2**28 tagged fields.
        pytest.param(fetch.REQUEST, 12, bytes(20) + b"\x01\x01\x01" + b"\xff\xff\xff\x7f", id="tag-count"),
        # A varint that never ends.
        pytest.param(metadata.REQUEST, 9, b"\xff" * 64, id="endless-varint"),
    ],
)
def test_absurd_lengths_are_rejected_without_allocating(message: Message, version: int, body: bytes) -> None:
    with pytest.raises(DecodeError):
        message.decode(body, version)
