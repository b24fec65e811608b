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

import io
import struct
from dataclasses import dataclass
from typing import Any

from kio.serial import entity_reader, entity_writer

from odradek.protocol.api import ApiKey, SUPPORTED_APIS, request_class

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

    def feed(self, data: bytes) -> list[bytes]:
        """Adds received bytes; returns the payloads of the frames now complete."""
        buffer = self._buffer
        buffer += data
        frames = []
        position = 0
        available = len(buffer)
        while available - position >= 4:
            (size,) = _SIZE.unpack_from(buffer, position)
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
            frames.append(bytes(buffer[position + 4 : end]))
            position = end
        if position:
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
        body, size = entity_reader(cls)(frame, offset)
    except Exception as exc:  # kio raises a variety of decode errors on malformed input
        raise InvalidRequestError(
            f"malformed {key.name} v{api_version} request: {exc!r}"
        ) from exc
    # Bytes after the body are ignored, as Kafka ignores them: librdkafka's all-topics
    # Metadata request carries a few.
    return Request(key, api_version, correlation_id, header.client_id, body)


def encode_response(correlation_id: int, response: Any) -> bytes:
    """Serializes a kio response with its header, size-prefixed, ready for the socket."""
    cls = type(response)
    header_cls = cls.__header_schema__
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    entity_writer(header_cls)(buffer, header_cls(correlation_id=correlation_id))
    entity_writer(cls)(buffer, response)
    view = buffer.getbuffer()
    _SIZE.pack_into(view, 0, len(view) - 4)
    del view
    return buffer.getvalue()
