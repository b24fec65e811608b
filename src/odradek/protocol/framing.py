"""Kafka's request and response framing, without sockets.

Every message on the wire is a size-prefixed frame::

    Frame    => Size Payload
      Size    => int32    bytes of Payload that follow
    Request  => RequestHeader Body
      RequestHeader v1 => api_key int16, api_version int16, correlation_id int32,
                          client_id nullable string
      RequestHeader v2 => v1 + tagged fields (flexible versions, KIP-482)
    Response => ResponseHeader Body
      ResponseHeader v0 => correlation_id int32
      ResponseHeader v1 => v0 + tagged fields

The header version follows from the body's version (kio knows which); ApiVersions always
answers with header v0 so that a client of any age can read the answer (KIP-511).

:class:`FrameDecoder` turns a byte stream into frames; :func:`parse_request` turns a frame
into a header and a kio request; :func:`encode_response` does the reverse for responses.
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.serial import entity_reader
from kio.serial.readers import (
    read_compact_array_length,
    read_int16,
    read_int32,
    read_legacy_array_length,
    read_unsigned_varint,
)

from odradek.protocol.api import SUPPORTED_APIS, ApiKey, request_class
from odradek.protocol.codegen import FunctionSource
from odradek.protocol.encoder import encode_frame

_SIZE = struct.Struct(">i")
# api_key int16, api_version int16, correlation_id int32: the part of every request header
# that is the same in every version, read before the version is known.
_HEADER_PREFIX = struct.Struct(">hhi")
# ResponseHeader v0 is the correlation id; v1 adds the count of its tagged fields, of which
# kio defines none.
_RESPONSE_HEADER_V0 = struct.Struct(">i")
_RESPONSE_HEADER_V1 = struct.Struct(">iB")
# Each API key by number (a dict lookup costs a fraction of an enum call).
_API_KEYS = {key.value: key for key in ApiKey}


class FramingError(Exception):
    """The byte stream cannot be read as Kafka frames: the connection must close."""


class FrameTooLargeError(FramingError):
    """A frame is larger than ``socket.request.max.bytes``."""


class InvalidRequestError(FramingError):
    """A frame is not a request odradek can parse (unknown API, bad header or body)."""


class UnsupportedVersionError(Exception):
    """A known API asked for in a version odradek does not serve."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(f"api {api_key} version {api_version} is not supported")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class FrameDecoder:
    """Splits a byte stream into frames. Feed bytes in, take complete payloads out.

    This class is not thread-safe; one decoder belongs to one connection.
    """

    __slots__ = ("_buffer", "_max_frame_bytes")

    def __init__(self, max_frame_bytes: int) -> None:
        self._buffer = bytearray()
        self._max_frame_bytes = max_frame_bytes

    @property
    def buffered(self) -> int:
        """Bytes received and kept for the frame not yet complete."""
        return len(self._buffer)

    @property
    def pending_frame_size(self) -> int | None:
        """The size the frame in progress announced, once its size prefix is in."""
        if len(self._buffer) < 4:
            return None
        return _SIZE.unpack_from(self._buffer, 0)[0]

    def feed(self, data: bytes) -> list[bytes]:
        """Adds received bytes; returns the payloads of the frames now complete."""
        buffer = self._buffer
        if buffer:
            buffer += data
            source: bytes | bytearray = buffer
        else:
            # The common case: nothing pending, so frames are cut from ``data`` directly.
            source = data
        frames = []
        position = 0
        available = len(source)
        with memoryview(source) as view:
            while available - position >= 4:
                (size,) = _SIZE.unpack_from(view, position)
                if size < 0:
                    raise InvalidRequestError(f"negative frame size {size}")
                if size > self._max_frame_bytes:
                    raise FrameTooLargeError(
                        f"frame of {size} bytes exceeds socket.request.max.bytes "
                        f"({self._max_frame_bytes})"
                    )
                end = position + 4 + size
                if end > available:
                    break
                frames.append(bytes(view[position + 4 : end]))
                position = end
            if source is not buffer:
                buffer += view[position:]
        if source is buffer and position:
            del buffer[:position]
        return frames


@dataclass(frozen=True, slots=True)
class Request:
    """A parsed request: header fields and the kio body of the requested version."""

    api_key: ApiKey
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """Returns (api_key, api_version, correlation_id) of a request frame."""
    if len(frame) < _HEADER_PREFIX.size:
        raise InvalidRequestError(f"request of {len(frame)} bytes is shorter than a header")
    return _HEADER_PREFIX.unpack_from(frame)


