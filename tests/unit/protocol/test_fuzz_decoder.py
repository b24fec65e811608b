"""Bad input never gets past the decoder as anything but a Kafka error.

Real requests (kio-encoded Produce, Fetch, ListOffsets, Metadata and ApiVersions in old and
flexible versions) are mutated the ways a broken client or a hostile peer would send them:
flipped, truncated, padded and cut bytes, rewritten api keys and versions, and length fields
claiming 2^31 elements. ``parse_request`` must answer every one with a ``Request`` or with
one of the two errors the connection knows how to handle, fast and without allocating what
a length field claims. ``FrameDecoder`` must split any byte stream, in any chunking, exactly
as the size prefixes say, and refuse a bad prefix as soon as it is complete.

The request builders and the mutation strategy are shared with
``tests/integration/test_robustness.py``, which sends the same mutants to a running broker.
"""

from __future__ import annotations

import os
import resource
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.api import SUPPORTED_APIS, ApiKey, request_class
from odradek.protocol.framing import (
    FrameDecoder,
    FrameTooLargeError,
    FramingError,
    InvalidRequestError,
    Request,
    UnsupportedVersionError,
    parse_request,
)

from kafka_requests import (
    HUGE_INT32_LENGTHS,
    HUGE_INT16_LENGTHS,
    HUGE_VARINT,
    encode_request,
    REAL_REQUESTS,
    SERVED_VERSIONS,
    overwrite,
    any_served_request,
    mutated_requests,
)

# Parsing or refusing one of these requests takes microseconds; only a decoder that walked
# or built what a length field claims would take this long. Generous, for loaded machines.
FAIL_FAST_SECONDS = 1.0
# Parsing one of these ~100-byte requests needs kilobytes; reserving what a length field
# claims would be gigabytes (2^31 elements of 8-byte slots is 16 GiB).
ADDRESS_SPACE_HEADROOM_BYTES = 512 * 1024**2
# The ~8,500 huge-length mutants take well under a second.
CHILD_TIMEOUT_SECONDS = 60


# -- parse_request -----------------------------------------------------------------------


def parse_or_refuse(frame: bytes) -> Request | FramingError | UnsupportedVersionError:
    """What the connection gets for a frame: a request, or one of the errors it handles."""
    try:
        return parse_request(frame)
    except (InvalidRequestError, UnsupportedVersionError) as exc:
        return exc


@pytest.mark.parametrize("frame", REAL_REQUESTS)
def test_every_real_request_parses(frame):
    assert isinstance(parse_request(frame), Request)


@pytest.mark.parametrize(("api_key", "version"), SERVED_VERSIONS,
                         ids=[f"{ApiKey(k).name}-v{v}" for k, v in SERVED_VERSIONS])
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_served_version_parses_what_a_client_encodes(api_key, version, data):
    """The length check never refuses a well-formed request, whatever its API."""
    body = data.draw(st.from_type(request_class(api_key, version)))
    request = parse_request(encode_request(api_key, version, 7, body))
    assert (request.api_key, request.api_version, request.correlation_id) == (
        api_key, version, 7)
    assert request.body == body


@settings(max_examples=1500, deadline=None)
@given(mutated_requests())
def test_a_mutated_request_parses_or_is_refused_with_a_kafka_error(frame):
    assert_parsed_or_refused_fast(frame)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_requests(any_served_request))
def test_a_mutated_request_of_any_served_api_parses_or_is_refused_with_a_kafka_error(frame):
    assert_parsed_or_refused_fast(frame)


def assert_parsed_or_refused_fast(frame: bytes) -> None:
    started = time.perf_counter()
    outcome = parse_or_refuse(frame)
    assert time.perf_counter() - started < FAIL_FAST_SECONDS
    if isinstance(outcome, Request):
        api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame)
        assert (outcome.api_key, outcome.api_version, outcome.correlation_id) == (
            api_key, api_version, correlation_id)
        assert api_version in SUPPORTED_APIS[outcome.api_key]
    elif isinstance(outcome, UnsupportedVersionError):
        # Only a known API in a version outside its range; the error names the request so
        # that ApiVersions can still be answered (KIP-511).
        assert outcome.api_version not in SUPPORTED_APIS.get(ApiKey(outcome.api_key), ())
        assert outcome.correlation_id == struct.unpack_from(">i", frame, 4)[0]


