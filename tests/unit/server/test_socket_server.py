"""The listeners as sockets: one server per listener, PLAINTEXT only, all or nothing bound."""

from __future__ import annotations

import asyncio
import socket

import pytest

from odradek.server.config import BrokerConfig, ConfigError
from odradek.server.socket_server import SocketServer

PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,SECURE:SSL,SASL:SASL_PLAINTEXT"


def socket_server(listeners: str) -> SocketServer:
    return SocketServer(BrokerConfig({"listeners": listeners,
                                      "listener.security.protocol.map": PROTOCOL_MAP}))


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


@pytest.mark.parametrize(("listener", "protocol"), [("SECURE", "SSL"),
                                                    ("SASL", "SASL_PLAINTEXT")])
def test_a_listener_that_is_not_plaintext_is_refused_at_startup_by_name(listener, protocol):
    server = socket_server(f"PLAINTEXT://127.0.0.1:0,{listener}://127.0.0.1:0")
    with pytest.raises(ConfigError, match=f"Listener {listener} uses security protocol "
                                          f"{protocol}, which odradek does not serve"):
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
