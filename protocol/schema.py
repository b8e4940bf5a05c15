"""A field DSL that mirrors Kafka's message JSON, compiled into one reader and one writer per version.

A message is declared once, with version ranges, exactly as the Kafka JSON declares it (see
`protocol/messages/`). For each version asked for, `Message` builds a construct tree (`StructType`,
`ArrayType` and the primitives of `primitives.py`), generates Python source for the side asked for (a reader
on first decode, a writer on first encode), compiles it and caches the function. The generated code is
straight-line: consecutive fixed-width fields become one `struct.Struct.unpack_from`/`pack`, strings and arrays
are single calls, and decoded structs are instances of generated slotted classes, so the compiled codec does no
per-field dispatch at run time.

Rules:
- Decoded objects have every field of every version; fields absent in the decoded version keep their
  default (the JSON `default`, else 0 / "" / False / empty / the zero UUID / a default struct).
- UUIDs are 16 raw bytes. `records` decode to a memoryview into the frame (never copied) and encode from
  any bytes-like object, or from any sized non-buffer object that is passed through untouched as one part of
  `encode_parts` (the broker uses that for sendfile).
- A nullable struct field (Kafka's nullable struct) is None or an instance; on the wire an int8 marker, -1 null
  or 1 followed by the struct.
- Flexible versions end every struct with a tagged-field section. Known tags are decoded; unknown tags are
  kept (raw) on the object and written back on re-encode. A tagged field equal to its default is not written.
- Every malformed input raises `DecodeError`; asking for a version the message does not declare raises
  `UnsupportedVersionError`.
"""

from __future__ import annotations

import itertools
import keyword
import re
import struct
from collections.abc import Iterator
from typing import Any

from epoch_broker.protocol import primitives
from epoch_broker.protocol.primitives import ZERO_UUID, DecodeError, EncodeError, KafkaConstruct, Parts, Reader, Writer
from epoch_broker.protocol.versions import NONE, VersionRange

__all__ = [
    "Api",
    "DecodeError",
    "EncodeError",
    "Field",
    "KafkaStruct",
    "Message",
    "UnsupportedVersionError",
    "snake_case",
]

_UNSET: Any = object()
_NEW: Any = object()  # marks "build a fresh default" in generated __init__ signatures
_TYPE_DEFAULTS: dict[str, Any] = {
    "bool": False,
    "int8": 0,
    "int16": 0,
    "uint16": 0,
    "int32": 0,
    "uint32": 0,
    "int64": 0,
    "float64": 0.0,
    "string": "",
    "bytes": b"",
    "records": None,
    "uuid": ZERO_UUID,
}


class UnsupportedVersionError(ValueError):
    """The message is not declared at that version."""


def snake_case(json_name: str) -> str:
    """Kafka's CamelCase field names as Python names: CurrentLeaderEpoch -> current_leader_epoch."""
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", json_name)
    return name.lower()


class Field:
    """One field of a message or struct, as in the Kafka JSON (names in snake_case)."""

    __slots__ = ("default", "fields", "flexible", "name", "nullable", "tag", "tagged", "type", "versions")

    def __init__(
        self,
        name: str,
        type: str,
        versions: str,
        *,
        nullable: str = "none",
        tag: int | None = None,
        tagged: str = "none",
        default: Any = _UNSET,
        fields: list[Field] | None = None,
        flexible: str | None = None,
    ) -> None:
        if keyword.iskeyword(name) or not name.isidentifier():
            raise ValueError(f"field name {name!r} is not a Python identifier")
        self.name = name
        self.type = type
        self.versions = VersionRange.parse(versions)
        self.nullable = VersionRange.parse(nullable)
        self.tag = tag
        self.tagged = VersionRange.parse(tagged)
        self.default = default
        self.fields = fields
        self.flexible = None if flexible is None else VersionRange.parse(flexible)
        if (tag is None) != self.tagged.is_none:
            raise ValueError(f"field {name}: tag and tagged versions go together")
        if fields is not None and self.element_type in _TYPE_DEFAULTS:
            raise ValueError(f"field {name}: a primitive type cannot have fields")

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.fields is not None

    def __repr__(self) -> str:
        return f"Field({self.name!r}, {self.type!r}, {str(self.versions)!r})"


class KafkaStruct:
    """Base of the generated message classes: slots, keyword construction, equality and repr."""

    __slots__ = ("_unknown_tags",)
    _unknown_tags: dict[int, bytes] | None  # tag -> raw bytes of the tagged fields this schema does not know
    _field_names: tuple[str, ...] = ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self._field_names) and (
            self._unknown_tags == other._unknown_tags
        )

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._field_names)
        return f"{type(self).__name__}({inner})"

    def to_dict(self) -> dict[str, Any]:
        """A plain nested dict (lists and dicts only), for logs, tests and JSON output."""
        return {n: _plain(getattr(self, n)) for n in self._field_names}


