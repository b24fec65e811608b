"""Compiled encoders for kio entities: the bytes kio's ``entity_writer`` writes, faster.

kio serializes an entity by calling one small writer per field, each of which checks its
value's type and writes a few bytes to a stream; for the responses on the hot path (a
produce acknowledgement, a fetch of a few partitions) that is about half of the broker's
CPU per request. :func:`entity_encoder` reads the same schema kio does (its field
classification, tags and implicit defaults) once per class and compiles a function that
packs each run of fixed-width fields with one ``struct`` call and appends to one
``bytearray``, the way ``dataclasses`` and ``collections.namedtuple`` compile their
methods. A property test holds every served message, in every version, to the bytes kio
writes.

Large bytes values (the records of a fetch response) are not copied: the encoder notes
where they go and :func:`encode_frame` returns them as separate chunks, so stored batches
go from the page cache to the socket with no copy in between.

An encoder is called as ``encode(buf, refs, entity)``: ``buf`` is the ``bytearray`` being
written, ``refs`` a list that receives ``(position, value)`` for each large value that
belongs at ``position`` in ``buf`` but is kept by reference.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from dataclasses import MISSING, Field, fields
from functools import cache
from typing import Any
from uuid import UUID

from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.serial._serialize import get_field_writer
from kio.serial.writers import write_tagged_field

from odradek.protocol.codegen import FunctionSource

Encoder = Callable[[bytearray, list, Any], None]

# Values at least this large are kept by reference rather than copied into the frame.
BY_REFERENCE_MIN_BYTES = 16 * 1024

_SIZE = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_ZERO_UUID = bytes(16)

# Fixed-width Kafka types: their struct code and how a value becomes what struct packs.
_FIXED: dict[str, tuple[str, str]] = {
    "int8": ("b", "{}"),
    "int16": ("h", "{}"),
    "int32": ("i", "{}"),
    "int64": ("q", "{}"),
    "uint8": ("B", "{}"),
    "uint16": ("H", "{}"),
    "uint32": ("I", "{}"),
    "uint64": ("Q", "{}"),
    "float64": ("d", "{}"),
    "bool": ("?", "{}"),
    "error_code": ("h", "{}.value"),
    "uuid": ("16s", "_uuid({})"),
    "timedelta_i32": ("i", "round({}.total_seconds() * 1000)"),
    "timedelta_i64": ("q", "round({}.total_seconds() * 1000)"),
    "datetime_i64": ("q", "round({}.timestamp() * 1000)"),
}
_NULLABLE_DATETIME = "(-1 if {0} is None else round({0}.timestamp() * 1000))"


def encode_frame(*entities: Any, header: bytes = b"") -> list[bytes | bytearray]:
    """Encodes ``entities`` one after the other as one size-prefixed frame, after the
    already encoded ``header`` if any, returned as buffers to write in order
    (``transport.writelines``): large values are referenced, not copied."""
    buf = bytearray(4)
    buf += header
    refs: list[tuple[int, Any]] = []
    for entity in entities:
        entity_encoder(type(entity))(buf, refs, entity)
    if not refs:
        _SIZE.pack_into(buf, 0, len(buf) - 4)
        return [buf]
    _SIZE.pack_into(buf, 0, len(buf) - 4 + sum(len(value) for _, value in refs))
    chunks: list[bytes | bytearray] = []
    start = 0
    for position, value in refs:
        if position > start:
            chunks.append(buf[start:position])
        chunks.append(value)
        start = position
    if start < len(buf):
        chunks.append(buf[start:])
    return chunks


def _uvarint(value: int) -> bytes:
    if 0 <= value < 0x80:
        return _SMALL_UVARINTS[value]
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_UVARINTS = [bytes((n,)) for n in range(0x80)]


def _uuid(value: UUID | None) -> bytes:
    return _ZERO_UUID if value is None else value.bytes


def _put(buf: bytearray, refs: list, value: bytes) -> None:
    if len(value) >= BY_REFERENCE_MIN_BYTES:
        refs.append((len(buf), value))
    else:
        buf += value


def _compact_bytes(buf: bytearray, refs: list, value: str | bytes | None) -> None:
    if value is None:
        buf.append(0)
        return
    if isinstance(value, str):
        value = value.encode()
    size = len(value) + 1
    if size < 0x80:
        buf.append(size)
    else:
        buf += _uvarint(size)
    _put(buf, refs, value)


def _compact_bytes_not_null(buf: bytearray, refs: list, value: str | bytes) -> None:
    if value is None:
        raise TypeError("Unexpectedly received None value")
    _compact_bytes(buf, refs, value)


def _legacy_sized(buf: bytearray, refs: list, value: bytes | None, size: struct.Struct) -> None:
    if value is None:
        buf += size.pack(-1)
        return
    buf += size.pack(len(value))
    _put(buf, refs, value)


def _legacy_string(buf: bytearray, refs: list, value: str | None) -> None:
    _legacy_sized(buf, refs, None if value is None else value.encode(), _INT16)


def _legacy_string_not_null(buf: bytearray, refs: list, value: str) -> None:
    if value is None:
        raise TypeError("Unexpectedly received None value")
    _legacy_string(buf, refs, value)


def _legacy_bytes(buf: bytearray, refs: list, value: bytes | None) -> None:
    _legacy_sized(buf, refs, value, _SIZE)


def _legacy_bytes_not_null(buf: bytearray, refs: list, value: bytes) -> None:
    if value is None:
        raise TypeError("Unexpectedly received None value")
    _legacy_bytes(buf, refs, value)


def _variable_writer(kafka_type: str, flexible: bool, optional: bool, legacy_client_id: bool
                     ) -> Callable[[bytearray, list, Any], None]:
    if legacy_client_id:
        return _legacy_string
    if flexible:
        return _compact_bytes if optional else _compact_bytes_not_null
    if kafka_type == "string":
        return _legacy_string if optional else _legacy_string_not_null
    return _legacy_bytes if optional else _legacy_bytes_not_null


class _Source(FunctionSource):
    """An encoder being written: each run of fixed-width fields is packed by one call."""

    def __init__(self) -> None:
        super().__init__("encode", "buf, refs, e", {
            "_uvarint": _uvarint, "_uuid": _uuid, "_int32": _SIZE.pack,
        })
        self._run: list[tuple[str, str]] = []  # pending fixed-width (code, expression)

    def fixed(self, code: str, expression: str) -> None:
        self._run.append((code, expression))

    def flush(self) -> None:
        if not self._run:
            return
        run, self._run = self._run, []
        packer = self.name("pack", struct.Struct(">" + "".join(code for code, _ in run)).pack)
        self.lines.append(f"    buf += {packer}({', '.join(e for _, e in run)})")


def _array_length(source: _Source, value: str, flexible: bool, indent: int) -> None:
    if flexible:
        source.line(f"if {value} is None:", indent)
        source.line("buf.append(0)", indent + 1)
        source.line("else:", indent)
        source.line(f"n = len({value}) + 1", indent + 1)
        source.line("if n < 0x80: buf.append(n)", indent + 1)
        source.line("else: buf += _uvarint(n)", indent + 1)
    else:
        source.line(f"if {value} is None:", indent)
        source.line("buf += b'\\xff\\xff\\xff\\xff'", indent + 1)
        source.line("else:", indent)
        source.line(f"buf += _int32(len({value}))", indent + 1)


def _compile_field(source: _Source, field: Field, flexible: bool, legacy_client_id: bool
                   ) -> None:
    value = f"e.{field.name}"
    field_class = classify_field(field)
    if isinstance(field_class, EntityField):
        nested = source.name("entity", entity_encoder(field_class.type_))
        if is_optional(field):
            source.line(f"if {value} is None: buf.append(0xff)")
            source.line(f"else: buf.append(1); {nested}(buf, refs, {value})")
        else:
            source.line(f"{nested}(buf, refs, {value})")
        return
    if isinstance(field_class, EntityTupleField):
        nested = source.name("entity", entity_encoder(field_class.type_))
        source.line(f"v = {value}")
        _array_length(source, "v", flexible, 1)
        source.line("for item in v:", 2)
        source.line(f"{nested}(buf, refs, item)", 3)
        return
    kafka_type = get_schema_field_type(field)
    if isinstance(field_class, PrimitiveTupleField):
        source.line(f"v = {value}")
        _array_length(source, "v", flexible, 1)
        source.line("for item in v:", 2)
        if kafka_type in _FIXED:
            code, expression = _FIXED[kafka_type]
            packer = source.name("pack", struct.Struct(">" + code).pack)
            source.line(f"buf += {packer}({expression.format('item')})", 3)
        else:
            writer = source.name("write", _variable_writer(kafka_type, flexible, False, False))
            source.line(f"{writer}(buf, refs, item)", 3)
        return
    optional = is_optional(field)
    if kafka_type == "datetime_i64" and optional:
        source.fixed("q", _NULLABLE_DATETIME.format(value))
    elif kafka_type in _FIXED and (not optional or kafka_type == "uuid"):
        code, expression = _FIXED[kafka_type]
        source.fixed(code, expression.format(value))
    elif kafka_type in ("string", "bytes", "records"):
        writer = source.name(
            "write", _variable_writer(kafka_type, flexible, optional, legacy_client_id))
        source.line(f"{writer}(buf, refs, {value})")
    else:
        raise NotImplementedError(f"no encoder for {kafka_type!r} field {field.name} "
                                  f"(optional={optional})")


def _tagged_fields_writer(entity_type: type) -> Callable[[bytearray, Any], None]:
    """Writes an entity's tagged fields as kio does: those that differ from their default,
    in tag order, each through kio's own writer (tagged fields are rare and small)."""
    tagged = sorted(
        (get_field_tag(field), field.name,
         get_field_writer(field, flexible=True, is_request_header=False, is_tag=True),
         get_tagged_field_default(field) if field.default is MISSING else field.default)
        for field in fields(entity_type) if get_field_tag(field) is not None)

    def write_tagged_fields(buf: bytearray, entity: Any) -> None:
        # Most values are their field's default object itself: ``is`` spares comparing
        # them field by field.
        present = [(tag, writer, value) for tag, name, writer, default in tagged
                   if (value := getattr(entity, name)) is not default and value != default]
        buf += _uvarint(len(present))
        if present:
            with io.BytesIO() as tags:
                for tag, writer, value in present:
                    write_tagged_field(tags, tag, writer, value)
                buf += tags.getvalue()

    return write_tagged_fields