def parse_request(frame: bytes) -> Request:
    """Parses a request frame.

    Raises :class:`UnsupportedVersionError` for a known API in a version not served (the
    caller answers ApiVersions with its v0 error response and closes otherwise, as Kafka
    does) and :class:`InvalidRequestError` for anything unparseable.
    """
    api_key, api_version, correlation_id = peek_header(frame)
    key = _API_KEYS.get(api_key)
    if key is None:
        raise InvalidRequestError(f"unknown api key {api_key}")
    versions = SUPPORTED_APIS.get(key)
    if versions is None or api_version not in versions:
        raise UnsupportedVersionError(api_key, api_version, correlation_id)
    cls = request_class(key, api_version)
    try:
        header, offset = entity_reader(cls.__header_schema__)(frame, 0)
        _entity_walk(cls)(frame, offset)  # refuses impossible array lengths; see below
        body, size = entity_reader(cls)(frame, offset)
    except Exception as exc:  # kio raises a variety of decode errors on malformed input
        raise InvalidRequestError(
            f"malformed {key.name} v{api_version} request: {exc!r}"
        ) from exc
    # Bytes after the body are ignored, as Kafka ignores them: librdkafka's all-topics
    # Metadata request carries a few.
    return Request(key, api_version, correlation_id, header.client_id, body)


# -- array lengths ---------------------------------------------------------------------
#
# kio decodes an array by first reserving a slot for every element its length field claims.
# An 18-byte Metadata request claiming 2^31 topics makes it reserve 16 GiB; a reservation
# the OS refuses aborts the whole process (Rust's handle_alloc_error): no except clause
# catches that, so one request would take the broker down. Every element takes at least one
# byte, so a length larger than the bytes left in the frame is a lie. Before kio sees a
# body, the walk below follows the body's layout, reading only length fields and decoding
# nothing, and refuses any such frame.

# A walk step: from the offset of a value in the frame to the offset just past it. A value
# of fixed size is walked by its size instead: consecutive ones add up to one jump. Each
# entity's walk is compiled into one function, as ``encoder`` compiles encoders, since every
# request takes it: a Produce walk is a few jumps, not a dozen calls.
_Skip = Callable[[bytes, int], int]

_FIXED_SIZES = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
    "timedelta_i32": 4, "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8,
    "datetime_i64": 8, "uuid": 16,
}
# Non-flexible versions prefix strings with an int16 length, bytes and records with an
# int32 one (-1 for null); flexible versions prefix all three with an unsigned varint
# length + 1 (0 for null).
_LEGACY_LENGTH_READERS = {"string": read_int16, "bytes": read_int32, "records": read_int32}


class _WalkSource(FunctionSource):
    """A walk being written: consecutive fixed-size values are jumped over at once."""

    def __init__(self, flexible: bool) -> None:
        super().__init__("walk", "frame, offset", {
            "_array_count": _compact_array_count if flexible else _legacy_array_count,
            "_walk_compact_value": _walk_compact_value,
            "_walk_tagged_fields": _walk_tagged_fields,
        })
        self.flexible = flexible
        self._fixed = 0  # bytes of fixed-size values not yet jumped over

    def fixed(self, size: int) -> None:
        self._fixed += size

    def flush(self) -> None:
        if self._fixed:
            self.lines.append(f"    offset += {self._fixed}")
            self._fixed = 0

    def value(self, kafka_type: str, indent: int = 1) -> None:
        """Walks one value of ``kafka_type`` at ``offset``."""
        if kafka_type in _FIXED_SIZES:
            if indent == 1:
                self.fixed(_FIXED_SIZES[kafka_type])
            else:
                self.line(f"offset += {_FIXED_SIZES[kafka_type]}", indent)
        elif kafka_type not in _LEGACY_LENGTH_READERS:
            raise NotImplementedError(f"no wire layout for kafka type {kafka_type!r}")
        elif self.flexible:
            # Most lengths take one byte: length + 1 below 0x80, 0 for null.
            self.line("n = frame[offset]", indent)
            self.line("if n < 0x80: offset += n if n else 1", indent)
            self.line("else: offset = _walk_compact_value(frame, offset)", indent)
        else:
            reader = self.name("read_length", _LEGACY_LENGTH_READERS[kafka_type])
            self.line(f"length, size = {reader}(frame, offset)", indent)
            self.line("offset += size + (length if length > 0 else 0)", indent)