def _plain(value: Any) -> Any:
    if isinstance(value, KafkaStruct):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def _make_class(name: str, fields: list[Field], types: dict[str, type]) -> type:
    """Generate the slotted class for a struct (and, first, for the structs nested in it)."""
    namespace: dict[str, Any] = {"_NEW": _NEW}
    params, body = [], []
    for f in fields:
        if f.is_struct:
            nested = types.get(f.element_type)
            if nested is None:
                nested = _make_class(f.element_type, f.fields or [], types)
            elif nested._declared_fields is not f.fields:  # type: ignore[attr-defined]
                raise ValueError(f"struct {f.element_type} declared twice with different fields")
            namespace[f"_cls_{f.name}"] = nested
        # default None: the parameter defaults to None and what the caller passes is kept
        if f.is_array:
            default_expr = f.name if f.default is None else f"[] if {f.name} is _NEW else {f.name}"
            fresh = f.default is not None
        elif f.is_struct:
            default_expr = f.name if f.default is None else f"_cls_{f.name}() if {f.name} is _NEW else {f.name}"
            fresh = f.default is not None
        else:
            value = _TYPE_DEFAULTS[f.type] if f.default is _UNSET else f.default
            namespace[f"_default_{f.name}"] = value
            params.append(f"{f.name}=_default_{f.name}")
            body.append(f"    self.{f.name} = {f.name}")
            continue
        params.append(f"{f.name}=_NEW" if fresh else f"{f.name}=None")
        body.append(f"    self.{f.name} = {default_expr}")
    body.append("    self._unknown_tags = None")
    signature = ", ".join(["self", "*", *params]) if params else "self"
    source = f"def __init__({signature}):\n" + "\n".join(body)
    exec(source, namespace)  # generated once per struct at import time
    cls = type(
        name,
        (KafkaStruct,),
        {
            "__slots__": tuple(f.name for f in fields),
            "__init__": namespace["__init__"],
            "_field_names": tuple(f.name for f in fields),
            "_declared_fields": fields,
            "__module__": "epoch_broker.protocol.messages",
        },
    )
    types[name] = cls
    return cls


# -- construct types for structs and arrays -----------------------------------------------------------------

_ids = itertools.count()


def _link(code: Any, name: str, value: Any) -> str:
    """Make a Python object a global of the generated module (injected after construct compiles it)."""
    code.linkedinstances[name] = value
    return name


def _late(code: Any, statement: str) -> None:
    """A module-level statement that needs linked globals: run after they are injected."""
    code.linkedinstances.setdefault("__late__", []).append(statement)


def _field_construct(field: Field, version: int, flexible: bool, types: dict[str, type]) -> KafkaConstruct:
    compact = flexible and (field.flexible is None or version in field.flexible)
    nullable = version in field.nullable
    if field.is_struct:
        element: KafkaConstruct = StructType(types[field.element_type], field.fields or [], version, flexible, types)
    elif field.is_array:
        element = primitives.primitive(field.element_type, compact=compact, nullable=False)
    else:
        return primitives.primitive(field.type, compact=compact, nullable=nullable)
    if field.is_array:
        return ArrayType(element, compact=compact, nullable=nullable)
    if nullable:
        return NullableStructType(element)
    return element


