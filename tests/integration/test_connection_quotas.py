"""max.connections and max.connections.per.ip: connections over a limit are closed at once,
while the connections already admitted keep being served."""

from __future__ import annotations

import socket
import struct

import pytest
from confluent_kafka.admin import AdminClient

import kafka_requests

TIMEOUT_SECONDS = 5


def open_connection(port: int) -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_SECONDS)
    connection.settimeout(TIMEOUT_SECONDS)
    return connection


def api_versions_round_trip(connection: socket.socket) -> bool:
    """True when the broker answers an ApiVersions request; False when it closed on us."""
    request = kafka_requests.api_versions_request(3, correlation_id=7)
    try:
        connection.sendall(struct.pack(">i", len(request)) + request)
        (size,) = struct.unpack(">i", recv_exactly(connection, 4))
        body = recv_exactly(connection, size)
    except (ConnectionResetError, BrokenPipeError, EOFError):
        return False
    return struct.unpack_from(">i", body)[0] == 7


def recv_exactly(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            raise EOFError("closed by the broker")
        data += chunk
    return data


@pytest.mark.odradek_config(max_connections_per_ip=3)
def test_a_connection_over_max_connections_per_ip_is_closed(odradek_broker):
    admitted = [open_connection(odradek_broker.port) for _ in range(3)]
    try:
        assert all(api_versions_round_trip(c) for c in admitted)

        with open_connection(odradek_broker.port) as refused:
            assert not api_versions_round_trip(refused)

        assert all(api_versions_round_trip(c) for c in admitted)
    finally:
        for connection in admitted:
            connection.close()


@pytest.mark.odradek_config(max_connections=2)
def test_a_freed_connection_slot_admits_the_next_client(odradek_broker):
    first, second = open_connection(odradek_broker.port), open_connection(odradek_broker.port)
    assert api_versions_round_trip(first) and api_versions_round_trip(second)
    with open_connection(odradek_broker.port) as refused:
        assert not api_versions_round_trip(refused)

    first.close()
    second.close()

    admin = AdminClient({"bootstrap.servers": odradek_broker.bootstrap_servers, "log_level": 2})
    assert odradek_broker.broker.node_id in admin.list_topics(timeout=10).brokers
