"""What a broker holds for clients that hold on: ``queued.max.request.bytes`` bounds the
memory of requests still being received, and ``connections.max.idle.ms`` closes connections
that do nothing; ordinary clients are served throughout."""

from __future__ import annotations

import socket
import struct
import time

import confluent_kafka
from kafka_requests import metadata_request

from odradek.testing.embedded import EmbeddedBroker

QUEUED_MAX_REQUEST_BYTES = 32 * 1024 * 1024
SLOW_CONNECTIONS = 200
ANNOUNCED_BYTES = 100 * 1024 * 1024 - 1  # under socket.request.max.bytes
SENT_BYTES = 4 * 1024 * 1024
SEND_SECONDS = 5.0
CHUNK = b"\0" * 65536
TIMEOUT_SECONDS = 20


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


def serve_ordinary_client(broker: EmbeddedBroker, topic: str, count: int = 100) -> list[bytes]:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(count):
        producer.produce(topic, f"record-{i}".encode())
    assert producer.flush(TIMEOUT_SECONDS) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers,
                                         "group.id": "ordinary", "auto.offset.reset": "earliest"})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    got: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_SECONDS
    try:
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    return got


def test_slow_large_requests_hold_no_more_than_queued_max_request_bytes_and_others_are_served(
        tmp_path):
    with EmbeddedBroker(tmp_path, queued_max_request_bytes=QUEUED_MAX_REQUEST_BYTES) as broker:
        serve_ordinary_client(broker, "warm-up", 10)  # the broker's own start-up allocations
        before = resident_bytes()
        slow = []
        try:
            for _ in range(SLOW_CONNECTIONS):
                connection = socket.create_connection(("127.0.0.1", broker.port))
                connection.setblocking(False)
                slow.append([connection, 0])
            header = struct.pack(">i", ANNOUNCED_BYTES)
            for entry in slow:
                entry[0].send(header)
            # each connection sends what the broker takes of its 4 MB, for a few seconds
            deadline = time.monotonic() + SEND_SECONDS
            while time.monotonic() < deadline and any(sent < SENT_BYTES for _, sent in slow):
                for entry in slow:
                    if entry[1] < SENT_BYTES:
                        try:
                            entry[1] += entry[0].send(CHUNK)
                        except BlockingIOError:
                            pass
            grown = resident_bytes() - before
            # while they hold on, an ordinary client produces and consumes
            assert len(serve_ordinary_client(broker, "served-meanwhile")) == 100
        finally:
            for connection, _ in slow:
                connection.close()
    sent_in_total = sum(sent for _, sent in slow)
    # the bound, and at most one read (256 KB) more per connection on top of it
    assert grown < QUEUED_MAX_REQUEST_BYTES + SLOW_CONNECTIONS * 256 * 1024, (grown, sent_in_total)
    assert sent_in_total > 2 * QUEUED_MAX_REQUEST_BYTES  # the clients did try to send more


def test_an_idle_connection_is_closed_after_connections_max_idle_ms_and_a_busy_one_is_not(
        tmp_path):
    with EmbeddedBroker(tmp_path, connections_max_idle_ms=500) as broker:
        with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as idle, \
                socket.create_connection(("127.0.0.1", broker.port), timeout=5) as busy:
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                frame = metadata_request(12, None)
                busy.sendall(struct.pack(">i", len(frame)) + frame)
                (size,) = struct.unpack(">i", busy.recv(4, socket.MSG_WAITALL))
                busy.recv(size, socket.MSG_WAITALL)
                time.sleep(0.2)
            assert idle.recv(1) == b""  # closed by the broker
            busy.sendall(struct.pack(">i", len(frame)) + frame)
            assert busy.recv(4, socket.MSG_WAITALL)  # still served