class ArrayType(KafkaConstruct):
    """An array (classic: int32 count, -1 null; compact: unsigned varint count + 1, 0 null)."""

    def __init__(self, element: KafkaConstruct, *, compact: bool, nullable: bool) -> None:
        super().__init__()
        self.element = element
        self.compact = compact
        self.nullable = nullable
        self.uid = next(_ids)

    def reader_name(self, code: Any) -> str:
        name = f"read_array_{self.uid}"
        if name in code.parsercache:
            return name
        code.parsercache[name] = name
        length = "read_compact_array_length" if self.compact else "read_array_length"
        code.append(f"from {primitives.__name__} import {length}, DecodeError")
        on_null = "return None, pos" if self.nullable else "raise DecodeError('null in a non-nullable array')"
        if isinstance(self.element, primitives.Fixed) and self.element.kafka_type != "uuid":
            fmt, size = self.element.format, self.element.size
            items = f"list(struct.unpack_from('>%d{fmt}' % n, buf, pos)), pos + n * {size}"
            code.append(f"""
                def {name}(buf, pos):
                    n, pos = {length}(buf, pos)
                    if n < 0:
                        {on_null}
                    return {items}
            """)
            return name
        element = self.element.reader_name(code)
        code.append(f"""
            def {name}(buf, pos):
                n, pos = {length}(buf, pos)
                if n < 0:
                    {on_null}
                items = []
                append = items.append
                for _ in range(n):
                    item, pos = {element}(buf, pos)
                    append(item)
                return items, pos
        """)
        return name

    def writer_name(self, code: Any) -> str:
        name = f"write_array_{self.uid}"
        if name in code.buildercache:
            return name
        code.buildercache[name] = name
        length = "write_compact_array_length" if self.compact else "write_array_length"
        code.append(f"from {primitives.__name__} import {length}")
        null = "b'\\x00'" if self.compact else "b'\\xff\\xff\\xff\\xff'"
        on_null = f"out.append({null}); return" if self.nullable else "raise TypeError('null in a non-nullable array')"
        if isinstance(self.element, primitives.Fixed) and self.element.kafka_type != "uuid":
            items = f"out.append(struct.pack('>%d{self.element.format}' % len(value), *value))"
        else:
            element = self.element.writer_name(code)
            items = f"for item in value:\n                    {element}(out, item)"
        code.append(f"""
            def {name}(out, value):
                if value is None:
                    {on_null}
                {length}(out, len(value))
                {items}
        """)
        return name


class NullableStructType(KafkaConstruct):
    """A nullable struct field: an int8 marker, -1 for null, 1 followed by the struct (also inside a tagged
    field, where Kafka writes the same byte as an unsigned varint 1)."""

    def __init__(self, element: KafkaConstruct) -> None:
        super().__init__()
        self.element = element
        self.uid = next(_ids)

    def reader_name(self, code: Any) -> str:
        name = f"read_nullable_struct_{self.uid}"
        if name in code.parsercache:
            return name
        code.parsercache[name] = name
        element = self.element.reader_name(code)
        code.append(f"""
            def {name}(buf, pos):
                if buf[pos] & 0x80:  # a negative marker, as Kafka reads it
                    return None, pos + 1
                return {element}(buf, pos + 1)
        """)
        return name

    def writer_name(self, code: Any) -> str:
        name = f"write_nullable_struct_{self.uid}"
        if name in code.buildercache:
            return name
        code.buildercache[name] = name
        element = self.element.writer_name(code)
        code.append(f"""
            def {name}(out, value):
                if value is None:
                    out.append(b'\\xff')
                    return
                out.append(b'\\x01')
                {element}(out, value)
        """)
        return name


