"""Kafka's primitive wire types as construct classes that compile to straight-line Python.

Rules of this module:
- Every type is a `construct.Construct`, so `Int32.parse(b"...")` and `CompactString.build("x")` work as
  construct users expect; the schema compiler (schema.py) asks each type for the *names* of a reader and
  a writer function and emits calls to them, so a compiled message is one flat Python function per struct.
- Readers have the signature `read(buf: memoryview, pos: int) -> (value, new_pos)`; writers
  `write(out: Parts, value) -> None` and append bytes-like parts to `out`. Working on (buffer, position)
  instead of a stream lets `records` be returned as a memoryview slice of the frame: no copy on decode.
- Readers raise DecodeError, IndexError or struct.error on short or malformed input; `schema.Message.decode`
  turns all of them into DecodeError, the one error type callers see.
- Nullable variants are separate functions: a null in a non-nullable field is malformed input, as in Kafka.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from construct import Construct

I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
U32 = struct.Struct(">I")
ZERO_UUID = bytes(16)

# Fixed-width types: struct format characters. The schema compiler packs runs of these into one Struct.
FIXED_FORMATS: dict[str, str] = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "float64": "d",
    "uuid": "16s",
}


class DecodeError(ValueError):
    """Malformed bytes from the peer: the one exception type a decoder raises."""


class EncodeError(ValueError):
    """A value that cannot be written in the requested version (a bug on our side, not the peer's)."""


# What a writer appends to: bytes-like parts, and (Message.encode_parts) any `records` value left unencoded, such
# as a file range sent with sendfile.
Parts = list[Any]
# The compiled functions' signatures (see the module rules).
Reader = Callable[[memoryview, int], tuple[Any, int]]
Writer = Callable[[Parts, Any], None]


# -- varints ---------------------------------------------------------------------------------------------

_UVARINT_SMALL = [bytes([i]) for i in range(128)]


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    while True:
        pos += 1
        b = buf[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos + 1
        shift += 7
        if shift > 28:  # an unsigned varint32 has at most 5 bytes
            raise DecodeError("unsigned varint longer than 5 bytes")


def encode_uvarint(value: int) -> bytes:
    if value < 0x80:
        return _UVARINT_SMALL[value]
    if value >> 32:
        raise EncodeError(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def write_uvarint(out: Parts, value: int) -> None:
    out.append(encode_uvarint(value))


def _read_zigzag(buf: memoryview, pos: int, max_shift: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > max_shift:
            raise DecodeError("varint too long")


def read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    return _read_zigzag(buf, pos, 28)


def read_varlong(buf: memoryview, pos: int) -> tuple[int, int]:
    return _read_zigzag(buf, pos, 63)


def encode_varlong(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    if zigzag < 0x80:
        return _UVARINT_SMALL[zigzag]
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def write_varint(out: Parts, value: int) -> None:
    if not -(1 << 31) <= value < (1 << 31):
        raise EncodeError(f"varint out of range: {value}")
    out.append(encode_varlong(value))


def write_varlong(out: Parts, value: int) -> None:
    out.append(encode_varlong(value))


# -- lengths (classic: signed int; compact: unsigned varint of length + 1) --------------------------------


def _check_end(buf: memoryview, end: int) -> int:
    if end > len(buf):
        raise DecodeError(f"length runs {end - len(buf)} bytes past the end of the frame")
    return end


def _read_compact_length(buf: memoryview, pos: int) -> tuple[int, int]:
    n, pos = read_uvarint(buf, pos)
    return n - 1, pos


def _compact_length(n: int) -> bytes:
    return encode_uvarint(n + 1)


# -- strings ---------------------------------------------------------------------------------------------


def read_string(buf: memoryview, pos: int) -> tuple[str, int]:
    (n,) = I16.unpack_from(buf, pos)
    if n < 0:
        raise DecodeError("null in a non-nullable string")
    pos += 2
    end = _check_end(buf, pos + n)
    return str(buf[pos:end], "utf-8"), end


def read_nullable_string(buf: memoryview, pos: int) -> tuple[str | None, int]:
    (n,) = I16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        return None, pos
    end = _check_end(buf, pos + n)
    return str(buf[pos:end], "utf-8"), end


def read_compact_string(buf: memoryview, pos: int) -> tuple[str, int]:
    n, pos = _read_compact_length(buf, pos)
    if n < 0:
        raise DecodeError("null in a non-nullable compact string")
    end = _check_end(buf, pos + n)
    return str(buf[pos:end], "utf-8"), end


def read_compact_nullable_string(buf: memoryview, pos: int) -> tuple[str | None, int]:
    n, pos = _read_compact_length(buf, pos)
    if n < 0:
        return None, pos
    end = _check_end(buf, pos + n)
    return str(buf[pos:end], "utf-8"), end


def write_string(out: Parts, value: str) -> None:
    data = value.encode()
    if len(data) > 0x7FFF:
        raise EncodeError("string longer than 32767 bytes")
    out.append(I16.pack(len(data)) + data)


def write_nullable_string(out: Parts, value: str | None) -> None:
    if value is None:
        out.append(b"\xff\xff")
    else:
        write_string(out, value)


def write_compact_string(out: Parts, value: str) -> None:
    data = value.encode()
    out.append(_compact_length(len(data)) + data)


def write_compact_nullable_string(out: Parts, value: str | None) -> None:
    if value is None:
        out.append(b"\x00")
    else:
        write_compact_string(out, value)


# -- bytes (copied: small opaque blobs) and records (a zero-copy memoryview of the frame) ------------------


def read_bytes(buf: memoryview, pos: int) -> tuple[bytes, int]:
    (n,) = I32.unpack_from(buf, pos)
    if n < 0:
        raise DecodeError("null in non-nullable bytes")
    pos += 4
    end = _check_end(buf, pos + n)
    return bytes(buf[pos:end]), end


def read_nullable_bytes(buf: memoryview, pos: int) -> tuple[bytes | None, int]:
    (n,) = I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    end = _check_end(buf, pos + n)
    return bytes(buf[pos:end]), end


def read_compact_bytes(buf: memoryview, pos: int) -> tuple[bytes, int]:
    n, pos = _read_compact_length(buf, pos)
    if n < 0:
        raise DecodeError("null in non-nullable compact bytes")
    end = _check_end(buf, pos + n)
    return bytes(buf[pos:end]), end


def read_compact_nullable_bytes(buf: memoryview, pos: int) -> tuple[bytes | None, int]:
    n, pos = _read_compact_length(buf, pos)
    if n < 0:
        return None, pos
    end = _check_end(buf, pos + n)
    return bytes(buf[pos:end]), end


def read_records(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
    (n,) = I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    end = _check_end(buf, pos + n)
    return buf[pos:end], end


def read_compact_records(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
    n, pos = _read_compact_length(buf, pos)
    if n < 0:
        return None, pos
    end = _check_end(buf, pos + n)
    return buf[pos:end], end


def write_bytes(out: Parts, value: bytes) -> None:
    out.append(I32.pack(len(value)))
    out.append(value)


def write_nullable_bytes(out: Parts, value: bytes | None) -> None:
    if value is None:
        out.append(b"\xff\xff\xff\xff")
    else:
        write_bytes(out, value)


def write_compact_bytes(out: Parts, value: bytes) -> None:
    out.append(_compact_length(len(value)))
    out.append(value)


def write_compact_nullable_bytes(out: Parts, value: bytes | None) -> None:
    if value is None:
        out.append(b"\x00")
    else:
        write_compact_bytes(out, value)


# Records may also be any sized object that is not a buffer (the broker passes file slices for sendfile):
# it is appended as one part, so `Message.encode_parts` hands it back untouched.
write_records = write_nullable_bytes
write_compact_records = write_compact_nullable_bytes


# -- array lengths ---------------------------------------------------------------------------------------


def read_array_length(buf: memoryview, pos: int) -> tuple[int, int]:
    (n,) = I32.unpack_from(buf, pos)
    pos += 4
    if n > len(buf) - pos:  # every element takes at least one byte: refuse absurd counts before looping
        raise DecodeError(f"array of {n} elements cannot fit in the frame")
    return n, pos


def read_compact_array_length(buf: memoryview, pos: int) -> tuple[int, int]:
    n, pos = read_uvarint(buf, pos)
    n -= 1
    if n > len(buf) - pos:
        raise DecodeError(f"array of {n} elements cannot fit in the frame")
    return n, pos


def write_array_length(out: Parts, n: int) -> None:
    out.append(I32.pack(n))


def write_compact_array_length(out: Parts, n: int) -> None:
    out.append(encode_uvarint(n + 1))


# -- construct classes -----------------------------------------------------------------------------------


class CodeGen:
    """What the reader and writer generators use of construct's CodeGen: source blocks (dedented, each kept once:
    a set instead of construct's scan of its list), the reader/writer caches and the linked globals."""

    def __init__(self) -> None:
        self.blocks = ["import struct"]
        self._seen = set(self.blocks)
        self.parsercache: dict[str, str] = {}
        self.buildercache: dict[str, str] = {}
        self.linkedinstances: dict[str, Any] = {}

    def append(self, block: str) -> None:
        lines = [line for line in block.splitlines() if line.strip()]
        indent = len(lines[0]) - len(lines[0].lstrip())
        text = "\n".join(line[indent:] for line in lines)
        if text not in self._seen:
            self._seen.add(text)
            self.blocks.append(text)


def compile_function(construct: KafkaConstruct, side: str, label: str) -> Callable[..., Any]:
    """The reader (`side` "reader") or the writer of `construct` alone, generated and compiled: a server only
    reads requests and writes responses, so generating both sides (as construct's own compile does) would double
    the cost of each API's first use. `label` names the generated code in tracebacks."""
    code = CodeGen()
    name = construct.reader_name(code) if side == "reader" else construct.writer_name(code)
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(code.blocks) + "\n", f"<{label} {side}>", "exec"), namespace)
    linked = code.linkedinstances
    namespace.update({k: v for k, v in linked.items() if k != "__late__"})
    for statement in linked.get("__late__", ()):
        exec(statement, namespace)
    function: Callable[..., Any] = namespace[name]
    return function


class KafkaConstruct(Construct):
    """A construct whose compiled form is a reader/writer function pair (see the module rules).

    `parse`/`build` run the same functions over the stream's bytes, so tests can use any type through the plain
    construct API.
    """

    def reader_name(self, code: Any) -> str:
        raise NotImplementedError

    def writer_name(self, code: Any) -> str:
        raise NotImplementedError

    def _function(self, side: str) -> Callable[..., Any]:
        compiled: dict[str, Callable[..., Any]] = self.__dict__.setdefault("_compiled", {})
        if side not in compiled:
            compiled[side] = compile_function(self, side, type(self).__name__)
        return compiled[side]

    def _parse(self, stream: Any, context: Any, path: Any) -> Any:
        data = stream.read()
        value, end = self._function("reader")(memoryview(data), 0)
        stream.seek(end - len(data), 1)
        return value

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        out: Parts = []
        self._function("writer")(out, obj)
        stream.write(b"".join(out))
        return obj


class Primitive(KafkaConstruct):
    """A primitive whose reader and writer are functions of this module."""

    def __init__(self, kafka_type: str, reader: str, writer: str) -> None:
        super().__init__()
        self.kafka_type = kafka_type
        self.reader = reader
        self.writer = writer

    def reader_name(self, code: Any) -> str:
        code.append(f"from {__name__} import {self.reader}")
        return self.reader

    def writer_name(self, code: Any) -> str:
        code.append(f"from {__name__} import {self.writer}")
        return self.writer


class Fixed(KafkaConstruct):
    """A fixed-width big-endian field; the schema compiler merges runs of these into one struct.Struct."""

    def __init__(self, kafka_type: str) -> None:
        super().__init__()
        self.kafka_type = kafka_type
        self.format = FIXED_FORMATS[kafka_type]
        self.size = struct.calcsize(">" + self.format)

    def reader_name(self, code: Any) -> str:
        name = f"read_{self.kafka_type}"
        code.append(f"""
            _fixed_{self.kafka_type} = struct.Struct(">{self.format}")
            def {name}(buf, pos):
                return _fixed_{self.kafka_type}.unpack_from(buf, pos)[0], pos + {self.size}
        """)
        return name

    def writer_name(self, code: Any) -> str:
        name = f"write_{self.kafka_type}"
        code.append(f"""
            _fixed_{self.kafka_type} = struct.Struct(">{self.format}")
            def {name}(out, value):
                out.append(_fixed_{self.kafka_type}.pack(value))
        """)
        return name


def primitive(kafka_type: str, *, compact: bool, nullable: bool) -> KafkaConstruct:
    """The construct for a Kafka type name in one encoding (compact or classic, nullable or not)."""
    if kafka_type in FIXED_FORMATS:
        return Fixed(kafka_type)
    if kafka_type in ("varint", "varlong", "uvarint"):
        return Primitive(kafka_type, f"read_{kafka_type}", f"write_{kafka_type}")
    if kafka_type == "records":  # records are nullable in every version of every API
        prefix = "compact_" if compact else ""
        return Primitive(kafka_type, f"read_{prefix}records", f"write_{prefix}records")
    if kafka_type not in ("string", "bytes"):
        raise ValueError(f"not a primitive Kafka type: {kafka_type}")
    name = ("compact_" if compact else "") + ("nullable_" if nullable else "") + kafka_type
    return Primitive(kafka_type, f"read_{name}", f"write_{name}")


Int8 = Fixed("int8")
Int16 = Fixed("int16")
Int32 = Fixed("int32")
Int64 = Fixed("int64")
UInt16 = Fixed("uint16")
UInt32 = Fixed("uint32")
Float64 = Fixed("float64")
Boolean = Fixed("bool")
Uuid = Fixed("uuid")
UVarInt = primitive("uvarint", compact=False, nullable=False)
VarInt = primitive("varint", compact=False, nullable=False)
VarLong = primitive("varlong", compact=False, nullable=False)
String = primitive("string", compact=False, nullable=False)
NullableString = primitive("string", compact=False, nullable=True)
CompactString = primitive("string", compact=True, nullable=False)
CompactNullableString = primitive("string", compact=True, nullable=True)
Bytes = primitive("bytes", compact=False, nullable=False)
NullableBytes = primitive("bytes", compact=False, nullable=True)
CompactBytes = primitive("bytes", compact=True, nullable=False)
CompactNullableBytes = primitive("bytes", compact=True, nullable=True)
