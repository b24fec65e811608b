"""The compiled encoders write exactly the bytes kio writes, for every served message.

Every request and response class of every API and version the broker serves is drawn by
Hypothesis from kio's own types and encoded both ways; the bytes must match, or both
encoders must refuse the value. Large values are checked to travel by reference.
"""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from odradek.protocol.api import ApiKey, request_class, response_class
from odradek.protocol.encoder import BY_REFERENCE_MIN_BYTES, encode_frame, entity_encoder
from odradek.protocol.messages import build

from kafka_requests import SERVED_VERSIONS

SERVED_CLASSES = [(f"{ApiKey(key).name}-v{version}-{kind}", cls)
                  for key, version in SERVED_VERSIONS
                  for kind, cls in (("request", request_class(key, version)),
                                    ("response", response_class(key, version)))]


def kio_bytes(entity) -> bytes | type[Exception]:
    buffer = io.BytesIO()
    try:
        entity_writer(type(entity))(buffer, entity)
    except Exception as exc:  # noqa: BLE001 - which values kio refuses is what is compared
        return type(exc)
    return buffer.getvalue()


def compiled_bytes(entity) -> bytes | type[Exception]:
    buf = bytearray()
    refs: list = []
    try:
        entity_encoder(type(entity))(buf, refs, entity)
    except Exception as exc:  # noqa: BLE001
        return type(exc)
    return _assemble(buf, refs)


def _assemble(buf: bytearray, refs: list) -> bytes:
    out = bytearray()
    start = 0
    for position, value in refs:
        out += buf[start:position]
        out += value
        start = position
    return bytes(out + buf[start:])


@pytest.mark.parametrize("cls", [cls for _, cls in SERVED_CLASSES],
                         ids=[name for name, _ in SERVED_CLASSES])
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_compiled_encoder_writes_what_kio_writes(cls, data):
    entity = data.draw(st.from_type(cls))
    expected = kio_bytes(entity)
    if isinstance(expected, bytes):
        assert compiled_bytes(entity) == expected
    else:  # a value kio cannot write (a duration past int64) is refused by both
        assert not isinstance(compiled_bytes(entity), bytes)


@pytest.mark.parametrize("version", [4, 11, 12])
def test_large_records_are_referenced_not_copied(version):
    records = bytes(range(256)) * (BY_REFERENCE_MIN_BYTES // 256 + 1)
    response = build(response_class(ApiKey.FETCH, version), throttle_time=0, error_code=ErrorCode.none,
                     session_id=0, responses=[{"topic": "t", "partitions": [
                         {"partition_index": p, "error_code": ErrorCode.none,
                          "high_watermark": 10, "last_stable_offset": 10,
                          "log_start_offset": 0, "aborted_transactions": None,
                          "preferred_read_replica": -1, "records": records}
                         for p in range(2)]}])
    header_cls = response_class(ApiKey.FETCH, version).__header_schema__
    header = header_cls(correlation_id=42)

    chunks = encode_frame(header, response)

    assert sum(chunk is records for chunk in chunks) == 2
    frame = b"".join(chunks)
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    assert frame[4:] == kio_bytes(header) + kio_bytes(response)


def test_a_frame_without_large_values_is_one_buffer():
    response = build(response_class(ApiKey.PRODUCE, 9), throttle_time=0, responses=[
        {"name": "t", "partition_responses": [{"index": 0, "error_code": ErrorCode.none,
                                               "base_offset": 5, "log_append_time": -1,
                                               "log_start_offset": 0, "record_errors": [],
                                               "error_message": None}]}])
    header = response_class(ApiKey.PRODUCE, 9).__header_schema__(correlation_id=1)
    chunks = encode_frame(header, response)
    assert len(chunks) == 1
    assert bytes(chunks[0][4:]) == kio_bytes(header) + kio_bytes(response)