class StructType(KafkaConstruct):
    """A struct at one version: its fields in wire order, then (flexible versions) the tagged section."""

    def __init__(
        self, cls: type, fields: list[Field], version: int, flexible: bool, types: dict[str, type]
    ) -> None:
        super().__init__()
        self.cls = cls
        self.flexible = flexible
        self.uid = next(_ids)
        present = [f for f in fields if version in f.versions]
        self.tagged = [f for f in present if flexible and version in f.tagged]
        self.regular = [f for f in present if f not in self.tagged]
        self.constructs = {f.name: _field_construct(f, version, flexible, types) for f in present}

    def _runs(self) -> Iterator[list[Field]]:
        """Consecutive regular fields, fixed-width ones grouped so each group is one struct call."""
        run: list[Field] = []
        for f in self.regular:
            if isinstance(self.constructs[f.name], primitives.Fixed):
                run.append(f)
                continue
            if run:
                yield run
                run = []
            yield [f]
        if run:
            yield run

    def _fixed_struct(self, code: Any, run: list[Field]) -> str | None:
        if not isinstance(self.constructs[run[0].name], primitives.Fixed):
            return None
        return _link(code, f"_struct_{self.uid}_{run[0].name}", struct.Struct(self._format(run)))

    def _format(self, run: list[Field]) -> str:
        return ">" + "".join(self.constructs[f.name].format for f in run)

    def reader_name(self, code: Any) -> str:
        name = f"read_{self.cls.__name__}_{self.uid}"
        if name in code.parsercache:
            return name
        code.parsercache[name] = name
        cls = _link(code, f"_cls_{self.uid}", self.cls)
        lines = []
        for run in self._runs():
            fixed = self._fixed_struct(code, run)
            if fixed:
                targets = "".join(f"f_{f.name}, " for f in run)
                lines.append(f"({targets}) = {fixed}.unpack_from(buf, pos)")
                lines.append(f"pos += {struct.calcsize(self._format(run))}")
            else:
                reader = self.constructs[run[0].name].reader_name(code)
                lines.append(f"f_{run[0].name}, pos = {reader}(buf, pos)")
        kwargs = ", ".join(f"{f.name}=f_{f.name}" for f in self.regular)
        lines.append(f"obj = {cls}({kwargs})")
        if self.flexible:
            known = {f.tag: (f.name, self.constructs[f.name].reader_name(code)) for f in self.tagged}
            table = "{" + ", ".join(f"{tag}: ({n!r}, {r})" for tag, (n, r) in sorted(known.items())) + "}"
            _late(code, f"_tags_{self.uid} = {table}")
            code.append(f"from {__name__} import read_tags")
            # Most sections are empty: test the count byte inline instead of calling read_tags.
            lines.append("if buf[pos] == 0:")
            lines.append("    pos += 1")
            lines.append("else:")
            lines.append(f"    pos = read_tags(obj, buf, pos, _tags_{self.uid})")
        lines.append("return obj, pos")
        body = "\n".join("    " + line for line in lines)
        code.append(f"def {name}(buf, pos):\n{body}\n")
        return name

    def writer_name(self, code: Any) -> str:
        name = f"write_{self.cls.__name__}_{self.uid}"
        if name in code.buildercache:
            return name
        code.buildercache[name] = name
        lines = []
        for run in self._runs():
            fixed = self._fixed_struct(code, run)
            if fixed:
                values = ", ".join(f"value.{f.name}" for f in run)
                lines.append(f"out.append({fixed}.pack({values}))")
            else:
                writer = self.constructs[run[0].name].writer_name(code)
                lines.append(f"{writer}(out, value.{run[0].name})")
        if self.flexible and self.tagged:
            table = []
            for f in sorted(self.tagged, key=lambda f: f.tag or 0):
                default = _link(code, f"_default_{self.uid}_{f.name}", self.cls().__getattribute__(f.name))
                table.append(f"({f.tag}, {f.name!r}, {self.constructs[f.name].writer_name(code)}, {default})")
            _late(code, f"_wtags_{self.uid} = ({', '.join(table)},)")
            code.append(f"from {__name__} import write_tags")
            lines.append(f"write_tags(out, value, _wtags_{self.uid})")
        elif self.flexible:
            code.append(f"from {__name__} import write_tags")
            lines.append("if value._unknown_tags is None:")
            lines.append("    out.append(b'\\x00')")
            lines.append("else:")
            lines.append("    write_tags(out, value, ())")
        body = "\n".join("    " + line for line in lines) or "    pass"
        code.append(f"def {name}(out, value):\n{body}\n")
        return name


def read_tags(obj: KafkaStruct, buf: memoryview, pos: int, known: dict[int, tuple[str, Reader]]) -> int:
    """Read a tagged-field section into `obj`: known tags decoded, unknown ones kept raw."""
    count, pos = primitives.read_uvarint(buf, pos)
    if count > len(buf) - pos:
        raise DecodeError(f"{count} tagged fields cannot fit in the frame")
    for _ in range(count):
        tag, pos = primitives.read_uvarint(buf, pos)
        size, pos = primitives.read_uvarint(buf, pos)
        end = pos + size
        if end > len(buf):
            raise DecodeError("tagged field runs past the end of the frame")
        entry = known.get(tag)
        if entry is None:
            if obj._unknown_tags is None:
                obj._unknown_tags = {}
            obj._unknown_tags[tag] = bytes(buf[pos:end])
        else:
            value, _ = entry[1](buf[:end], pos)  # bounded view: a bad size cannot read past its field
            setattr(obj, entry[0], value)
        pos = end
    return pos


def write_tags(out: Parts, obj: KafkaStruct, tagged: tuple[tuple[int, str, Writer, Any], ...]) -> None:
    """Write a tagged-field section: the non-default known fields and any preserved unknown ones."""
    items: list[tuple[int, bytes]] = []
    for tag, name, writer, default in tagged:
        value = getattr(obj, name)
        if value == default:
            continue
        sub: Parts = []
        writer(sub, value)
        items.append((tag, b"".join(sub)))
    if obj._unknown_tags:
        items.extend(obj._unknown_tags.items())
        items.sort(key=lambda item: item[0])
    out.append(primitives.encode_uvarint(len(items)))
    for tag, data in items:
        out.append(primitives.encode_uvarint(tag) + primitives.encode_uvarint(len(data)))
        out.append(data)


# Everything a compiled reader can raise on malformed input, turned into DecodeError at the boundary.
_DECODE_FAILURES = (struct.error, IndexError, ValueError, TypeError, OverflowError)