def _compile_tagged_fields(source: _Source, entity_type: type) -> None:
    """Writes an entity's tagged fields: when each holds its default, as nearly all do, the
    count 0 without a call; else through :func:`_tagged_fields_writer`."""
    tagged = [field for field in fields(entity_type) if get_field_tag(field) is not None]
    if not tagged:
        source.line("buf.append(0)")
        return
    tests = []
    for field in tagged:
        default = source.name(
            "default", get_tagged_field_default(field) if field.default is MISSING
            else field.default)
        value = f"e.{field.name}"
        tests.append(f"({value} is {default} or {value} == {default})")
    tags = source.name("tags", _tagged_fields_writer(entity_type))
    source.line(f"if {' and '.join(tests)}:")
    source.line("buf.append(0)", 2)
    source.line("else:")
    source.line(f"{tags}(buf, e)", 2)


@cache
def entity_encoder(entity_type: type) -> Encoder:
    """The compiled encoder of a kio entity class: ``encode(buf, refs, entity)``."""
    flexible = entity_type.__flexible__
    legacy_client_id = entity_type.__name__ == "RequestHeader"
    source = _Source()
    for field in fields(entity_type):
        if get_field_tag(field) is None:
            _compile_field(source, field, flexible,
                           legacy_client_id and field.name == "client_id")
    if flexible:
        _compile_tagged_fields(source, entity_type)
    encode = source.compile(f"<encoder {entity_type.__module__}.{entity_type.__qualname__}>")
    encode.__qualname__ = f"entity_encoder.<{entity_type.__qualname__}>"
    return encode
