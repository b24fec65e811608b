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
from functools import cache, partial
from typing import Any

from kio.serial import entity_reader
from kio.serial.readers import (
    read_compact_array_length,
    read_int8,
    read_int16,
    read_int32,
    read_legacy_array_length,
    read_unsigned_varint,
)

from odradek.protocol.api import ApiKey, SUPPORTED_APIS, request_class
from odradek.protocol.encoder import encode_frame

_SIZE = struct.Struct(">i")
# api_key int16, api_version int16, correlation_id int32: the part of every request header
# that is the same in every version, read before the version is known.
_HEADER_PREFIX = struct.Struct(">hhi")


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
    try:
        key = ApiKey(api_key)
    except ValueError:
        raise InvalidRequestError(f"unknown api key {api_key}") from None
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
# of fixed size is walked by its size instead: consecutive ones add up to one jump.
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


@cache
def _entity_walk(cls: type) -> _Skip:
    """The walk over one kio entity; raises InvalidRequestError at an impossible length."""
    flexible = cls.__flexible__
    steps: list[tuple[int, _Skip]] = []  # (fixed bytes before the step, the step)
    fixed = 0
    tagged: dict[int, _Skip] = {}
    for field in dataclasses.fields(cls):
        step = _field_walk(field, flexible)
        if "tag" in field.metadata:
            if not isinstance(step, int):  # a tagged value is skipped by its size anyway
                tagged[field.metadata["tag"]] = step
        elif isinstance(step, int):
            fixed += step
        else:
            steps.append((fixed, step))
            fixed = 0
    trailing = fixed

    def walk(frame: bytes, offset: int) -> int:
        for advance, step in steps:
            offset = step(frame, offset + advance)
        offset += trailing
        if flexible:
            offset = _walk_tagged_fields(tagged, frame, offset)
        return offset

    return walk


def _field_walk(field: dataclasses.Field, flexible: bool) -> _Skip | int:
    annotation, nullable = _unwrap_optional(field.type)
    if typing.get_origin(annotation) is tuple:
        element = typing.get_args(annotation)[0]
        if dataclasses.is_dataclass(element):
            return partial(_walk_array, flexible, _entity_walk(element))
        return partial(_walk_array, flexible, _value_walk(field.metadata["kafka_type"], flexible))
    if dataclasses.is_dataclass(annotation):
        walk = _entity_walk(annotation)
        return partial(_walk_nullable_struct, walk) if nullable else walk
    return _value_walk(field.metadata["kafka_type"], flexible)


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return next(a for a in typing.get_args(annotation) if a is not type(None)), True
    return annotation, False


def _value_walk(kafka_type: str, flexible: bool) -> _Skip | int:
    if kafka_type in _FIXED_SIZES:
        return _FIXED_SIZES[kafka_type]
    if kafka_type not in _LEGACY_LENGTH_READERS:
        raise NotImplementedError(f"no wire layout for kafka type {kafka_type!r}")
    if flexible:
        return _walk_compact_value
    return partial(_walk_legacy_value, _LEGACY_LENGTH_READERS[kafka_type])


def _walk_compact_value(frame: bytes, offset: int) -> int:
    length_plus_one, size = read_unsigned_varint(frame, offset)
    return offset + size + max(length_plus_one - 1, 0)


def _walk_legacy_value(read_length: Callable, frame: bytes, offset: int) -> int:
    length, size = read_length(frame, offset)
    return offset + size + max(length, 0)


def _walk_array(flexible: bool, walk_element: _Skip | int, frame: bytes, offset: int) -> int:
    # kio's own length readers, so that the length checked is the length kio will reserve.
    if flexible:
        count, size = read_compact_array_length(frame, offset)
        count = -1 if count is None else count
    else:
        count, size = read_legacy_array_length(frame, offset)
    offset += size
    if count < -1 or count > len(frame) - offset:
        raise InvalidRequestError(
            f"array length {count} at byte {offset - size} with {len(frame) - offset} bytes left"
        )
    if isinstance(walk_element, int):
        return offset + max(count, 0) * walk_element
    for _ in range(count):
        offset = walk_element(frame, offset)
    return offset


def _walk_nullable_struct(walk: _Skip, frame: bytes, offset: int) -> int:
    # A nullable struct is prefixed by an int8: -1 for null, 1 when present.
    marker, size = read_int8(frame, offset)
    return offset + size if marker < 0 else walk(frame, offset + size)


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
    return encode_frame(type(response).__header_schema__(correlation_id=correlation_id),
                        response)


def encode_response(correlation_id: int, response: Any) -> bytes:
    """Serializes a kio response with its header, size-prefixed, as one ``bytes``."""
    return b"".join(encode_response_chunks(correlation_id, response))