@cache
def _entity_walk(cls: type) -> _Skip:
    """The walk over one kio entity; raises InvalidRequestError at an impossible length."""
    flexible = cls.__flexible__
    fields = dataclasses.fields(cls)
    # A tagged value is skipped by its size anyway: its walk only checks the lengths in it.
    tagged = {field.metadata["tag"]: _compile_walk(f"{cls.__qualname__}.{field.name}",
                                                   [field], flexible, tagged=None)
              for field in fields if "tag" in field.metadata}
    return _compile_walk(cls.__qualname__, [f for f in fields if "tag" not in f.metadata],
                         flexible, tagged=tagged if flexible else None)


def _compile_walk(name: str, fields: list[dataclasses.Field], flexible: bool,
                  tagged: dict[int, _Skip] | None) -> _Skip:
    """One function walking ``fields`` in order, then the tagged fields if ``tagged`` is
    not None (a flexible entity: its tagged field walks by tag)."""
    source = _WalkSource(flexible)
    for field in fields:
        annotation, nullable = _unwrap_optional(field.type)
        if typing.get_origin(annotation) is tuple:
            element = typing.get_args(annotation)[0]
            source.line("count, offset = _array_count(frame, offset)")
            if dataclasses.is_dataclass(element):
                walk = source.name("walk", _entity_walk(element))
                source.line("for _ in range(count):")
                source.line(f"offset = {walk}(frame, offset)", 2)
            elif field.metadata["kafka_type"] in _FIXED_SIZES:
                source.line(f"offset += count * {_FIXED_SIZES[field.metadata['kafka_type']]}")
            else:
                source.line("for _ in range(count):")
                source.value(field.metadata["kafka_type"], 2)
        elif dataclasses.is_dataclass(annotation):
            walk = source.name("walk", _entity_walk(annotation))
            if nullable:
                # A nullable struct is prefixed by an int8: -1 for null, 1 when present.
                source.line(f"offset = (offset + 1 if frame[offset] >= 0x80 "
                            f"else {walk}(frame, offset + 1))")
            else:
                source.line(f"offset = {walk}(frame, offset)")
        else:
            source.value(field.metadata["kafka_type"])
    if tagged is not None:
        tags = source.name("tags", tagged)
        source.line("if frame[offset] == 0:  # no tagged fields")
        source.line("offset += 1", 2)
        source.line("else:")
        source.line(f"offset = _walk_tagged_fields({tags}, frame, offset)", 2)
    source.line("return offset")
    return source.compile(f"<walk {name}>")


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return next(a for a in typing.get_args(annotation) if a is not type(None)), True
    return annotation, False


def _walk_compact_value(frame: bytes, offset: int) -> int:
    length_plus_one, size = read_unsigned_varint(frame, offset)
    return offset + size + max(length_plus_one - 1, 0)


def _compact_array_count(frame: bytes, offset: int) -> tuple[int, int]:
    """(elements, offset of the first) of a flexible array; refuses a length the frame
    cannot hold. Read by kio's own length reader, so that the length checked is the length
    kio will reserve."""
    count, size = read_compact_array_length(frame, offset)
    return _checked_count(-1 if count is None else count, frame, offset, size)


def _legacy_array_count(frame: bytes, offset: int) -> tuple[int, int]:
    count, size = read_legacy_array_length(frame, offset)
    return _checked_count(count, frame, offset, size)


def _checked_count(count: int, frame: bytes, offset: int, size: int) -> tuple[int, int]:
    if count < -1 or count > len(frame) - offset - size:
        raise InvalidRequestError(
            f"array length {count} at byte {offset} with {len(frame) - offset - size} bytes "
            f"left"
        )
    return max(count, 0), offset + size


def _walk_tagged_fields(tagged: dict[int, _Skip], frame: bytes, offset: int) -> int:
    # KIP-482: count, then per field its tag, its size and its value.
    count, size = read_unsigned_varint(frame, offset)
    offset += size
    for _ in range(count):
        tag, size = read_unsigned_varint(frame, offset)
        offset += size
        length, size = read_unsigned_varint(frame, offset)
        offset += size
        if tag in tagged:
            tagged[tag](frame, offset)
        offset += length
    return offset


def encode_response_chunks(correlation_id: int, response: Any) -> list[bytes | bytearray]:
    """Serializes a kio response with its header, size-prefixed, as buffers to write in order
    (``transport.writelines``); record data is referenced, not copied."""
    # The header is packed here rather than built as a kio entity and encoded.
    header = (_RESPONSE_HEADER_V1.pack(correlation_id, 0)
              if type(response).__header_schema__.__flexible__
              else _RESPONSE_HEADER_V0.pack(correlation_id))
    return encode_frame(response, header=header)


def encode_response(correlation_id: int, response: Any) -> bytes:
    """Serializes a kio response with its header, size-prefixed, as one ``bytes``."""
    return b"".join(encode_response_chunks(correlation_id, response))
