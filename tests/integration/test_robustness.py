"""Bad input never takes the broker down.

Garbage, truncated frames, frames over ``socket.request.max.bytes``, negative sizes, unknown
API keys, unsupported versions and malformed bodies get the Kafka error response or a
closed connection, and a connection opened before the attack — a raw one, and a real
producer and consumer — keeps being served. A request the broker can parse but fails on is
a broker bug: that connection is closed with an error in the log, never the event loop.

Every receive is bounded by a timeout; the Hypothesis test sends a bounded number of
mutants of the unit fuzz test's real requests (``tests/unit/protocol/test_fuzz_decoder.py``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import selectors
import socket
import struct
import time
from pathlib import Path

import confluent_kafka
import kafka
import pytest
from hypothesis import HealthCheck, given, settings
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from odradek.protocol.api import SUPPORTED_APIS, ApiKey, advertised_versions, response_class
from odradek.testing.embedded import EmbeddedBroker

# The real requests and their mutations are the unit fuzz test's: the broker must survive
# everything parse_request has to refuse.
import kafka_requests as fuzz

# On loopback an answer or a close takes milliseconds; this only bounds a broken broker.
RECV_TIMEOUT_SECONDS = 5.0
# How long the fuzz test waits for an answer that may rightly never come (acks=0, a long
# poll, a frame the broker is still waiting to complete).
QUIET_SECONDS = 0.2
CLIENT_TIMEOUT_SECONDS = 15.0
SMALL_REQUEST_MAX_BYTES = 64 * 1024
DROPPED_CONNECTIONS = 1000
_SIZE = struct.Struct(">i")


# -- raw connections -----------------------------------------------------------------------


class Closed(Exception):
    """The broker closed the connection."""


class RawConnection:
    """A Kafka connection without a client: frames in and out, every receive bounded."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=RECV_TIMEOUT_SECONDS)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_frame(self, payload: bytes) -> None:
        self.send_bytes(_SIZE.pack(len(payload)) + payload)

    def recv_frame(self, timeout: float = RECV_TIMEOUT_SECONDS) -> bytes:
        """The next frame's payload; raises Closed, or TimeoutError when nothing comes."""
        deadline = time.monotonic() + timeout
        (size,) = _SIZE.unpack(self._recv_exactly(4, deadline))
        return self._recv_exactly(size, deadline)

    def _recv_exactly(self, count: int, deadline: float) -> bytes:
        data = bytearray()
        while len(data) < count:
            self.sock.settimeout(max(deadline - time.monotonic(), 0.001))
            try:
                chunk = self.sock.recv(count - len(data))
            except ConnectionResetError:
                raise Closed from None
            except socket.timeout:
                raise TimeoutError(f"{len(data)} of {count} bytes received") from None
            if not chunk:
                raise Closed
            data += chunk
        return bytes(data)

    def request(self, api_key: ApiKey, version: int, payload: bytes):
        """Sends a request and decodes its response (header v0 for ApiVersions, KIP-511)."""
        self.send_frame(payload)
        return decode_response(api_key, version, self.recv_frame())

    def assert_closed_by_broker(self) -> None:
        """Nothing (more) is answered: the next receive finds the connection closed."""
        with pytest.raises(Closed):
            self.recv_frame()

    def close(self) -> None:
        self.sock.close()


def decode_response(api_key: ApiKey, version: int, frame: bytes) -> tuple[int, object]:
    cls = response_class(api_key, version)
    header, offset = entity_reader(cls.__header_schema__)(frame, 0)
    body, _ = entity_reader(cls)(frame, offset)
    return header.correlation_id, body


def api_versions_round_trip(connection: RawConnection, correlation_id: int = 1) -> None:
    correlation, body = connection.request(
        ApiKey.API_VERSIONS, 3, fuzz.api_versions_request(3, correlation_id=correlation_id))
    assert correlation == correlation_id
    assert body.error_code == ErrorCode.none
    assert {k.api_key for k in body.api_keys} == set(SUPPORTED_APIS)


def assert_still_serving(broker: EmbeddedBroker, bystander: RawConnection) -> None:
    """The connection opened before the attack and a new one are both answered, and the
    broker's event loop still runs coroutines."""
    api_versions_round_trip(bystander, correlation_id=1001)
    fresh = RawConnection(broker.port)
    try:
        api_versions_round_trip(fresh, correlation_id=1002)
    finally:
        fresh.close()
    assert broker.call(asyncio.sleep(0, result="alive")) == "alive"


@pytest.fixture
def bystander(odradek_broker: EmbeddedBroker):
    connection = RawConnection(odradek_broker.port)
    api_versions_round_trip(connection)
    yield connection
    connection.close()