class Message:
    """A request, response or header, declared once for all its versions."""

    def __init__(
        self,
        name: str,
        *,
        kind: str,
        versions: str,
        flexible: str,
        fields: list[Field],
        api_key: int | None = None,
    ) -> None:
        self.name = name
        self.api_key = api_key
        self.kind = kind
        self.versions = VersionRange.parse(versions)
        self.flexible = VersionRange.parse(flexible) if flexible else NONE
        self.fields = fields
        self._types: dict[str, type] | None = None
        self._readers: dict[int, Reader] = {}
        self._writers: dict[int, Writer] = {}

    @property
    def types(self) -> dict[str, type]:
        """The generated class of this message and of each struct in it, by name: made on first use, since a
        process meets few of the APIs declared and generating them all would cost every start-up ~20 ms."""
        if self._types is None:
            types: dict[str, type] = {}
            _make_class(self.name, self.fields, types)
            self._types = types
        return self._types

    @property
    def cls(self) -> type:
        return self.types[self.name]

    def __getattr__(self, item: str) -> type:
        if not item.startswith("_") and item in self.types:  # a struct's class: REQUEST.TopicProduceData
            return self.types[item]
        raise AttributeError(item)

    def reader(self, version: int) -> Reader:
        """The decoder of `version`, compiled on first use."""
        reader = self._readers.get(version)
        if reader is None:
            reader = self._readers[version] = primitives.compile_function(self._root(version), "reader", self.name)
        return reader

    def writer(self, version: int) -> Writer:
        """The encoder of `version`, compiled on first use."""
        writer = self._writers.get(version)
        if writer is None:
            writer = self._writers[version] = primitives.compile_function(self._root(version), "writer", self.name)
        return writer

    def _root(self, version: int) -> StructType:
        if version not in self.versions:
            raise UnsupportedVersionError(f"{self.name} has no version {version} (declared {self.versions})")
        return StructType(self.cls, self.fields, version, version in self.flexible, self.types)

    def decode_from(self, buf: bytes | bytearray | memoryview, version: int, pos: int = 0) -> tuple[Any, int]:
        """Decode one message starting at `pos`; returns (message, position after it)."""
        reader = self.reader(version)
        view = buf if isinstance(buf, memoryview) else memoryview(buf)
        try:
            return reader(view, pos)
        except DecodeError:
            raise
        except _DECODE_FAILURES as exc:
            raise DecodeError(f"{self.name} v{version}: {exc}") from exc

    def decode(self, buf: bytes | bytearray | memoryview, version: int) -> Any:
        return self.decode_from(buf, version)[0]

    def encode_parts(self, obj: Any, version: int, out: Parts | None = None) -> Parts:
        """Encode into a list of parts: bytes-like pieces and, untouched, any non-buffer `records` values."""
        writer = self.writer(version)
        parts: Parts = [] if out is None else out
        try:
            writer(parts, obj)
        except EncodeError:
            raise
        except (struct.error, TypeError, AttributeError, ValueError, OverflowError) as exc:
            raise EncodeError(f"{self.name} v{version}: {exc}") from exc
        return parts

    def encode(self, obj: Any, version: int) -> bytes:
        return b"".join(self.encode_parts(obj, version))

    def __repr__(self) -> str:
        return f"Message({self.name!r}, versions={self.versions}, flexible={self.flexible})"


class Api:
    """One Kafka API: its key, its request and response, and the header versions each version uses."""

    API_VERSIONS_KEY = 18
    CONTROLLED_SHUTDOWN_KEY = 7

    def __init__(self, request: Message, response: Message) -> None:
        if request.api_key is None or request.api_key != response.api_key:
            raise ValueError("request and response must carry the same api_key")
        if request.versions != response.versions:
            raise ValueError(f"{request.name}: request and response must declare the same versions")
        self.key = request.api_key
        self.name = request.name.removesuffix("Request")
        self.request = request
        self.response = response
        self.versions = request.versions

    def request_header_version(self, version: int) -> int:
        if self.key == self.CONTROLLED_SHUTDOWN_KEY and version == 0:
            return 0
        return 2 if version in self.request.flexible else 1

    def response_header_version(self, version: int) -> int:
        # ApiVersions answers with header v0 at every version, so a client can read it before negotiating.
        if self.key == self.API_VERSIONS_KEY:
            return 0
        return 1 if version in self.response.flexible else 0

    def __repr__(self) -> str:
        return f"Api({self.key}, {self.name!r}, versions={self.versions})"
