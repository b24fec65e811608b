"""Kafka requests for tests: real kio-encoded requests and Hypothesis mutations of them.

Shared by the decoder fuzz tests (``tests/unit/protocol/test_fuzz_decoder.py``) and the
robustness tests that send the same mutants to a running broker
(``tests/integration/test_robustness.py``).
"""

from __future__ import annotations

import datetime
import io
import struct

from hypothesis import strategies as st
from kio.serial import entity_writer
from kio.static.primitive import Records, i64Timedelta

from odradek.protocol.api import SUPPORTED_APIS, ApiKey, request_class
from odradek.protocol.messages import build
from odradek.protocol.records import Record, build_batch

TOPIC = "fuzz"


INT32_MAX = 2**31 - 1
# Length fields as a hostile client would set them: int32 array and bytes lengths, int16
# string lengths, and unsigned varints (compact lengths, KIP-482) of the largest int32.
HUGE_INT32_LENGTHS = (INT32_MAX, 2**31 - 2, 2**30, 0x7FFF_0000, -2)
HUGE_INT16_LENGTHS = (0x7FFF, -2)
HUGE_VARINT = b"\xff\xff\xff\xff\x07"


# -- real requests -----------------------------------------------------------------------


def encode_request(api_key: int, version: int, correlation_id: int, body,
                   client_id: str | None = "fuzz") -> bytes:
    """A request frame's payload (header and body, no size prefix), as a client encodes it."""
    cls = request_class(api_key, version)
    header_cls = cls.__header_schema__
    buffer = io.BytesIO()
    entity_writer(header_cls)(buffer, header_cls(
        request_api_key=api_key, request_api_version=version,
        correlation_id=correlation_id, client_id=client_id))
    entity_writer(cls)(buffer, body)
    return buffer.getvalue()


def record_batch(value: bytes = b"value") -> bytes:
    return build_batch([
        Record(0, 1_700_000_000_000, b"key-0", value, (("trace", b"1"),)),
        Record(1, 1_700_000_000_005, None, b"", ()),
    ])


def produce_request(version: int, records: bytes, *, acks: int = -1, topic: str = TOPIC,
                    correlation_id: int = 1) -> bytes:
    body = build(request_class(ApiKey.PRODUCE, version), transactional_id=None, acks=acks,
                 timeout=datetime.timedelta(seconds=5), topic_data=[
                     {"name": topic, "partition_data": [{"index": 0, "records": records}]}])
    return encode_request(ApiKey.PRODUCE, version, correlation_id, body)


def fetch_request(version: int, *, topic: str = TOPIC, max_wait_ms: int = 0,
                  correlation_id: int = 1) -> bytes:
    body = build(request_class(ApiKey.FETCH, version), cluster_id=None, replica_id=-1,
                 max_wait=max_wait_ms, min_bytes=1, max_bytes=1024 * 1024, isolation_level=0,
                 session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
                 topics=[{"topic": topic, "partitions": [
                     {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                      "last_fetched_epoch": -1, "log_start_offset": -1,
                      "partition_max_bytes": 65536}]}])
    return encode_request(ApiKey.FETCH, version, correlation_id, body)


def list_offsets_request(version: int, *, topic: str = TOPIC, correlation_id: int = 1) -> bytes:
    body = build(request_class(ApiKey.LIST_OFFSETS, version), replica_id=-1,
                 isolation_level=0, topics=[{"name": topic, "partitions": [
                     {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1},
                     {"partition_index": 1, "current_leader_epoch": -1, "timestamp": -2}]}])
    return encode_request(ApiKey.LIST_OFFSETS, version, correlation_id, body)


def metadata_request(version: int, topics: list[str] | None = (TOPIC,), *,
                     correlation_id: int = 1) -> bytes:
    body = build(request_class(ApiKey.METADATA, version),
                 topics=None if topics is None else [
                     {"name": name, "topic_id": None} for name in topics],
                 allow_auto_topic_creation=True, include_cluster_authorized_operations=False,
                 include_topic_authorized_operations=False)
    return encode_request(ApiKey.METADATA, version, correlation_id, body)


def api_versions_request(version: int, *, correlation_id: int = 1) -> bytes:
    body = build(request_class(ApiKey.API_VERSIONS, version),
                 client_software_name="odradek-fuzz", client_software_version="1.0")
    return encode_request(ApiKey.API_VERSIONS, version, correlation_id, body)


