"""``SocketServer``: the broker's listeners, each bound as its own asyncio server.

As in Kafka's SocketServer, every listener of ``listeners`` accepts on its own socket, and all
of them share the request path (one dispatcher) and the connection quotas:
``max.connections`` and ``max.connections.per.ip`` count connections across every listener.
A connection remembers the listener that accepted it, so that its requests are answered with
that listener's endpoints. Each listener's security (``ListenerSecurity``: its TLS context,
its SASL mechanisms) is built before anything is bound, so a listener that cannot be served
stops the broker at start with a message naming the config; ``reconfigure()`` builds them
again after a dynamic config change.

Lifecycle: ``bind()`` binds every listener without accepting, so that the ports bound for
port 0 are known before the broker registers its endpoints; ``start_serving(dispatcher)``
accepts; ``stop_accepting()`` closes the listening sockets; ``close_connections(timeout)``
waits for the requests already received to be answered, then closes every connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket

from odradek.server.config import BrokerConfig, ConfigError
from odradek.server.connection import Connection, Dispatcher
from odradek.server.connection_quotas import ConnectionQuotas
from odradek.server.listener_security import CredentialLookup, ListenerSecurity
from odradek.server.memory_pool import MemoryPool

log = logging.getLogger(__name__)

# A TLS client that connects and says nothing is dropped after this long.
SSL_HANDSHAKE_TIMEOUT_SECONDS = 10.0
# connections.max.idle.ms is checked a quarter of it apart, and at least this often.
IDLE_CHECK_MAX_INTERVAL_SECONDS = 30.0


class SocketServer:
    def __init__(self, config: BrokerConfig, credentials: CredentialLookup) -> None:
        """``credentials`` looks SCRAM users up in the metadata store."""
        self._config = config
        self._credentials = credentials
        self._listeners: dict[str, ListenerSecurity] = {}
        self._memory_pool = MemoryPool(config.get("queued.max.request.bytes"))
        self._idle_reaper: asyncio.Task | None = None
        self._connection_quotas = ConnectionQuotas(config.get)
        self._connections: set[Connection] = set()
        self._servers: dict[str, asyncio.base_events.Server] = {}
        self._dispatcher: Dispatcher | None = None

    async def bind(self) -> None:
        """Binds every listener, in the order of ``listeners``; accepts nothing yet."""
        protocols = self._config.listener_security_protocol_map
        endpoints = self._config.listeners
        for endpoint in endpoints:
            self._listeners[endpoint.name] = ListenerSecurity(
                self._config, endpoint.name, protocols[endpoint.name], self._credentials)
        loop = asyncio.get_running_loop()
        max_request_bytes = self._config.get("socket.request.max.bytes")
        try:
            for endpoint in endpoints:
                listener = self._listeners[endpoint.name]
                tls = {"ssl": listener.ssl_context,
                       "ssl_handshake_timeout": SSL_HANDSHAKE_TIMEOUT_SECONDS} \
                    if listener.uses_tls else {}
                self._servers[endpoint.name] = await loop.create_server(
                    # Called for each accepted connection, after start_serving set the dispatcher.
                    lambda listener=listener: Connection(
                        self._dispatcher, max_request_bytes, listener, self._open, self._close,
                        self._memory_pool),
                    host=endpoint.host or None,
                    port=endpoint.port,
                    reuse_address=True,
                    start_serving=False,
                    **tls,
                )
                self._size_buffers(self._servers[endpoint.name])
        except OSError:  # the listeners bound before the one that failed are let go
            self.stop_accepting()
            self._servers.clear()
            raise

    def _size_buffers(self, server: asyncio.base_events.Server) -> None:
        """``socket.send.buffer.bytes`` and ``socket.receive.buffer.bytes`` (-1: the kernel's
        own, autotuned) on the listening socket, before it accepts: every accepted connection
        inherits them, and its receive window is scaled for them from the handshake on."""
        for name, option in (("socket.send.buffer.bytes", socket.SO_SNDBUF),
                             ("socket.receive.buffer.bytes", socket.SO_RCVBUF)):
            size = self._config.get(name)
            if size != -1:
                for sock in server.sockets:
                    sock.setsockopt(socket.SOL_SOCKET, option, size)

    @property
    def bound_addresses(self) -> dict[str, tuple[str, int]]:
        """Listener name -> the (host, port) its socket is bound to, in ``listeners`` order."""
        return {name: server.sockets[0].getsockname()[:2]
                for name, server in self._servers.items()}

    def reconfigure(self) -> None:
        """Reads every listener's security configs again (a dynamic config changed); a
        listener whose new configs cannot be served keeps its current ones, with an error
        in the log."""
        for listener in self._listeners.values():
            try:
                listener.reconfigure()
            except ConfigError as exc:
                log.error("listener %s keeps its security configs: %s", listener.name, exc)

    async def start_serving(self, dispatcher: Dispatcher) -> None:
        """Accepts on every listener. Raises ``OSError`` (EADDRINUSE), accepting on none, if
        a listener's port was taken since ``bind()``: a socket bound to it then, as ours was,
        with SO_REUSEADDR, listened first."""
        self._dispatcher = dispatcher
        addresses = self.bound_addresses
        for name, server in self._servers.items():
            # asyncio's loop raises the error of its listen(); uvloop's closes the socket and
            # reports the server serving, deaf to its port. Either way the socket tells.
            with contextlib.suppress(OSError):
                await server.start_serving()
            if not _listening(server):
                self.stop_accepting()
                host, port = addresses[name]
                raise OSError(errno.EADDRINUSE, f"listener {name} cannot listen on "
                                                f"{host}:{port}: address already in use")
        self._idle_reaper = asyncio.get_running_loop().create_task(self._close_idle_connections())

    def stop_accepting(self) -> None:
        for server in self._servers.values():
            server.close()
        if self._idle_reaper is not None:
            self._idle_reaper.cancel()

    async def _close_idle_connections(self) -> None:
        """``connections.max.idle.ms``: a connection that received and sent nothing for that
        long, with no request being answered, is closed, as Kafka's Selector closes it."""
        loop = asyncio.get_running_loop()
        while True:
            idle_s = self._config.get("connections.max.idle.ms") / 1000
            await asyncio.sleep(min(max(idle_s / 4, 0.05), IDLE_CHECK_MAX_INTERVAL_SECONDS))
            quiet_since = loop.time() - idle_s
            for connection in list(self._connections):
                if not connection.answering and connection.last_active < quiet_since:
                    log.debug("closing connection from %s: idle for more than %d ms",
                              connection.peer, idle_s * 1000)
                    connection.close()

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


def _listening(server: asyncio.base_events.Server) -> bool:
    """Whether each of ``server``'s sockets is open and listening."""
    return all(sock is not None and sock.fileno() >= 0
               and sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
               for sock in server.sockets)
