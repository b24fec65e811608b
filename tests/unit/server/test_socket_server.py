"""The listeners as sockets: one server per listener, all or nothing bound, each served with
what its security protocol needs or refused at start."""

from __future__ import annotations

import asyncio
import errno
import socket

import pytest
import uvloop

from odradek.server.config import BrokerConfig, ConfigError
from odradek.server.socket_server import SocketServer

PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,SECURE:SSL,SASL:SASL_PLAINTEXT"


def socket_server(listeners: str) -> SocketServer:
    return SocketServer(BrokerConfig({"listeners": listeners,
                                      "listener.security.protocol.map": PROTOCOL_MAP}),
                        lambda user, mechanism: None)


def test_every_listener_is_bound_on_its_own_socket():
    server = socket_server("PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0")

    async def bind() -> dict[str, tuple[str, int]]:
        await server.bind()
        try:
            return server.bound_addresses
        finally:
            server.stop_accepting()
            await server.close_connections(0)

    bound = asyncio.run(bind())
    assert list(bound) == ["PLAINTEXT", "INTERNAL"]
    assert {host for host, _ in bound.values()} == {"127.0.0.1"}
    assert bound["PLAINTEXT"][1] != bound["INTERNAL"][1]


@pytest.mark.parametrize(("listener", "message"), [
    ("SECURE", "Listener SECURE: A TLS listener needs a keystore"),
    # Kafka's default mechanism is GSSAPI (Kerberos), which odradek does not serve
    ("SASL", "Listener SASL: sasl.enabled.mechanisms=GSSAPI: odradek serves PLAIN, "
             "SCRAM-SHA-256, SCRAM-SHA-512, not GSSAPI"),
])
def test_a_listener_its_configs_cannot_serve_is_refused_at_startup_by_name(listener, message):
    server = socket_server(f"PLAINTEXT://127.0.0.1:0,{listener}://127.0.0.1:0")
    with pytest.raises(ConfigError, match=message):
        asyncio.run(server.bind())
    assert server.bound_addresses == {}


def test_a_listener_that_cannot_bind_leaves_no_other_listener_bound():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = socket_server(f"PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:{port}")
        with pytest.raises(OSError):
            asyncio.run(server.bind())
    assert server.bound_addresses == {}


@pytest.mark.parametrize("run", [asyncio.run, uvloop.run], ids=["asyncio", "uvloop"])
def test_a_port_another_socket_took_after_the_bind_fails_the_start_instead_of_serving_deaf(run):
    """The other socket bound the port with SO_REUSEADDR while ours was bound and not yet
    listening (so both binds succeed), and listened first. asyncio's loop raises the error
    of our listen(); uvloop's swallows it and reports the server as serving."""
    server = socket_server("PLAINTEXT://127.0.0.1:0")

    async def start() -> None:
        await server.bind()
        host, port = server.bound_addresses["PLAINTEXT"]
        with socket.socket() as rival:
            rival.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            rival.bind((host, port))
            rival.listen()
            try:
                await server.start_serving(lambda frame, context: None)
            finally:
                server.stop_accepting()
                await server.close_connections(0)

    with pytest.raises(OSError, match="listener PLAINTEXT cannot listen on 127.0.0.1:") as raised:
        run(start())
    assert raised.value.errno == errno.EADDRINUSE


def accepted_buffers(configs: dict[str, str]) -> tuple[int, int]:
    """SO_SNDBUF and SO_RCVBUF of the broker's side of a connection a client opens to a
    listener with ``configs``."""
    server = SocketServer(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", **configs}),
                          lambda user, mechanism: None)

    async def connect() -> tuple[int, int]:
        await server.bind()
        await server.start_serving(lambda frame, context: None)
        try:
            _, writer = await asyncio.open_connection(*server.bound_addresses["PLAINTEXT"])
            for _ in range(200):  # the accept runs on a later turn of the loop
                if server._connections:
                    break
                await asyncio.sleep(0.01)
            (connection,) = server._connections
            accepted = connection._transport.get_extra_info("socket")
            writer.close()
            return (accepted.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
                    accepted.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))
        finally:
            server.stop_accepting()
            await server.close_connections(0)

    return asyncio.run(connect())


def test_every_accepted_connection_has_the_configured_socket_buffers():
    # Linux doubles what it is given, to leave room for its own bookkeeping.
    assert accepted_buffers({"socket.send.buffer.bytes": "65536",
                             "socket.receive.buffer.bytes": "98304"}) == (131072, 196608)


def test_by_default_the_kernel_sizes_the_socket_buffers():
    with open("/proc/sys/net/ipv4/tcp_wmem") as wmem, open("/proc/sys/net/ipv4/tcp_rmem") as rmem:
        initial = int(wmem.read().split()[1]), int(rmem.read().split()[1])
    sent, received = accepted_buffers({})
    # Autotuned buffers start at the kernel's initial size and may only have grown since.
    assert sent >= initial[0] and received >= initial[1]
    assert (sent, received) != (2 * 102400, 2 * 102400)