# Old (fixed-width lengths) and flexible (compact lengths, tagged fields) versions of each.
REAL_REQUESTS: tuple[bytes, ...] = (
    *(produce_request(v, record_batch()) for v in (3, 7, 9)),
    *(fetch_request(v) for v in (4, 7, 11, 12)),
    *(list_offsets_request(v) for v in (1, 4, 7)),
    metadata_request(0),
    metadata_request(4, None),
    *(metadata_request(v) for v in (9, 12)),
    api_versions_request(0),
    api_versions_request(3),
)


# Every API and version the broker serves, with bodies Hypothesis builds from kio's types
# (kio's primitive types resolve on their own; a Records field is any bytes here).
st.register_type_strategy(Records, st.binary(max_size=64))
# Durations travel as whole milliseconds, and kio cannot read back the far ends of its own
# int64 duration range (near timedelta.max its reader fails: "timedelta milliseconds
# overflow"), though its strategy draws them. A client sends whole milliseconds within any
# sane range, so durations are drawn within 100,000 years.
_MAX_DURATION_MS = 100_000 * 365 * 24 * 3600 * 1000
st.register_type_strategy(i64Timedelta, st.integers(-_MAX_DURATION_MS, _MAX_DURATION_MS).map(
    lambda ms: i64Timedelta.parse(datetime.timedelta(milliseconds=ms))))
SERVED_VERSIONS = tuple((key, version) for key, versions in SUPPORTED_APIS.items()
                        for version in range(versions.min_version, versions.max_version + 1))


def served_requests(api_key: int, version: int) -> st.SearchStrategy[bytes]:
    return st.builds(encode_request, st.just(api_key), st.just(version),
                     st.integers(-2**31, 2**31 - 1), st.from_type(request_class(api_key, version)))


any_served_request = st.sampled_from(SERVED_VERSIONS).flatmap(lambda kv: served_requests(*kv))


# -- mutations ---------------------------------------------------------------------------


def _position(draw, frame: bytearray, *, room: int = 0) -> int:
    return draw(st.integers(0, max(0, len(frame) - room)))


def _flip_byte(draw, frame: bytearray) -> bytearray:
    if frame:
        frame[_position(draw, frame, room=1) % len(frame)] ^= draw(st.integers(1, 255))
    return frame


def _truncate(draw, frame: bytearray) -> bytearray:
    return frame[:_position(draw, frame)]


def _insert_bytes(draw, frame: bytearray) -> bytearray:
    at = _position(draw, frame)
    return frame[:at] + draw(st.binary(min_size=1, max_size=16)) + frame[at:]


def _delete_bytes(draw, frame: bytearray) -> bytearray:
    at = _position(draw, frame)
    return frame[:at] + frame[at + draw(st.integers(1, 16)):]


def overwrite(frame: bytearray, at: int, data: bytes) -> bytearray:
    return frame[:at] + data + frame[at + len(data):]


def _set_api_key(draw, frame: bytearray) -> bytearray:
    key = draw(st.one_of(st.sampled_from([*ApiKey, 999, -1]), st.integers(-2**15, 2**15 - 1)))
    return overwrite(frame, 0, struct.pack(">h", key))


def _set_api_version(draw, frame: bytearray) -> bytearray:
    version = draw(st.one_of(st.integers(-1, 20), st.integers(-2**15, 2**15 - 1)))
    return overwrite(frame, 2, struct.pack(">h", version))


def _huge_length(draw, frame: bytearray) -> bytearray:
    data = draw(st.one_of(
        st.sampled_from(HUGE_INT32_LENGTHS).map(struct.Struct(">i").pack),
        st.sampled_from(HUGE_INT16_LENGTHS).map(struct.Struct(">h").pack),
        st.just(HUGE_VARINT),
    ))
    return overwrite(frame, _position(draw, frame), data)


MUTATIONS = (_flip_byte, _truncate, _insert_bytes, _delete_bytes, _set_api_key,
             _set_api_version, _huge_length)


@st.composite
def mutated_requests(draw, requests: st.SearchStrategy[bytes] = st.sampled_from(REAL_REQUESTS)
                     ) -> bytes:
    """A request with one to three mutations applied in turn."""
    frame = bytearray(draw(requests))
    for mutate in draw(st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=3)):
        frame = mutate(draw, frame)
    return bytes(frame)