@pytest.fixture
def no_loop_errors(caplog):
    """Fails the test if an exception reached the event loop's exception handler."""
    caplog.set_level(logging.WARNING)
    yield caplog
    escaped = [r for r in caplog.records if r.name == "asyncio" and r.levelno >= logging.ERROR]
    assert not escaped, [r.getMessage() for r in escaped]


@pytest.fixture
def attacker(odradek_broker: EmbeddedBroker, bystander: RawConnection, no_loop_errors):
    """A new connection for the attack; afterwards the bystander must still be served."""
    connection = RawConnection(odradek_broker.port)
    yield connection
    connection.close()
    assert_still_serving(odradek_broker, bystander)


@pytest.fixture
def fuzz_topic(create_topic) -> str:
    """The topic the real requests name, so that they reach the produce and fetch paths."""
    return create_topic(fuzz.TOPIC)


def header_only(api_key: int, api_version: int, correlation_id: int = 9) -> bytes:
    """A request header v1 (client id "x") followed by nothing."""
    return struct.pack(">hhih", api_key, api_version, correlation_id, 1) + b"x"


# -- attacks that end in a closed connection -----------------------------------------------


def send_random_garbage(connection: RawConnection) -> None:
    # Seeded: its first four bytes, read as a size, are over the 100 MiB default.
    connection.send_bytes(random.Random(7).randbytes(4096))


