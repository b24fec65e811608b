"""Framing: size prefixes, headers, version checks, without sockets."""

import io
import struct

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from odradek.protocol.api import ApiKey, request_class, response_class
from odradek.protocol.framing import (
    FrameDecoder,
    FrameTooLargeError,
    InvalidRequestError,
    UnsupportedVersionError,
    encode_response,
    parse_request,
)
from odradek.protocol.messages import build


def encode_request(api_key, version, correlation_id, body, client_id="test"):
    cls = request_class(api_key, version)
    buffer = io.BytesIO()
    header_cls = cls.__header_schema__
    entity_writer(header_cls)(buffer, header_cls(
        request_api_key=api_key, request_api_version=version,
        correlation_id=correlation_id, client_id=client_id))
    entity_writer(cls)(buffer, body)
    return buffer.getvalue()


def metadata_request(version=12):
    return build(request_class(ApiKey.METADATA, version), topics=None,
                 allow_auto_topic_creation=True, include_topic_authorized_operations=False)


def test_frames_are_split_across_arbitrary_chunks():
    payloads = [b"a" * 5, b"", b"b" * 300]
    stream = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
    decoder = FrameDecoder(1024)
    received = []
    for i in range(len(stream)):
        received += decoder.feed(stream[i : i + 1])
    assert received == payloads


def test_a_frame_over_the_limit_is_refused_before_it_is_buffered():
    decoder = FrameDecoder(100)
    with pytest.raises(FrameTooLargeError):
        decoder.feed(struct.pack(">i", 101))


def test_a_negative_size_is_invalid():
    with pytest.raises(InvalidRequestError):
        FrameDecoder(100).feed(struct.pack(">i", -1))


def test_a_request_round_trips_through_parse():
    frame = encode_request(ApiKey.METADATA, 12, 7, metadata_request())
    request = parse_request(frame)
    assert (request.api_key, request.api_version, request.correlation_id) == (ApiKey.METADATA, 12, 7)
    assert request.client_id == "test"
    assert request.body.topics is None


def test_an_unsupported_version_names_the_correlation_id():
    frame = encode_request(ApiKey.API_VERSIONS, 4, 42, build(
        request_class(ApiKey.API_VERSIONS, 4), client_software_name="x",
        client_software_version="1"))
    with pytest.raises(UnsupportedVersionError) as info:
        parse_request(frame)
    assert info.value.correlation_id == 42


@pytest.mark.parametrize("frame", [b"", b"\x00\x03", struct.pack(">hhi", 999, 0, 1)])
def test_garbage_is_an_invalid_request(frame):
    with pytest.raises(InvalidRequestError):
        parse_request(frame)


def test_a_truncated_body_is_invalid():
    frame = encode_request(ApiKey.METADATA, 12, 7, metadata_request())
    with pytest.raises(InvalidRequestError):
        parse_request(frame[:-2])


def test_bytes_after_the_body_are_ignored_as_kafka_does():
    frame = encode_request(ApiKey.METADATA, 12, 7, metadata_request())
    assert parse_request(frame + b"\x00\x00\x00").body.topics is None


def test_api_versions_responses_use_header_v0_even_when_flexible():
    response = build(response_class(ApiKey.API_VERSIONS, 3), error_code=ErrorCode.none,
                     api_keys=[{"api_key": 0, "min_version": 3, "max_version": 9}],
                     throttle_time=0)
    frame = encode_response(5, response)
    (size, correlation_id) = struct.unpack_from(">ii", frame)
    assert size == len(frame) - 4 and correlation_id == 5
    decoded, _ = entity_reader(type(response))(frame, 8)  # no tagged-field byte after the id
    assert decoded.api_keys[0].max_version == 9
