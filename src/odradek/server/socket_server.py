"""``SocketServer``: the broker's listeners, each bound as its own asyncio server.

As in Kafka's SocketServer, every listener of ``listeners`` accepts on its own socket, and all
of them share the request path (one dispatcher) and the connection quotas:
``max.connections`` and ``max.connections.per.ip`` count connections across every listener.
A connection remembers the listener that accepted it, so that its requests are answered with
that listener's endpoints. Only PLAINTEXT is served: a listener whose security protocol is
SSL or SASL is refused when the broker starts, before anything is bound.

Lifecycle: ``bind()`` binds every listener without accepting, so that the ports bound for
port 0 are known before the broker registers its endpoints; ``start_serving(dispatcher)``
accepts; ``stop_accepting()`` closes the listening sockets; ``close_connections(timeout)``
waits for the requests already received to be answered, then closes every connection.
"""

from __future__ import annotations

import asyncio

from odradek.server.config import BrokerConfig, ConfigError, SecurityProtocol
from odradek.server.connection import Connection, Dispatcher
from odradek.server.connection_quotas import ConnectionQuotas

SERVED_PROTOCOLS = frozenset({SecurityProtocol.PLAINTEXT})


class SocketServer:
    def __init__(self, config: BrokerConfig) -> None:
        self._config = config
        self._connection_quotas = ConnectionQuotas(config.get)
        self._connections: set[Connection] = set()
        self._servers: dict[str, asyncio.base_events.Server] = {}
        self._dispatcher: Dispatcher | None = None

    async def bind(self) -> None:
        """Binds every listener, in the order of ``listeners``; accepts nothing yet."""
        protocols = self._config.listener_security_protocol_map
        listeners = [(endpoint, protocols[endpoint.name]) for endpoint in self._config.listeners]
        for endpoint, protocol in listeners:
            if protocol not in SERVED_PROTOCOLS:
                raise ConfigError(
                    f"Listener {endpoint.name} uses security protocol {protocol}, which odradek "
                    "does not serve: only PLAINTEXT listeners can be bound", "listeners")
        loop = asyncio.get_running_loop()
        max_request_bytes = self._config.get("socket.request.max.bytes")
        try:
            for endpoint, protocol in listeners:
                listener = (endpoint.name, protocol)
                self._servers[endpoint.name] = await loop.create_server(
                    # Called for each accepted connection, after start_serving set the dispatcher.
                    lambda listener=listener: Connection(
                        self._dispatcher, max_request_bytes, listener, self._open, self._close),
                    host=endpoint.host or None,
                    port=endpoint.port,
                    reuse_address=True,
                    start_serving=False,
                )
        except OSError:  # the listeners bound before the one that failed are let go
            self.stop_accepting()
            self._servers.clear()
            raise

    @property
    def bound_addresses(self) -> dict[str, tuple[str, int]]:
        """Listener name -> the (host, port) its socket is bound to, in ``listeners`` order."""
        return {name: server.sockets[0].getsockname()[:2]
                for name, server in self._servers.items()}

    async def start_serving(self, dispatcher: Dispatcher) -> None:
        self._dispatcher = dispatcher
        for server in self._servers.values():
            await server.start_serving()

    def stop_accepting(self) -> None:
        for server in self._servers.values():
            server.close()

    async def close_connections(self, drain_seconds: float) -> None:
        """Answers the requests already received (waiting at most ``drain_seconds``), then
        closes every connection."""
        connections = list(self._connections)
        if connections:
            await asyncio.wait([asyncio.ensure_future(c.drain()) for c in connections],
                               timeout=drain_seconds)
        for connection in connections:
            connection.close()
        for server in self._servers.values():
            await server.wait_closed()

    def _open(self, connection: Connection) -> str | None:
        refusal = self._connection_quotas.admit(connection.peer_host)
        if refusal is None:
            self._connections.add(connection)
        return refusal

    def _close(self, connection: Connection) -> None:
        self._connections.discard(connection)
        self._connection_quotas.release(connection.peer_host)