def send_an_http_request(connection: RawConnection) -> None:
    # "GET " read as a size is 1,195,725,856 bytes.
    connection.send_bytes(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")


def send_a_tls_client_hello(connection: RawConnection) -> None:
    connection.send_bytes(bytes.fromhex("160301020001") + bytes(512))


def send_a_truncated_frame_then_half_close(connection: RawConnection) -> None:
    frame = fuzz.metadata_request(12)
    connection.send_bytes(_SIZE.pack(len(frame)) + frame[: len(frame) // 2])
    connection.sock.shutdown(socket.SHUT_WR)


def send_a_negative_size(connection: RawConnection) -> None:
    connection.send_bytes(_SIZE.pack(-1) + bytes(16))


def send_an_unknown_api_key(connection: RawConnection) -> None:
    connection.send_frame(header_only(999, 0))


def send_an_unsupported_metadata_version(connection: RawConnection) -> None:
    connection.send_frame(header_only(ApiKey.METADATA, 99) + bytes(8))


# An API Kafka defines (and kio knows) that odradek does not serve.
NOT_SERVED_API_KEY = 57  # UpdateFeatures


def send_a_known_api_that_is_not_served(connection: RawConnection) -> None:
    assert NOT_SERVED_API_KEY not in SUPPORTED_APIS
    connection.send_frame(header_only(NOT_SERVED_API_KEY, 0))


def send_a_header_with_a_malformed_body(connection: RawConnection) -> None:
    # Metadata v12: header v2 of 15 bytes, then "one topic" and nothing of it.
    connection.send_frame(fuzz.metadata_request(12)[:15] + b"\x02")


def send_a_frame_shorter_than_a_header(connection: RawConnection) -> None:
    connection.send_frame(b"\x00\x03\x00")


def send_an_array_claiming_2_to_the_31_elements(connection: RawConnection) -> None:
    # Metadata v0: header of 14 bytes, then the topics array length.
    connection.send_frame(fuzz.metadata_request(0)[:14] + _SIZE.pack(2**31 - 1))


def send_a_compact_array_claiming_2_to_the_35_elements(connection: RawConnection) -> None:
    # Metadata v12: header v2 of 15 bytes, then the topics array length as an unsigned
    # varint (KIP-482) of 35 bits, 2^35 - 1: slots for it would take 256 GiB.
    connection.send_frame(fuzz.metadata_request(12)[:15] + b"\xff\xff\xff\xff\x7f")


def send_a_size_over_socket_request_max_bytes(connection: RawConnection) -> None:
    # Only the size: the broker refuses the frame before reading (or buffering) its body.
    connection.send_bytes(_SIZE.pack(SMALL_REQUEST_MAX_BYTES + 1))


CLOSING_ATTACKS = [
    send_random_garbage,
    send_an_http_request,
    send_a_tls_client_hello,
    send_a_truncated_frame_then_half_close,
    send_a_negative_size,
    send_an_unknown_api_key,
    send_an_unsupported_metadata_version,
    send_a_known_api_that_is_not_served,
    send_a_header_with_a_malformed_body,
    send_a_frame_shorter_than_a_header,
    send_an_array_claiming_2_to_the_31_elements,
    send_a_compact_array_claiming_2_to_the_35_elements,
]


@pytest.mark.parametrize("attack", CLOSING_ATTACKS, ids=lambda a: a.__name__)
def test_bad_input_closes_only_its_own_connection(attack, attacker):
    attack(attacker)
    attacker.assert_closed_by_broker()


@pytest.mark.odradek_config(socket_request_max_bytes=SMALL_REQUEST_MAX_BYTES)
def test_a_frame_over_socket_request_max_bytes_is_refused_before_its_body_is_sent(attacker):
    send_a_size_over_socket_request_max_bytes(attacker)
    attacker.assert_closed_by_broker()


@pytest.mark.odradek_config(socket_request_max_bytes=SMALL_REQUEST_MAX_BYTES)
def test_a_frame_at_socket_request_max_bytes_is_served(odradek_broker, attacker):
    # Kafka ignores bytes after the body; padding fills the frame to the limit exactly.
    frame = fuzz.api_versions_request(3, correlation_id=5)
    attacker.send_frame(frame + bytes(SMALL_REQUEST_MAX_BYTES - len(frame)))
    correlation_id, body = decode_response(ApiKey.API_VERSIONS, 3, attacker.recv_frame())
    assert (correlation_id, body.error_code) == (5, ErrorCode.none)


# -- attacks that get a Kafka error and keep the connection --------------------------------


def test_api_versions_of_an_unknown_version_is_answered_in_v0_with_the_versions_served(
        attacker):
    # KIP-511: the client learns which versions to retry with; the connection stays open.
    attacker.send_frame(header_only(ApiKey.API_VERSIONS, 99, correlation_id=42) + bytes(3))
    correlation_id, body = decode_response(ApiKey.API_VERSIONS, 0, attacker.recv_frame())
    assert correlation_id == 42
    assert body.error_code == ErrorCode.unsupported_version
    assert {(k.api_key, k.min_version, k.max_version) for k in body.api_keys} == {
        (key, advertised_versions(key).min_version, advertised_versions(key).max_version)
        for key in SUPPORTED_APIS}
    api_versions_round_trip(attacker)


@pytest.mark.parametrize("version", [3, 9])
def test_a_produce_with_a_corrupt_crc_gets_corrupt_message_and_the_connection_stays_open(
        fuzz_topic, attacker, version):
    batch = bytearray(fuzz.record_batch())
    batch[-1] ^= 0xFF  # in the CRC'd range: the last byte of the last record
    correlation_id, body = attacker.request(
        ApiKey.PRODUCE, version, fuzz.produce_request(version, bytes(batch), correlation_id=3))
    assert correlation_id == 3
    [topic] = body.responses
    [partition] = topic.partition_responses
    assert (topic.name, partition.index) == (fuzz_topic, 0)
    assert partition.error_code == ErrorCode.corrupt_message
    api_versions_round_trip(attacker)


# -- broker bugs close the connection, never the loop --------------------------------------


def _failing_sync_handler(ctx, request):
    raise RuntimeError("handler bug")


async def _failing_async_handler(ctx, request):
    await asyncio.sleep(0)
    raise RuntimeError("handler bug")


def _unencodable_response_handler(ctx, request):
    return object()


@pytest.mark.parametrize("handler", [
    _failing_sync_handler, _failing_async_handler, _unencodable_response_handler,
], ids=["raises", "raises-after-await", "returns-an-unencodable-response"])
def test_a_failing_handler_closes_its_connection_with_an_error_in_the_log(
        odradek_broker, monkeypatch, attacker, no_loop_errors, handler):
    monkeypatch.setitem(odradek_broker.broker.dispatcher.handlers, ApiKey.LIST_OFFSETS, handler)
    # Pipelined behind it: another failing request and one that would succeed. Responses go
    # out in request order, so nothing is answered after the failure.
    attacker.send_bytes(b"".join(_SIZE.pack(len(frame)) + frame for frame in (
        fuzz.list_offsets_request(7, correlation_id=1),
        fuzz.list_offsets_request(7, correlation_id=2),
        fuzz.api_versions_request(3, correlation_id=3),
    )))
    attacker.assert_closed_by_broker()
    errors = [r for r in no_loop_errors.records
              if r.name == "odradek.server.connection" and r.levelno == logging.ERROR]
    assert errors and errors[0].exc_info is not None


def test_a_failing_handler_does_not_hold_back_requests_of_other_connections(
        odradek_broker, monkeypatch, bystander, no_loop_errors):
    monkeypatch.setitem(odradek_broker.broker.dispatcher.handlers, ApiKey.LIST_OFFSETS,
                        _failing_async_handler)
    connections = [RawConnection(odradek_broker.port) for _ in range(20)]
    for connection in connections:
        connection.send_frame(fuzz.list_offsets_request(7))
    for connection in connections:
        connection.assert_closed_by_broker()
        connection.close()
    assert_still_serving(odradek_broker, bystander)


# -- many connections ----------------------------------------------------------------------


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def open_and_drop_connections(port: int, count: int) -> None:
    """A burst of ``count`` clients that connect at once and go away: a third after half a
    request, half with an RST (as a crashed client's kernel sends) rather than a FIN."""
    sockets = []
    with selectors.DefaultSelector() as selector:
        for _ in range(count):
            sock = socket.socket()
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", port))
            selector.register(sock, selectors.EVENT_WRITE)
            sockets.append(sock)
        deadline = time.monotonic() + RECV_TIMEOUT_SECONDS
        connected = 0
        while connected < count and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=deadline - time.monotonic()):
                selector.unregister(key.fileobj)
                connected += 1
    assert connected == count
    for i, sock in enumerate(sockets):
        if i % 3 == 1:
            sock.send(_SIZE.pack(100) + b"partial")
        if i % 2 == 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs Linux /proc")
def test_a_thousand_dropped_connections_leave_no_trace(odradek_broker, bystander,
                                                       no_loop_errors):
    before = _open_descriptors()
    open_and_drop_connections(odradek_broker.port, DROPPED_CONNECTIONS)
    # The broker closes its side of each as it notices; the process's descriptors (both
    # ends live here) come back to where they were.
    deadline = time.monotonic() + RECV_TIMEOUT_SECONDS
    while _open_descriptors() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _open_descriptors() <= before
    assert_still_serving(odradek_broker, bystander)


# -- real clients through every attack -----------------------------------------------------


@pytest.mark.odradek_config(socket_request_max_bytes=SMALL_REQUEST_MAX_BYTES)
def test_a_real_producer_and_consumer_are_served_through_every_attack(
        odradek_broker, create_topic, no_loop_errors):
    topic = create_topic("bystanders")
    bootstrap = odradek_broker.bootstrap_servers
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                   fetch_max_wait_ms=100)
    try:
        partition = kafka.TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek(partition, 0)
        produce(producer, topic, b"before")
        assert consume(consumer, 1) == [b"before"]

        for attack in [*CLOSING_ATTACKS, send_a_size_over_socket_request_max_bytes]:
            connection = RawConnection(odradek_broker.port)
            attack(connection)
            connection.assert_closed_by_broker()
            connection.close()
        open_and_drop_connections(odradek_broker.port, DROPPED_CONNECTIONS)

        produce(producer, topic, b"after")
        assert consume(consumer, 1) == [b"after"]
    finally:
        consumer.close()
        producer.flush(CLIENT_TIMEOUT_SECONDS)


def produce(producer: confluent_kafka.Producer, topic: str, value: bytes) -> None:
    errors = []
    producer.produce(topic, value, on_delivery=lambda error, _: errors.append(error))
    assert producer.flush(CLIENT_TIMEOUT_SECONDS) == 0
    assert errors == [None]


def consume(consumer: kafka.KafkaConsumer, count: int) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + CLIENT_TIMEOUT_SECONDS
    while len(values) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            values += [record.value for record in records]
    return values


# -- fuzzing the running broker ------------------------------------------------------------


@settings(max_examples=200, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(frame=fuzz.mutated_requests())
def test_mutated_requests_never_stop_the_broker_serving_others(
        odradek_broker, fuzz_topic, bystander, no_loop_errors, frame):
    connection = RawConnection(odradek_broker.port)
    try:
        connection.send_frame(frame)
        try:
            response = connection.recv_frame(QUIET_SECONDS)
        except (Closed, TimeoutError):
            pass
        else:
            # An answer is to this request: its correlation id comes first (KIP-511 or not).
            assert response[:4] == frame[4:8]
    finally:
        connection.close()
    api_versions_round_trip(bystander)


def test_the_fuzzed_requests_are_served_unmutated(odradek_broker, fuzz_topic, attacker):
    """What the fuzz test mutates reaches the handlers: unmutated, every real request is
    answered at once (acks=-1 produce, zero-wait fetch) on the topic it names."""
    for correlation_id, frame in enumerate(fuzz.REAL_REQUESTS, start=100):
        frame = frame[:4] + struct.pack(">i", correlation_id) + frame[8:]
        attacker.send_frame(frame)
        api_key, version = struct.unpack_from(">hh", frame)
        received_id, _ = decode_response(ApiKey(api_key), version, attacker.recv_frame())
        assert received_id == correlation_id


def test_a_client_leaving_with_a_long_poll_and_a_failed_request_in_flight_disturbs_nobody(
        odradek_broker, fuzz_topic, monkeypatch, bystander, no_loop_errors):
    monkeypatch.setitem(odradek_broker.broker.dispatcher.handlers, ApiKey.LIST_OFFSETS,
                        _failing_async_handler)
    connection = RawConnection(odradek_broker.port)
    connection.send_frame(fuzz.fetch_request(12, max_wait_ms=5000))
    connection.send_frame(fuzz.list_offsets_request(7))  # fails, queued behind the fetch
    time.sleep(QUIET_SECONDS)
    connection.close()
    assert_still_serving(odradek_broker, bystander)
