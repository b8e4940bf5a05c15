"""protocol/record_scan.py runs compiled (Cython, setup.py) where the install could compile it and as plain Python
elsewhere: the two must agree on every body, valid or not, value for value and error for error."""

from __future__ import annotations

import shutil
import struct
import sysconfig
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epoch_broker.protocol import record_scan
from epoch_broker.protocol.errors import CorruptRecordError, InvalidRecordError
from epoch_broker.protocol.records import Compression, batch_body, build_batch, parse_header
from tests.protocol.builds import is_compiled, pure_python

PURE = pure_python(record_scan)
COMPILED = is_compiled(record_scan)


def test_the_install_compiled_the_scanner_where_a_c_compiler_and_the_python_headers_exist() -> None:
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    assert (shutil.which(compiler) is not None and headers.is_file()) == COMPILED, record_scan.__file__


def outcome(module: ModuleType, body: bytes, header: object) -> tuple:
    try:
        return ("ok", tuple(module.scan_records(body, header)))
    except (CorruptRecordError, InvalidRecordError) as exc:
        return (type(exc).__name__,)


records = st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=300)), st.binary(max_size=9000),
                             st.lists(st.tuples(st.text(max_size=5), st.binary(max_size=20)), max_size=3),
                             st.one_of(st.none(), st.integers(0, 2**40))),
                   min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(values=records, data=st.data())
def test_compiled_and_pure_python_agree_on_valid_and_mutated_bodies(values: list, data: st.DataObject) -> None:
    batch = bytearray(build_batch(values, compression=Compression.NONE))
    header = parse_header(batch, 0)
    body = bytearray(batch_body(batch, 0, header))
    assert outcome(record_scan, bytes(body), header)[0] == "ok"
    for _ in range(3):
        mutated = bytearray(body)
        if data.draw(st.booleans()):
            mutated = mutated[:data.draw(st.integers(0, len(mutated)))]
        else:
            mutated[data.draw(st.integers(0, len(mutated) - 1))] = data.draw(st.integers(0, 255))
        assert outcome(record_scan, bytes(mutated), header) == outcome(PURE, bytes(mutated), header)


@pytest.mark.parametrize("records_count", [1, 64, 8192, 9000])
def test_long_varints_and_past_64_bit_values_are_refused_alike(records_count: int) -> None:
    values = [(None, b"v", [], None)] * records_count
    batch = bytearray(build_batch(values))
    header = parse_header(batch, 0)
    body = bytes(batch_body(batch, 0, header))
    assert outcome(record_scan, body, header) == outcome(PURE, body, header) == ("ok", (records_count, 0, 0, True))
    too_long = b"\xff" * 10 + b"\x01"  # an 11-byte varint as the first record's length
    huge = b"\xfe" + b"\xff" * 8 + b"\x7f"  # a 10-byte varint past 64 bits
    for bad in (too_long, huge, struct.pack(">B", 0x80)):
        assert outcome(record_scan, bad + body, header) == outcome(PURE, bad + body, header) == ("CorruptRecordError",)
