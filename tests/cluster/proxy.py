"""A loopback TCP proxy in front of one broker's inter-broker listener, to cut brokers off
from each other without touching the machine's network.

Each broker advertises its proxy's port on the inter-broker listener, so every fetch from
another broker passes through the proxy of the broker it fetches from. The proxy reads the
first request of each connection and learns which broker opened it from its client id
(``broker-<id>-...``, as the brokers' fetchers name themselves). Cutting broker X off is
then: X's proxy refuses every broker, and every other proxy refuses X. Connections a new
rule refuses are closed at once, as a network partition would break them; new ones are
refused (closed after their first request).

The proxy runs its own event loop on a thread; tests call it from their own thread.
"""

from __future__ import annotations

import asyncio
import re
import socket
import struct
import threading

_CLIENT_ID = re.compile(rb"broker-(\d+)")
# size int32, api_key int16, api_version int16, correlation_id int32, client_id length int16
_PREFIX = struct.Struct(">ihhih")


class InterBrokerProxy:
    def __init__(self, target_port: int, host: str = "127.0.0.1") -> None:
        self.host = host
        self.target_port = target_port
        with socket.socket() as probe:
            probe.bind((host, 0))
            self.port = probe.getsockname()[1]
        self._blocked: set[int] = set()
        self._block_all = False
        self._connections: set[tuple[int | None, asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._server: asyncio.AbstractServer | None = None

    # -- control, from the test's thread -------------------------------------------------

    def start(self) -> InterBrokerProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the proxy did not start")
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def refuse(self, brokers: set[int] | None = None) -> None:
        """Refuses connections from ``brokers`` (every broker when None) from now on, and
        closes theirs."""
        self._call(self._refuse, brokers)

    def allow_all(self) -> None:
        self._call(self._allow_all)

    def _call(self, function, *args) -> None:
        done = threading.Event()

        def call() -> None:
            function(*args)
            done.set()

        self._loop.call_soon_threadsafe(call)
        if not done.wait(10):
            raise RuntimeError("the proxy did not answer")

    # -- the proxy's own loop ------------------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._accept, self.host, self.port))
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._server.close()
            for _, a, b in list(self._connections):
                a.close()
                b.close()
            self._loop.close()

    def _refused(self, source: int | None) -> bool:
        return self._block_all or source in self._blocked

    def _refuse(self, brokers: set[int] | None) -> None:
        if brokers is None:
            self._block_all = True
        else:
            self._blocked |= brokers
        for connection in list(self._connections):
            source, client, target = connection
            if self._refused(source):
                client.close()
                target.close()
                self._connections.discard(connection)

    def _allow_all(self) -> None:
        self._block_all = False
        self._blocked.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            prefix = await reader.readexactly(_PREFIX.size)
            length = _PREFIX.unpack(prefix)[4]
            client_id = await reader.readexactly(max(length, 0))
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        match = _CLIENT_ID.search(client_id)
        source = int(match.group(1)) if match else None
        if self._refused(source):
            writer.close()
            return
        try:
            target_reader, target_writer = await asyncio.open_connection(self.host,
                                                                         self.target_port)
        except OSError:
            writer.close()
            return
        connection = (source, writer, target_writer)
        self._connections.add(connection)
        target_writer.write(prefix + client_id)
        await asyncio.gather(self._pipe(reader, target_writer), self._pipe(target_reader, writer))
        self._connections.discard(connection)

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(1 << 16):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()