def huge_length_mutants() -> Iterator[bytes]:
    """Every real request with, at every position, every huge length encoding."""
    for frame in REAL_REQUESTS:
        for data in (*map(struct.Struct(">i").pack, HUGE_INT32_LENGTHS),
                     *map(struct.Struct(">h").pack, HUGE_INT16_LENGTHS), HUGE_VARINT):
            for at in range(len(frame)):
                yield bytes(overwrite(bytearray(frame), at, data))


def parse_huge_length_mutants_in_limited_address_space() -> None:
    """Runs in a child process: a parser that reserved what a length field claims would get
    ENOMEM here on any machine, not only on one with less memory than the claim."""
    with open("/proc/self/status") as status:
        vm_size_kib = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
    limit = vm_size_kib * 1024 + ADDRESS_SPACE_HEADROOM_BYTES
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    for frame in huge_length_mutants():
        assert_parsed_or_refused_fast(frame)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_a_length_field_claiming_2_to_the_31_elements_fails_fast_without_reserving_them():
    # A child process: a failed reservation in a native decoder aborts the process it is in.
    child = subprocess.run(
        [sys.executable, "-c",
         "import test_fuzz_decoder as fuzz; "
         "fuzz.parse_huge_length_mutants_in_limited_address_space()"],
        cwd=Path(__file__).parent, capture_output=True, text=True,
        timeout=CHILD_TIMEOUT_SECONDS,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    assert child.returncode == 0, child.stderr[-3000:]


@settings(max_examples=500)
@given(st.binary(max_size=256))
def test_random_bytes_parse_or_are_refused_with_a_kafka_error(frame):
    parse_or_refuse(frame)


# -- FrameDecoder ------------------------------------------------------------------------


def reference_frames(stream: bytes, max_frame_bytes: int) -> tuple[list[bytes], int | None]:
    """The frames a stream holds, and the length of the stream up to and including a bad
    size prefix (None if there is none before the stream ends)."""
    frames, position = [], 0
    while len(stream) - position >= 4:
        (size,) = struct.unpack_from(">i", stream, position)
        if size < 0 or size > max_frame_bytes:
            return frames, position + 4
        end = position + 4 + size
        if end > len(stream):
            break
        frames.append(stream[position + 4:end])
        position = end
    return frames, None


def _framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


@st.composite
def chunked(draw, stream: bytes) -> list[bytes]:
    """``stream`` cut at arbitrary points, including empty chunks."""
    cuts = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    bounds = [0, *cuts, len(stream)]
    return [stream[a:b] for a, b in zip(bounds, bounds[1:])]


@settings(max_examples=300)
@given(st.data(), st.lists(st.binary(max_size=64), max_size=8))
def test_frames_are_reassembled_exactly_in_any_chunking(data, payloads):
    decoder = FrameDecoder(64)
    received = []
    for chunk in data.draw(chunked(b"".join(map(_framed, payloads)))):
        received += decoder.feed(chunk)
    assert received == payloads


@settings(max_examples=1000)
@given(
    st.data(),
    st.integers(0, 64),
    # Valid frames, garbage and huge or negative size prefixes, in any order.
    st.lists(st.one_of(
        st.binary(max_size=80).map(_framed),
        st.binary(max_size=12),
        st.sampled_from([*HUGE_INT32_LENGTHS, -1, 65]).map(struct.Struct(">i").pack),
    ), max_size=8),
)
def test_a_byte_stream_yields_its_frames_then_refuses_the_first_bad_size(data, max_frame_bytes,
                                                                          segments):
    stream = b"".join(segments)
    expected, error_at = reference_frames(stream, max_frame_bytes)
    decoder = FrameDecoder(max_frame_bytes)
    received, fed = [], 0
    for chunk in data.draw(chunked(stream)):
        fed += len(chunk)
        try:
            received += decoder.feed(chunk)
        except FramingError as exc:
            # Refused in the very chunk that completes the bad prefix: nothing more of a
            # frame that can never be accepted is buffered.
            assert error_at is not None and fed - len(chunk) < error_at <= fed
            (size,) = struct.unpack_from(">i", stream, error_at - 4)
            assert isinstance(exc, InvalidRequestError if size < 0 else FrameTooLargeError)
            assert received == expected[:len(received)]
            return
    assert error_at is None
    assert received == expected
